package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

// defaultMaxDeletes is how many objects of one kind one reconcile may
// delete unless told otherwise: a wrong CLERK_SECRET_KEY (another
// instance's) or an API that answers a short list must not empty the
// users, organizations or memberships.
const defaultMaxDeletes = 10

// reconcileOptions are the flags of usersync reconcile.
type reconcileOptions struct {
	limit      int
	maxDeletes int
	dryRun     bool
	kinds      string
}

// allKinds are the kinds -kinds names when it is not given (its default,
// "", is all of them: the help would be too wide with their names).
const allKinds = "users,organizations,memberships,invitations,subscription_items"

// reconcileCommand is `usersync reconcile`.
func reconcileCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts reconcileOptions
	fs.IntVar(&opts.limit, "limit", clerk.MaxPageLimit, "objects per page read from Clerk, 1 to 500")
	fs.IntVar(&opts.maxDeletes, "max-deletes", defaultMaxDeletes, "delete none of a kind with more to delete than this; -1 for no limit")
	fs.BoolVar(&opts.dryRun, "dry-run", false, "change nothing; print what would change")
	fs.StringVar(&opts.kinds, "kinds", "", "comma-separated kinds (default "+allKinds+")")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runReconcile(ctx, cfg, opts, out) }
}

// parseKinds reads -kinds: users, organizations, memberships,
// invitations, subscription_items (or their singulars), comma-separated, in any order.
func parseKinds(s string) ([]models.Kind, error) {
	if strings.TrimSpace(s) == "" {
		s = allKinds
	}
	var kinds []models.Kind
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var k models.Kind
		for _, known := range sync.ReconcileKinds() {
			if f == string(known) || f == known.Plural() {
				k = known
			}
		}
		if k == "" {
			return nil, fmt.Errorf("-kinds: %q is not users, organizations, memberships, invitations or subscription_items", f)
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// runReconcile applies every user, organization, membership and
// subscription item of Clerk's lists, as backfill does, then deletes the
// active users, organizations and memberships Clerk no longer has (see sync.Reconciler.Run for the rules that keep it from deleting
// one by mistake).
func runReconcile(ctx context.Context, cfg config, opts reconcileOptions, out io.Writer) error {
	cl, err := newClerk(cfg, out, "reconcile")
	if err != nil {
		return err
	}
	if opts.limit < 1 || opts.limit > clerk.MaxPageLimit {
		return fmt.Errorf("-limit: %d is not between 1 and %d", opts.limit, clerk.MaxPageLimit)
	}
	if opts.maxDeletes < -1 {
		return fmt.Errorf("-max-deletes: %d is not -1 (no limit) or more", opts.maxDeletes)
	}
	kinds, err := parseKinds(opts.kinds)
	if err != nil {
		return err
	}
	rec, store, closeStore, err := openReconciler(ctx, cfg, cl)
	if err != nil {
		return err
	}
	defer closeStore()

	rep, err := rec.Run(ctx, sync.ReconcileOptions{
		Kinds: kinds, Deletions: true, Limit: opts.limit, MaxDeletes: opts.maxDeletes, DryRun: opts.dryRun,
		OnPage: func(k models.Kind, offset int, page sync.Tally) {
			fmt.Fprintf(out, "reconcile: %s: %s\n", where(k, offset), pageCounts(k, page))
		},
		OnNote: func(n sync.Note) { fmt.Fprintln(out, "reconcile: "+noteLine(n)) },
	})
	if !opts.dryRun {
		if rerr := recordRun(ctx, store.Runs(), newRunSummary(kindReconcile, triggerCommand, rep, err)); rerr != nil {
			fmt.Fprintf(out, "reconcile: %v\n", rerr)
		}
	}
	if stops := stopsOf(rep); len(stops) > 0 {
		var at []string
		for _, kr := range rep.Kinds {
			if kr.Stopped != nil {
				fmt.Fprintf(out, "reconcile: stopped at %s, nothing deleted: %s\n", where(kr.Kind, kr.Stopped.Offset), summary(kr))
				at = append(at, fmt.Sprintf("at %s: %v", where(kr.Kind, kr.Stopped.Offset), kr.Stopped.Err))
			} else {
				fmt.Fprintf(out, "reconcile: stopped, nothing deleted: %s\n", summary(kr))
			}
		}
		return fmt.Errorf("reconcile stopped %s; nothing was deleted: rerun to complete the job", strings.Join(at, ", and "))
	}
	if err != nil {
		for _, kr := range rep.Kinds {
			fmt.Fprintf(out, "reconcile: stopped: %s\n", summary(kr))
		}
		return fmt.Errorf("reconcile: %w", err)
	}
	done := "done"
	if opts.dryRun {
		done = "dry run, nothing changed"
	}
	for _, kr := range rep.Kinds {
		switch {
		case kr.Refused:
			fmt.Fprintf(out, "reconcile: refused: %s absent from Clerk, more than -max-deletes %d: nothing deleted: %s\n",
				count(kr.Kind, len(kr.ToDelete), "is", "are"), opts.maxDeletes, summary(kr))
			continue
		case kr.Kind == models.KindSubscriptionItem && kr.Off:
			fmt.Fprintf(out, "reconcile: Billing is not enabled in the Clerk instance: no %s read\n", kr.Kind.Plural())
			continue
		case kr.Kind == models.KindSubscriptionItem:
			// Never deleted: nothing to say about deletions.
		case kr.DeletesSkipped != "":
			fmt.Fprintf(out, "reconcile: nothing deleted: %s\n", kr.DeletesSkipped)
		}
		fmt.Fprintf(out, "reconcile: %s: %s\n", done, summary(kr))
	}
	if rep.Refused() {
		what, _, most := refusedCounts(rep)
		return fmt.Errorf("reconcile refused to delete %s (-max-deletes %d): check the ones listed above (is CLERK_SECRET_KEY the right instance's?), then rerun with -max-deletes %d",
			what, opts.maxDeletes, most)
	}
	if rep.Failures() != "" {
		return fmt.Errorf("reconcile: %w; rerun once they can be", partial(rep))
	}
	return nil
}

// refusedCounts says how many objects of each kind a run refused to
// delete ("11 users", "11 users and 12 memberships"), the verb for them
// (is, are), and the most of one kind.
func refusedCounts(rep sync.ReconcileReport) (what, verb string, most int) {
	var parts []string
	n := 0
	for _, kr := range rep.Kinds {
		if kr.Refused {
			parts = append(parts, count(kr.Kind, len(kr.ToDelete), "", ""))
			n += len(kr.ToDelete)
			most = max(most, len(kr.ToDelete))
		}
	}
	verb = "are"
	if n == 1 {
		verb = "is"
	}
	return strings.Join(parts, " and "), verb, most
}

// stopsOf returns the listings of rep that stopped.
func stopsOf(rep sync.ReconcileReport) []*sync.StoppedError {
	var stops []*sync.StoppedError
	for _, kr := range rep.Kinds {
		if kr.Stopped != nil {
			stops = append(stops, kr.Stopped)
		}
	}
	return stops
}

// where names a place in one of Clerk's lists: "offset 500" in the users'
// (as the Clerk client's retries say it), "organizations offset 500" in
// another.
func where(k models.Kind, offset int) string { return listOf(k) + fmt.Sprintf("offset %d", offset) }

// listOf names Clerk's list of kind k before a place in it: "" for the
// users' (the lines usersync printed before it had other kinds), else
// "organizations ".
func listOf(k models.Kind) string {
	if k == models.KindUser {
		return ""
	}
	return k.Plural() + " "
}

// count is "1 user" or "2 users", followed by the verb for one or many
// (none when "").
func count(k models.Kind, n int, one, many string) string {
	noun, verb := k.Plural(), many
	if n == 1 {
		noun, verb = string(k), one
	}
	if verb == "" {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %s %s", n, noun, verb)
}

// pageCounts is what became of one page of Clerk's list.
func pageCounts(k models.Kind, t sync.Tally) string {
	return fmt.Sprintf("%d %s (applied %d, stale %d, unchanged %d, failed %d)",
		t.Read, k.Plural(), t.Applied, t.Stale, unchanged(t), t.Failed)
}

// unchanged counts the objects whose stored state already was Clerk's (or
// that are deleted here and stay deleted).
func unchanged(t sync.Tally) int { return t.Unchanged + t.Duplicate + t.DeletedHere }

// summary is the line that says what a run did (a dry run: would do) to
// one kind.
func summary(kr sync.KindReport) string {
	local := "not read"
	if kr.Local >= 0 {
		local = strconv.Itoa(kr.Local)
	}
	noun := kr.Kind.Plural()
	return fmt.Sprintf("%s in Clerk %d, local %s %s, applied %d, stale %d, deleted %d, unchanged %d, failed %d",
		noun, kr.Listed.Read, noun, local, kr.Listed.Applied, kr.Listed.Stale, kr.Deleted, unchanged(kr.Listed), kr.Listed.Failed)
}

// noteLine is one line about one object.
func noteLine(n sync.Note) string {
	at := string(n.Kind) + " " + orNoID(n.ID)
	if n.Offset >= 0 {
		at = where(n.Kind, n.Offset) + ": " + at
	}
	switch n.Action {
	case sync.NoteFailed:
		return fmt.Sprintf("%s not applied: %v", at, n.Err)
	case sync.NoteWouldCreate:
		return at + ": would create"
	case sync.NoteWouldUpdate:
		return at + ": would update"
	case sync.NoteWouldDelete:
		return at + ": absent from Clerk: would delete"
	case sync.NoteDeleted:
		return at + ": absent from Clerk: deleted"
	case sync.NoteKept:
		return at + ": missing from the list, but Clerk has it: kept"
	case sync.NoteUnchecked:
		return fmt.Sprintf("%s: missing from the list, and Clerk's answer about it failed: not deleted: %v", at, n.Err)
	}
	return at + ": " + n.Action
}

// scheduleReconcile is the task that runs reconcile of every kind every
// cfg.ReconcileInterval, on one instance at a time, until its context ends.
func scheduleReconcile(cfg config, store repository.Store, svc *sync.Service,
	cl *clerk.Client, metrics *api.Metrics, log *slog.Logger) (task func(context.Context)) {
	rec := newReconciler(svc, store, cl)
	host, _ := os.Hostname()
	sched := &sync.Scheduler{
		Leases: store.Leases(), Name: "reconcile",
		Owner:    fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()),
		Interval: cfg.ReconcileInterval, Log: log,
		Job: func(ctx context.Context) error {
			rep, err := rec.Run(ctx, sync.ReconcileOptions{Deletions: true, Limit: clerk.MaxPageLimit, MaxDeletes: defaultMaxDeletes})
			if err == nil && rep.Refused() {
				what, verb, _ := refusedCounts(rep)
				err = fmt.Errorf("%s %s absent from Clerk, more than %d: nothing deleted; run usersync reconcile to check them",
					what, verb, defaultMaxDeletes)
			}
			if err == nil && rep.Failures() != "" {
				// Not a success: what it could not do is left undone.
				err = partial(rep)
			}
			sum := newRunSummary(kindReconcile, triggerSchedule, rep, err)
			if rerr := recordRun(ctx, store.Runs(), sum); rerr != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "reconcile run not recorded", slog.String("err", rerr.Error()))
			}
			metrics.ObserveReconcile(sum)
			users := rep.Of(models.KindUser)
			attrs := []slog.Attr{
				slog.Int("clerk_users", users.Listed.Read), slog.Int("local_users", users.Local),
				slog.Int("applied", users.Listed.Applied), slog.Int("stale", users.Listed.Stale), slog.Int("deleted", users.Deleted),
				slog.Int("unchanged", unchanged(users.Listed)), slog.Int("failed", users.Listed.Failed),
			}
			for _, kr := range rep.Kinds {
				if kr.Kind != models.KindUser {
					attrs = append(attrs, slog.Group(kr.Kind.Plural(),
						slog.Int("clerk", kr.Listed.Read), slog.Int("local", kr.Local), slog.Int("applied", kr.Listed.Applied),
						slog.Int("stale", kr.Listed.Stale), slog.Int("deleted", kr.Deleted),
						slog.Int("unchanged", unchanged(kr.Listed)), slog.Int("failed", kr.Listed.Failed)))
				}
			}
			attrs = append(attrs, slog.Duration("duration", rep.Duration), slog.String("run_id", rep.RunID))
			if err != nil {
				log.LogAttrs(ctx, slog.LevelError, "reconcile failed", append(attrs, slog.String("err", err.Error()))...)
			} else {
				log.LogAttrs(ctx, slog.LevelInfo, "reconcile done", attrs...)
			}
			return err
		},
	}
	return sched.Run
}

