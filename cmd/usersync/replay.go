package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
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

// replayProgressEvery is how many events go between two progress lines.
const replayProgressEvery = 100

// runReplay processes every stored or failed event again, in Clerk's order,
// through the same code as a webhook delivery.
func runReplay(ctx context.Context, cfg config, opts replayOptions, out io.Writer) error {
	if opts.status != string(models.StatusFailed) && opts.status != string(models.StatusStored) {
		return fmt.Errorf("-status %q: replay takes failed or stored events (processed ones are final)", opts.status)
	}
	since, err := parseSince(opts.since, time.Now())
	if err != nil {
		return err
	}
	log := newLogger(cfg) // to standard error: progress and results go to out
	store, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()

	evs, err := listAll(ctx, store, models.EventFilter{Status: models.EventStatus(opts.status), Since: since})
	if err != nil {
		return err
	}
	// Clerk's order, oldest state first: a user's events apply in sequence.
	slices.SortStableFunc(evs, func(a, b models.Event) int {
		return timeOrZero(a.SourceTimestamp).Compare(timeOrZero(b.SourceTimestamp))
	})
	if opts.dryRun {
		for _, ev := range evs {
			fmt.Fprintf(out, "%s %s %s received %s attempts %d %s\n", ev.EventID, ev.Type, ev.UserID,
				ev.ReceivedAt.Format(time.RFC3339), ev.Attempts, ev.Error)
		}
		fmt.Fprintf(out, "replay: dry run: %d %s events would be replayed\n", len(evs), opts.status)
		return nil
	}

	svc := newService(cfg, store)
	var tally replayTally
	for i, summary := range evs {
		ev, err := store.Events().Get(ctx, summary.ID)
		if errors.Is(err, models.ErrNotFound) {
			continue // removed meanwhile
		}
		if err == nil && ev.Status == models.StatusProcessed {
			tally.skipped++ // processed meanwhile (by a delivery or the sweep)
			continue
		}
		var res sync.Result
		if err == nil {
			res, err = svc.Process(ctx, ev)
		}
		if errors.Is(err, models.ErrUnavailable) || ctx.Err() != nil {
			fmt.Fprintln(out, tally.line(i, len(evs)))
			return fmt.Errorf("replay stopped after %d of %d events: %w", i, len(evs), err)
		}
		tally.add(res)
		if (i+1)%replayProgressEvery == 0 && i+1 < len(evs) {
			fmt.Fprintln(out, tally.line(i+1, len(evs)))
		}
	}
	fmt.Fprintln(out, tally.line(len(evs), len(evs)))
	return nil
}

// listAll reads every page of the event log that matches f.
func listAll(ctx context.Context, store repository.Store, f models.EventFilter) ([]models.Event, error) {
	var all []models.Event
	f.Limit = 500
	for {
		page, err := store.Events().List(ctx, f)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if page.NextCursor == "" {
			return all, nil
		}
		f.After = page.NextCursor
	}
}

func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

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
	processed, failed, skipped int
	outcomes                   map[models.Outcome]int
}

func (t *replayTally) add(res sync.Result) {
	if t.outcomes == nil {
		t.outcomes = map[models.Outcome]int{}
	}
	if res.Status == models.StatusProcessed {
		t.processed++
		t.outcomes[res.Outcome]++
	} else {
		t.failed++
	}
}

func (t *replayTally) line(done, total int) string {
	// deleted (an organization's or membership's) only when there are
	// some: a store of users alone reads as before.
	deleted := ""
	if n := t.outcomes[models.OutcomeDeleted]; n > 0 {
		deleted = fmt.Sprintf(", deleted %d", n)
	}
	return fmt.Sprintf("replay: %d/%d events: processed %d (applied %d, stale %d, deleted_user %d%s), failed %d, already processed %d",
		done, total, t.processed, t.outcomes[models.OutcomeApplied], t.outcomes[models.OutcomeStale],
		t.outcomes[models.OutcomeDeletedUser], deleted, t.failed, t.skipped)
}
