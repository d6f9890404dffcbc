package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// backfillOptions are the flags of usersync backfill.
type backfillOptions struct {
	limit  int    // objects per page, 1 to clerk.MaxPageLimit
	offset int    // where to start (or resume) in Clerk's list of the one kind
	kinds  string // the kinds to read, comma-separated
}

// backfillCommand is `usersync backfill`: a reconcile without deletions,
// which may start anywhere in Clerk's list.
func backfillCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts backfillOptions
	fs.IntVar(&opts.limit, "limit", clerk.MaxPageLimit, "objects per page read from Clerk, 1 to 500")
	fs.IntVar(&opts.offset, "offset", 0, "start at this offset in the list of the one kind -kinds names (to resume a run that stopped)")
	fs.StringVar(&opts.kinds, "kinds", "", "comma-separated kinds (default "+allKinds+")")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runBackfill(ctx, cfg, opts, out) }
}

// newClerk returns a client of Clerk's Backend API, within CLERK_API_RATE,
// that reports its waits to out, as "<prefix>: offset N: ..." lines.
func newClerk(cfg config, out io.Writer, prefix string) (*clerk.Client, error) {
	c, err := clerk.New(cfg.ClerkAPIURL, string(cfg.ClerkSecretKey))
	if err != nil {
		return nil, err
	}
	c.Retry = cfg.retry()
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

// runBackfill reads every user, organization, membership and
// subscription item from Clerk's Backend API, page by page (in creation
// order; the items newest first), a page of each list in turn, and applies each one as a .updated webhook carrying that state
// would be (see sync.Reconciler, which does the work).
//
// An object that can never be applied is counted as failed and the run
// goes on. Any other failure stops the list it happened in, with an error
// that says where; every object of it before that point is applied, so a
// rerun, from the start or with -kinds and -offset, completes the job.
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
	kinds, err := parseKinds(opts.kinds)
	if err != nil {
		return err
	}
	if opts.offset > 0 && len(kinds) != 1 {
		return fmt.Errorf("-offset: an offset is in one list: name its kind with -kinds (users, organizations, memberships, invitations or subscription_items)")
	}
	rec, store, closeStore, err := openReconciler(ctx, cfg, cl)
	if err != nil {
		return err
	}
	defer closeStore()

	rep, err := rec.Run(ctx, sync.ReconcileOptions{
		Kinds: kinds, Offset: opts.offset, Limit: opts.limit,
		OnPage: func(k models.Kind, offset int, page sync.Tally) {
			fmt.Fprintf(out, "backfill: %s: %s\n", where(k, offset), backfillTally(k, page))
		},
		OnNote: func(n sync.Note) {
			if n.Action == sync.NoteFailed {
				fmt.Fprintf(out, "backfill: %s: %s %s not applied: %v\n", where(n.Kind, n.Offset), n.Kind, orNoID(n.ID), n.Err)
			}
		},
	})
	if rerr := recordRun(ctx, store.Runs(), newRunSummary(kindBackfill, triggerCommand, rep, err)); rerr != nil {
		fmt.Fprintf(out, "backfill: %v\n", rerr)
	}
	for _, kr := range rep.Kinds {
		if kr.Off && kr.Kind == models.KindSubscriptionItem {
			fmt.Fprintf(out, "backfill: Billing is not enabled in the Clerk instance: no %s read\n", kr.Kind.Plural())
			continue
		}
		if kr.Off {
			fmt.Fprintf(out, "backfill: %s are not enabled in the Clerk instance: none read\n", kr.Kind.Plural())
			continue
		}
		if kr.Stopped != nil {
			fmt.Fprintf(out, "backfill: stopped at %s after %s\n", where(kr.Kind, kr.Stopped.Offset), backfillTally(kr.Kind, kr.Listed))
			continue
		}
		if err == nil || kr.Complete {
			fmt.Fprintf(out, "backfill: done, %s to %d: %s\n", offsets(kr.Kind, kr.Offset), kr.End, backfillTally(kr.Kind, kr.Listed))
		}
	}
	stops := stopsOf(rep)
	switch {
	case len(stops) == 1 && stops[0].Offset == 0:
		return fmt.Errorf("backfill stopped at %s: %w; rerun to complete the job", where(stops[0].Kind, 0), stops[0].Err)
	case len(stops) == 1:
		st := stops[0]
		return fmt.Errorf("backfill stopped at %s: %w; the %s before it are applied: rerun, with -kinds %s -offset %d to go on from there, to complete the job",
			where(st.Kind, st.Offset), st.Err, st.Kind.Plural(), st.Kind.Plural(), st.Offset)
	case len(stops) > 1:
		var at, resume []string
		for _, st := range stops {
			at = append(at, fmt.Sprintf("at %s: %v", where(st.Kind, st.Offset), st.Err))
			if st.Offset > 0 {
				resume = append(resume, fmt.Sprintf("-kinds %s -offset %d", st.Kind.Plural(), st.Offset))
			}
		}
		hint := ""
		if len(resume) > 0 {
			hint = " (or go on from where each list stopped: " + strings.Join(resume, "; ") + ")"
		}
		return fmt.Errorf("backfill stopped %s; the objects before those places are applied: rerun to complete the job%s",
			strings.Join(at, ", and "), hint)
	}
	return err
}

// offsets is "offsets 0" (users) or "organizations offsets 0".
func offsets(k models.Kind, from int) string { return listOf(k) + fmt.Sprintf("offsets %d", from) }

// backfillTally is a tally as backfill prints it: a state equal
// to a webhook's counts as stale.
func backfillTally(k models.Kind, t sync.Tally) string {
	return fmt.Sprintf("%s (applied %d, stale %d, deleted %d, duplicate %d, failed %d)",
		count(k, t.Read, "", ""), t.Applied, t.Stale+t.Unchanged, t.DeletedHere, t.Duplicate, t.Failed)
}

func orNoID(userID string) string {
	if userID == "" {
		return "(no id)"
	}
	return userID
}
