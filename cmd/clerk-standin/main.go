// Command clerk-standin serves a stand-in for Clerk's Backend API from
// fixture files, so that usersync's backfill, reconcile and sync routes
// can be tried without a Clerk instance: users, organizations,
// memberships and Clerk Billing's subscription items, paged by limit and
// offset as Clerk pages them, and a 429
// every Nth request (-throttle-every), which usersync waits out as it does
// Clerk's. It is the fake the tests use (package clerk/clerktest).
//
//	go run ./cmd/clerk-standin    # then CLERK_API_URL=http://127.0.0.1:8081/v1
//
// See "Try reconcile locally" in docs/operations.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/usersync/usersync/clerk/clerktest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "clerk-standin:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends; ready, if set, gets the API's base URL once
// it listens.
func run(ctx context.Context, args []string, out io.Writer, ready func(url string)) error {
	fs := flag.NewFlagSet("clerk-standin", flag.ContinueOnError)
	fs.SetOutput(out)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address, host:port (keep it on loopback: usersync sends its secret key to it over http only there)")
	dir := fs.String("fixtures", "testdata/clerk-standin", "the directory of users.json, organizations.json, memberships.json, invitations.json and subscription_items.json")
	every := fs.Int("throttle-every", 5, "answer every Nth request 429 Too Many Requests, as Clerk past its rate limit; 0: never")
	retryAfter := fs.Int("retry-after", 1, "the Retry-After, in seconds, of those 429s")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (clerk-standin -h lists the flags)", fs.Arg(0))
	}
	if *every < 0 || *retryAfter < 0 {
		return errors.New("-throttle-every and -retry-after must be 0 or more")
	}
	users, orgs, members, err := clerktest.LoadFixtures(*dir)
	if err != nil {
		return err
	}
	items, err := clerktest.LoadSubscriptionItems(*dir)
	if err != nil {
		return err
	}
	invites, err := clerktest.LoadInvitations(*dir)
	if err != nil {
		return err
	}
	c := clerktest.NewServer(users, orgs, members)
	c.SetSubscriptionItems(items)
	c.SetInvitations(invites)
	c.KeepNoRequests()
	c.Throttle(*every, *retryAfter)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/v1"
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "clerk-standin: %d users, %d organizations, %d memberships, %d invitations, %d subscription items from %s at %s (a 429 every %d requests; 0: none)\n",
		len(users), len(orgs), len(members), len(invites), len(items), *dir, url, *every)
	fmt.Fprintf(out, "clerk-standin: set CLERK_API_URL=%s and any CLERK_SECRET_KEY (sk_test_standin)\n", url)
	if ready != nil {
		ready(url)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
