package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

// defaultMaxDeletes is how many users one reconcile may delete unless told
// otherwise: a wrong CLERK_SECRET_KEY (another instance's) or an API that
// answers a short list must not empty the users collection.
const defaultMaxDeletes = 10

// reconcileOptions are the flags of usersync reconcile.
type reconcileOptions struct {
	limit      int
	maxDeletes int
	dryRun     bool
}

// reconcileCommand is `usersync reconcile`.
func reconcileCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts reconcileOptions
	fs.IntVar(&opts.limit, "limit", clerk.MaxPageLimit, "users per page read from Clerk, 1 to 500")
	fs.IntVar(&opts.maxDeletes, "max-deletes", defaultMaxDeletes, "delete nothing if more users than this would be deleted; -1 for no limit")
	fs.BoolVar(&opts.dryRun, "dry-run", false, "change nothing; print what would change")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runReconcile(ctx, cfg, opts, out) }
}

// runReconcile applies every user of Clerk's list, as backfill does, then
// deletes the active users Clerk no longer has (see sync.Reconciler.Run
// for the rules that keep it from deleting a user by mistake).
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
	rec, store, closeStore, err := openReconciler(ctx, cfg, cl)
	if err != nil {
		return err
	}
	defer closeStore()

	rep, err := rec.Run(ctx, sync.ReconcileOptions{
		Deletions: true, Limit: opts.limit, MaxDeletes: opts.maxDeletes, DryRun: opts.dryRun,
		OnPage: func(offset int, page sync.Tally) {
			fmt.Fprintf(out, "reconcile: offset %d: %s\n", offset, pageCounts(page))
		},
		OnUser: func(n sync.UserNote) { fmt.Fprintln(out, "reconcile: "+userNote(n)) },
	})
	if !opts.dryRun {
		if rerr := recordRun(ctx, store.Runs(), kindReconcile, triggerCommand, rep, err); rerr != nil {
			fmt.Fprintf(out, "reconcile: %v\n", rerr)
		}
	}
	var stopped *sync.StoppedError
	if errors.As(err, &stopped) {
		fmt.Fprintf(out, "reconcile: stopped at offset %d, nothing deleted: %s\n", stopped.Offset, summary(rep))
		return fmt.Errorf("reconcile stopped at offset %d: %w; nothing was deleted: rerun to complete the job", stopped.Offset, stopped.Err)
	}
	if err != nil {
		fmt.Fprintf(out, "reconcile: stopped: %s\n", summary(rep))
		return fmt.Errorf("reconcile: %w", err)
	}
	switch {
	case rep.Refused:
		fmt.Fprintf(out, "reconcile: refused: %d users are absent from Clerk, more than -max-deletes %d: nothing deleted: %s\n",
			len(rep.ToDelete), opts.maxDeletes, summary(rep))
		return fmt.Errorf("reconcile refused to delete %d users (-max-deletes %d): check the users listed above (is CLERK_SECRET_KEY the right instance's?), then rerun with -max-deletes %d",
			len(rep.ToDelete), opts.maxDeletes, len(rep.ToDelete))
	case rep.DeletesSkipped != "":
		fmt.Fprintf(out, "reconcile: nothing deleted: %s\n", rep.DeletesSkipped)
	}
	done := "done"
	if opts.dryRun {
		done = "dry run, nothing changed"
	}
	fmt.Fprintf(out, "reconcile: %s: %s\n", done, summary(rep))
	return nil
}

// pageCounts is what became of one page of Clerk's list.
func pageCounts(t sync.Tally) string {
	return fmt.Sprintf("%d users (applied %d, stale %d, unchanged %d, failed %d)",
		t.Users, t.Applied, t.Stale, unchanged(t), t.Failed)
}

// unchanged counts the users whose stored state already was Clerk's (or
// who are deleted here and stay deleted).
func unchanged(t sync.Tally) int { return t.Unchanged + t.Duplicate + t.DeletedUser }

// summary is the one line that says what a run did (a dry run: would do).
func summary(rep sync.ReconcileReport) string {
	local := "not read"
	if rep.LocalUsers >= 0 {
		local = strconv.Itoa(rep.LocalUsers)
	}
	return fmt.Sprintf("users in Clerk %d, local users %s, applied %d, stale %d, deleted %d, unchanged %d, failed %d",
		rep.Listed.Users, local, rep.Listed.Applied, rep.Listed.Stale, rep.Deleted, unchanged(rep.Listed), rep.Listed.Failed)
}

