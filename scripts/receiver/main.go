// Command receiver is an application's endpoint for usersync's outbound
// webhooks, to try them locally: it verifies each message's signature with
// svix's library, as an application does (docs/outbound.md), prints one
// line for it, and answers 204, or 401 when no secret verifies it.
//
//	go run ./scripts/receiver [-addr 127.0.0.1:9000] [-secret-file FILE]
//
// Its secrets are read from -secret-file at each message, one a line (so
// that a rotation is deployed by writing the new secret there), else from
// USERSYNC_WEBHOOK_SECRET, separated by spaces; a message verifies if one
// of them verifies one of its signatures. See "Try outbound" in
// docs/outbound.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

// maxBody bounds a message read: usersync's are far smaller.
const maxBody = 1 << 20

// run serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9000", "listen address, host:port")
	file := fs.String("secret-file", "", "a file of the endpoint's secrets (whsec_…), one a line, read at each message; else USERSYNC_WEBHOOK_SECRET")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (receiver -h lists the flags)", fs.Arg(0))
	}
	secrets := func() ([]string, error) {
		if *file == "" {
			return strings.Fields(getenv("USERSYNC_WEBHOOK_SECRET")), nil
		}
		b, err := os.ReadFile(*file)
		return strings.Fields(string(b)), err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	from := "USERSYNC_WEBHOOK_SECRET"
	if *file != "" {
		from = *file
	}
	fmt.Fprintf(out, "receiver: listening on http://%s, verifying with the secrets of %s\n", ln.Addr(), from)
	srv := &http.Server{Handler: handler(secrets, out), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler verifies each POST with the secrets secrets returns, and prints
// a line for it.
func handler(secrets func() ([]string, error), out io.Writer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		id := r.Header.Get("webhook-id")
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		if err := verify(secrets, body, r.Header); err != nil {
			fmt.Fprintf(out, "NOT verified: %v, webhook-id %s\n", err, id)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var msg struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &msg)
		n := len(strings.Fields(r.Header.Get("webhook-signature")))
		plural := "s"
		if n == 1 {
			plural = ""
		}
		fmt.Fprintf(out, "verified %s, webhook-id %s, %d signature%s\n", msg.Type, id, n, plural)
		w.WriteHeader(http.StatusNoContent)
	})
}

// verify reports whether one of the secrets verifies body and its headers
// (svix's Verify: one of the signatures, and a timestamp within 5 minutes).
func verify(secrets func() ([]string, error), body []byte, h http.Header) error {
	list, err := secrets()
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return errors.New("no secret to verify with")
	}
	for _, s := range list {
		wh, err := svix.NewWebhook(s)
		if err != nil {
			return errors.New("a secret is not whsec_ and base64")
		}
		if wh.Verify(body, h) == nil {
			return nil
		}
	}
	return errors.New("no secret verifies its signatures")
}
