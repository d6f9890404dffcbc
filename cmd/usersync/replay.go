package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

type replayOptions struct {
	status string
	since  string
	dryRun bool
}

// replayCommand is `usersync replay`.
func replayCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts replayOptions
	fs.StringVar(&opts.status, "status", "failed", "replay the events with this status: failed or stored")
	fs.StringVar(&opts.since, "since", "", "only events received since this RFC 3339 time, or this long ago (e.g. 24h, 7d)")
	fs.BoolVar(&opts.dryRun, "dry-run", false, "list what would be replayed, change nothing")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runReplay(ctx, cfg, opts, out) }
}

// runReplay processes every stored or failed event again, a page at a
// time in Clerk's order, through sync.Service.Replay (the sweep's code),
// printing a progress line after each page.
func runReplay(ctx context.Context, cfg config, opts replayOptions, out io.Writer) error {
	if opts.status != string(models.StatusFailed) && opts.status != string(models.StatusStored) {
		return fmt.Errorf("-status %q: replay takes failed or stored events (processed ones are final)", opts.status)
	}
	since, err := parseSince(opts.since, time.Now())
	if err != nil {
		return err
	}
	log := newLogger(cfg) // to standard error: progress and results go to out
	store, closeStore, err := openStore(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer closeStore()

	f := models.EventFilter{Status: models.EventStatus(opts.status), Since: since, Limit: replayPage}
	svc := newService(cfg, store)
	var tally replayTally
	// A page at a time (never the whole log in memory), each in Clerk's
	// order, through the sweep's code.
	for {
		page, err := store.Events().List(ctx, f)
		if err != nil {
			fmt.Fprintln(out, tally.line())
			return fmt.Errorf("replay stopped after %d events: %w", tally.seen, err)
		}
		if opts.dryRun {
			for _, ev := range page.Events {
				tally.seen++
				fmt.Fprintf(out, "%s %s %s received %s attempts %d %s\n", ev.EventID, ev.Type, ev.UserID,
					ev.ReceivedAt.Format(time.RFC3339), ev.Attempts, ev.Error)
			}
		} else if err := svc.Replay(ctx, page.Events, replayLease, tally.add); err != nil {
			fmt.Fprintln(out, tally.line())
			return fmt.Errorf("replay stopped after %d events: %w", tally.seen, err)
		}
		if page.NextCursor == "" {
			break
		}
		f.After = page.NextCursor
		if !opts.dryRun {
			fmt.Fprintln(out, tally.line())
		}
	}
	if opts.dryRun {
		fmt.Fprintf(out, "replay: dry run: %d %s events would be replayed\n", tally.seen, opts.status)
		return nil
	}
	fmt.Fprintln(out, tally.line())
	return nil
}

// replayPage is how many events one page of a replay holds; replayLease
// how long a replay holds each event it processes.
const (
	replayPage  = 100
	replayLease = time.Minute
)

// parseSince reads -since: an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-since %q: not an RFC 3339 time nor a duration such as 24h or 7d", s)
	}
	return now.Add(-d), nil
}

type replayTally struct {
	seen, processed, failed, skipped int
	outcomes                         map[models.Outcome]int
}

func (t *replayTally) add(r sync.Replayed) {
	t.seen++
	if t.outcomes == nil {
		t.outcomes = map[models.Outcome]int{}
	}
	switch {
	case r.Skip != "":
		t.skipped++ // processed or claimed meanwhile (by a delivery or the sweep), or gone
	case r.Result.Status == models.StatusProcessed:
		t.processed++
		t.outcomes[r.Result.Outcome]++
	default:
		t.failed++
	}
}

func (t *replayTally) line() string {
	return fmt.Sprintf("replay: %d events: processed %d (applied %d, stale %d, deleted %d), failed %d, skipped %d",
		t.seen, t.processed, t.outcomes[models.OutcomeApplied], t.outcomes[models.OutcomeStale],
		t.outcomes[models.OutcomeDeleted], t.failed, t.skipped)
}