// userNote is one line about one user.
func userNote(n sync.UserNote) string {
	where := "user " + orNoID(n.UserID)
	if n.Offset >= 0 {
		where = fmt.Sprintf("offset %d: %s", n.Offset, where)
	}
	switch n.Action {
	case sync.NoteFailed:
		return fmt.Sprintf("%s not applied: %v", where, n.Err)
	case sync.NoteWouldCreate:
		return where + ": would create"
	case sync.NoteWouldUpdate:
		return where + ": would update"
	case sync.NoteWouldDelete:
		return where + ": absent from Clerk: would delete"
	case sync.NoteDeleted:
		return where + ": absent from Clerk: deleted"
	case sync.NoteKept:
		return where + ": missing from the list, but Clerk has it: kept"
	case sync.NoteUnchecked:
		return fmt.Sprintf("%s: missing from the list, and Clerk's answer about it failed: not deleted: %v", where, n.Err)
	}
	return where + ": " + n.Action
}

// scheduleReconcile runs reconcile every cfg.ReconcileInterval, on one
// instance at a time, until ctx ends; it returns when the loop has stopped.
func scheduleReconcile(ctx context.Context, cfg config, store repository.Store, svc *sync.Service,
	cl *clerk.Client, metrics *api.Metrics, log *slog.Logger) (wait func()) {
	rec := &sync.Reconciler{Service: svc, Clerk: cl, Users: store.Users()}
	host, _ := os.Hostname()
	sched := &sync.Scheduler{
		Leases: store.Leases(), Name: "reconcile",
		Owner:    fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()),
		Interval: cfg.ReconcileInterval, Log: log,
		Job: func(ctx context.Context) error {
			rep, err := rec.Run(ctx, sync.ReconcileOptions{Deletions: true, Limit: clerk.MaxPageLimit, MaxDeletes: defaultMaxDeletes})
			if err == nil && rep.Refused {
				err = fmt.Errorf("%d users are absent from Clerk, more than %d: nothing deleted; run usersync reconcile to check them", len(rep.ToDelete), defaultMaxDeletes)
			}
			if rerr := recordRun(ctx, store.Runs(), kindReconcile, triggerSchedule, rep, err); rerr != nil {
				log.LogAttrs(ctx, slog.LevelWarn, "reconcile run not recorded", slog.String("err", rerr.Error()))
			}
			metrics.ObserveReconcile(api.ReconcileRun{
				Start: rep.Started, Duration: rep.Duration, Success: err == nil,
				ClerkUsers: rep.Listed.Users, LocalUsers: rep.LocalUsers, Applied: rep.Listed.Applied, Stale: rep.Listed.Stale,
				Deleted: rep.Deleted, Unchanged: unchanged(rep.Listed), Failed: rep.Listed.Failed,
			})
			attrs := []slog.Attr{
				slog.Int("clerk_users", rep.Listed.Users), slog.Int("local_users", rep.LocalUsers),
				slog.Int("applied", rep.Listed.Applied), slog.Int("stale", rep.Listed.Stale), slog.Int("deleted", rep.Deleted),
				slog.Int("unchanged", unchanged(rep.Listed)), slog.Int("failed", rep.Listed.Failed),
				slog.Duration("duration", rep.Duration), slog.String("run_id", rep.RunID),
			}
			if err != nil {
				log.LogAttrs(ctx, slog.LevelError, "reconcile failed", append(attrs, slog.String("err", err.Error()))...)
			} else {
				log.LogAttrs(ctx, slog.LevelInfo, "reconcile done", attrs...)
			}
			return err
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	return func() { <-done }
}

// clerkForServe returns the Clerk client of serve and the fetcher of POST
// /v1/users/{userId}/sync: both nil without CLERK_SECRET_KEY, which only
// USERSYNC_RECONCILE_INTERVAL requires.
func clerkForServe(cfg config, svc *sync.Service) (*clerk.Client, api.UserSyncer, error) {
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

// openReconciler opens the store and returns the reconciler of backfill
// and reconcile over it, and the store, which keeps the runs' summaries;
// closeStore closes the store.
func openReconciler(ctx context.Context, cfg config, cl *clerk.Client) (rec *sync.Reconciler, s store, closeStore func(), err error) {
	s, closeStore, err = openStore(ctx, cfg, newLogger(cfg), false)
	if err != nil {
		return nil, nil, nil, err
	}
	return &sync.Reconciler{Service: newService(cfg, s), Clerk: cl, Users: s.Users()}, s, closeStore, nil
}
