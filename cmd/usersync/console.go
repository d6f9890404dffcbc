package main

import (
	"context"
	"log/slog"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

// countActivity makes svc count events and outcomes per minute into the
// store's activity buckets, for the console's charts, flushing them every
// sync.ActivityFlushInterval until stop; stop flushes what is left.
func countActivity(svc *sync.Service, store repository.Store, log *slog.Logger) (task func(context.Context)) {
	a := sync.NewActivity(store.Activity(), nil)
	svc.SetActivity(a)
	return func(ctx context.Context) {
		a.Run(ctx, sync.ActivityFlushInterval, func(err error) {
			log.LogAttrs(ctx, slog.LevelWarn, "activity counts not written yet", slog.String("err", err.Error()))
		})
	}
}

// consoleConfig is what the console at /admin reads: the store's counts,
// failure groups and run summaries, and, with a Clerk client, reconcile's
// dry run with the limits of a scheduled run.
func consoleConfig(ctx context.Context, svc *sync.Service, store repository.Store, cl *clerk.Client) api.Console {
	c := api.Console{Activity: store.Activity(), Failures: store.Events(), Runs: store.Runs(), Context: ctx}
	if cl != nil {
		// Every kind, as usersync reconcile -dry-run and the scheduled run.
		rec := newReconciler(svc, store, cl)
		c.DryRun = func(ctx context.Context, onPage func(int, sync.Tally), onNote func(sync.Note)) (sync.ReconcileReport, error) {
			return rec.Run(ctx, sync.ReconcileOptions{
				Deletions: true, DryRun: true, Limit: clerk.MaxPageLimit, MaxDeletes: defaultMaxDeletes,
				OnPage: func(_ models.Kind, offset int, page sync.Tally) { onPage(offset, page) }, OnNote: onNote,
			})
		}
	}
	return c
}
