package main

import (
	"context"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// runRecorder keeps the summaries of reconcile and backfill runs, for the
// console (repository.Runs).
type runRecorder interface {
	Record(ctx context.Context, r models.ReconcileSummary) (models.ReconcileSummary, error)
}

// Run kinds and triggers, as the console shows them.
const (
	kindReconcile   = "reconcile"
	kindBackfill    = "backfill"
	triggerSchedule = "schedule"
	triggerCommand  = "command"
)

// recordTimeout bounds the write of a run's summary, which runs even when
// the run was stopped by its context.
const recordTimeout = 5 * time.Second

// recordRun keeps what a run did; its error is the store's. A refused run
// counts as failed, as it does for the scheduler.
func recordRun(ctx context.Context, runs runRecorder, kind, trigger string, rep sync.ReconcileReport, runErr error) error {
	// The summary's counts are the users'; success and the error are the
	// run's, every kind's.
	users := rep.Of(models.KindUser)
	s := models.ReconcileSummary{
		Kind: kind, Trigger: trigger, StartedAt: rep.Started, Duration: rep.Duration,
		Success: runErr == nil && !rep.Refused(), ClerkUsers: users.Listed.Read, LocalUsers: users.Local,
		Applied: users.Listed.Applied, Stale: users.Listed.Stale, Unchanged: unchanged(users.Listed),
		Deleted: users.Deleted, Failed: users.Listed.Failed, Refused: rep.Refused(), ToDelete: len(users.ToDelete),
	}
	switch {
	case runErr != nil:
		s.Error = runErr.Error()
	case rep.Refused():
		what, verb, _ := refusedCounts(rep)
		s.Error = fmt.Sprintf("%s %s absent from Clerk, more than allowed: nothing deleted", what, verb)
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, err := runs.Record(ctx, s); err != nil {
		return fmt.Errorf("record the %s run: %w", kind, err)
	}
	return nil
}