// clerkForServe returns the Clerk client of serve and the fetcher of POST
// /v1/users/{userId}/sync and POST /v1/organizations/{orgId}/sync: both
// nil without CLERK_SECRET_KEY, which only USERSYNC_RECONCILE_INTERVAL
// requires. The client's limiter is shared by the routes and the scheduled
// reconcile.
func clerkForServe(cfg config, svc *sync.Service) (*clerk.Client, api.ClerkSyncer, error) {
	if cfg.ClerkSecretKey == "" {
		if cfg.ReconcileInterval > 0 {
			return nil, nil, errors.New("USERSYNC_RECONCILE_INTERVAL is set but CLERK_SECRET_KEY is not: set it to the instance's secret key (sk_live_... or sk_test_...)")
		}
		return nil, nil, nil
	}
	cl, err := newClerk(cfg, nil, "")
	if err != nil {
		return nil, nil, err
	}
	return cl, &sync.Fetcher{Service: svc, Clerk: cl}, nil
}

// newReconciler is the reconciler of every kind over store.
func newReconciler(svc *sync.Service, store repository.Store, cl *clerk.Client) *sync.Reconciler {
	return &sync.Reconciler{
		Service: svc, Clerk: cl, Users: store.Users(),
		Orgs: &sync.OrganizationSources{Clerk: cl, Organizations: store.Organizations(), Memberships: store.Memberships(),
			Invitations: store.Invitations()},
		Billing: &sync.BillingSources{Clerk: cl, Billing: store.Billing()},
	}
}

// openReconciler opens the store and returns the reconciler of backfill
// and reconcile over it, and the store, which keeps the runs' summaries;
// closeStore closes the store.
func openReconciler(ctx context.Context, cfg config, cl *clerk.Client) (rec *sync.Reconciler, s store, closeStore func(), err error) {
	s, closeStore, err = openStore(ctx, cfg, newLogger(cfg), false)
	if err != nil {
		return nil, nil, nil, err
	}
	return newReconciler(newService(cfg, s), s, cl), s, closeStore, nil
}
