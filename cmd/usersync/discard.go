package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// discardCommand is `usersync discard <eventId> -reason "..."`.
func discardCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var reason string
	fs.StringVar(&reason, "reason", "", "why the event is discarded (required; at most 1000 bytes), kept with it")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runDiscard(ctx, cfg, reason, out) }
}

// operands names the operand of each command that takes one, before its
// flags: `usersync discard <eventId> -reason ...`.
var operands = map[string]string{"discard": "eventId"}

// splitOperand takes the operand of command name off the front of args,
// if it takes one and it is there.
func splitOperand(name string, args []string) (operand string, rest []string) {
	if _, ok := operands[name]; ok && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// runDiscard gives up on one failed event for good, as POST
// /v1/events/{id}/discard does: the event is kept, as discarded, with
// when, why and who (the command line's user and host), and is never
// applied or replayed again.
func runDiscard(ctx context.Context, cfg config, reason string, out io.Writer) error {
	id := cfg.operand
	switch {
	case id == "":
		return errors.New("name the event: usersync discard <eventId> -reason \"why\" (its svix-id or stored id)")
	case len(id) > 256:
		return errors.New("the event id is longer than 256 characters")
	}
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return errors.New("-reason is required: say why the event is discarded")
	case len(reason) > models.MaxDiscardReason:
		return fmt.Errorf("-reason is longer than %d bytes", models.MaxDiscardReason)
	}
	store, closeStore, err := openStore(ctx, cfg, newLogger(cfg), false)
	if err != nil {
		return err
	}
	defer closeStore()
	d := models.Discard{At: time.Now().UTC().Truncate(time.Millisecond), Reason: reason, By: commandLineUser()}
	ev, err := store.Events().Discard(ctx, id, d)
	var pe *models.PublicError
	switch {
	case errors.Is(err, models.ErrNotFound):
		return fmt.Errorf("no event has the id or svix-id %s", models.Quote(id))
	case errors.As(err, &pe):
		return errors.New(pe.Msg)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "discard: %s %s %s discarded at %s by %s: %s\n", orNoID(ev.EventID), ev.Type, ev.ID,
		d.At.Format(time.RFC3339), d.By, reason)
	return nil
}

// commandLineUser names who discards from the command line: "command
// line", the OS user and the host, bounded.
func commandLineUser() string {
	who := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who = u.Username
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		who += "@" + host
	}
	by := "command line (" + who + ")"
	if len(by) > models.MaxDiscardBy {
		by = strings.ToValidUTF8(by[:models.MaxDiscardBy], "")
	}
	return by
}
