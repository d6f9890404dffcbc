package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/sync"
)

// backfillOptions are the flags of usersync backfill.
type backfillOptions struct {
	limit  int // users per page, 1 to clerk.MaxPageLimit
	offset int // where to start (or resume) in Clerk's list
}

// backfillCommand is `usersync backfill`: a reconcile without deletions,
// which may start anywhere in Clerk's list.
func backfillCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts backfillOptions
	fs.IntVar(&opts.limit, "limit", clerk.MaxPageLimit, "users per page read from Clerk, 1 to 500")
	fs.IntVar(&opts.offset, "offset", 0, "start at this offset in Clerk's user list (to resume a run that stopped)")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runBackfill(ctx, cfg, opts, out) }
}

// clerkRetry is the retry policy of every read from Clerk; tests shorten it.
var clerkRetry = clerk.DefaultRetry

// newClerk returns a client of Clerk's Backend API, within CLERK_API_RATE,
// that reports its waits to out, as "<prefix>: offset N: ..." lines.
func newClerk(cfg config, out io.Writer, prefix string) (*clerk.Client, error) {
	c, err := clerk.New(cfg.ClerkAPIURL, string(cfg.ClerkSecretKey))
	if err != nil {
		return nil, err
	}
	c.Retry = clerkRetry
	if cfg.ClerkAPIRate > 0 {
		// One limiter for every read of the process: the lists of every
		// kind, their re-checks and the sync routes wait their turn in it.
		c.Limiter = clerk.NewLimiter(cfg.ClerkAPIRate, clerk.DefaultPer)
	}
	if out != nil {
		c.OnRetry = func(r clerk.Retry) {
			if r.Throttled {
				fmt.Fprintf(out, "%s: %s: rate limited by Clerk, waiting %s\n", prefix, r.What, r.Wait)
			} else {
				fmt.Fprintf(out, "%s: %s: %v; trying again in %s\n", prefix, r.What, r.Err, r.Wait)
			}
		}
	}
	return c, nil
}

// runBackfill reads every user from Clerk's Backend API, page by page in
// creation order, and applies each one as a user.updated webhook carrying
// that state would be (see sync.Reconciler, which does the work).
//
// A user that can never be applied is counted as failed and the run goes
// on. Any other failure stops the run with an error that says where it
// stopped; every user before that point is applied, so a rerun, from the
// start or with -offset, completes the job.
func runBackfill(ctx context.Context, cfg config, opts backfillOptions, out io.Writer) error {
	cl, err := newClerk(cfg, out, "backfill")
	if err != nil {
		return err
	}
	if opts.limit < 1 || opts.limit > clerk.MaxPageLimit {
		return fmt.Errorf("-limit: %d is not between 1 and %d", opts.limit, clerk.MaxPageLimit)
	}
	if opts.offset < 0 {
		return fmt.Errorf("-offset: %d is negative", opts.offset)
	}
	rec, store, closeStore, err := openReconciler(ctx, cfg, cl)
	if err != nil {
		return err
	}
	defer closeStore()

	rep, err := rec.Run(ctx, sync.ReconcileOptions{
		Offset: opts.offset, Limit: opts.limit,
		OnPage: func(offset int, page sync.Tally) {
			fmt.Fprintf(out, "backfill: offset %d: %s\n", offset, backfillTally(page))
		},
		OnUser: func(n sync.UserNote) {
			if n.Action == sync.NoteFailed {
				fmt.Fprintf(out, "backfill: offset %d: user %s not applied: %v\n", n.Offset, orNoID(n.UserID), n.Err)
			}
		},
	})
	if rerr := recordRun(ctx, store.Runs(), kindBackfill, triggerCommand, rep, err); rerr != nil {
		fmt.Fprintf(out, "backfill: %v\n", rerr)
	}
	var stopped *sync.StoppedError
	if errors.As(err, &stopped) {
		fmt.Fprintf(out, "backfill: stopped at offset %d after %s\n", stopped.Offset, backfillTally(rep.Listed))
		if stopped.Offset == 0 {
			return fmt.Errorf("backfill stopped at offset 0: %w; rerun to complete the job", stopped.Err)
		}
		return fmt.Errorf("backfill stopped at offset %d: %w; the users before it are applied: rerun, with -offset %d to go on from there, to complete the job",
			stopped.Offset, stopped.Err, stopped.Offset)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "backfill: done, offsets %d to %d: %s\n", rep.Offset, rep.End, backfillTally(rep.Listed))
	return nil
}

// backfillTally is a tally as backfill has always printed it: a state equal
// to a webhook's counts as stale.
func backfillTally(t sync.Tally) string {
	noun := "users"
	if t.Users == 1 {
		noun = "user"
	}
	return fmt.Sprintf("%d %s (applied %d, stale %d, deleted_user %d, duplicate %d, failed %d)",
		t.Users, noun, t.Applied, t.Stale+t.Unchanged, t.DeletedUser, t.Duplicate, t.Failed)
}

func orNoID(userID string) string {
	if userID == "" {
		return "(no id)"
	}
	return userID
}
