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
	s := models.ReconcileSummary{
		Kind: kind, Trigger: trigger, StartedAt: rep.Started, Duration: rep.Duration,
		Success: runErr == nil && !rep.Refused, ClerkUsers: rep.Listed.Users, LocalUsers: rep.LocalUsers,
		Applied: rep.Listed.Applied, Stale: rep.Listed.Stale, Unchanged: unchanged(rep.Listed),
		Deleted: rep.Deleted, Failed: rep.Listed.Failed, Refused: rep.Refused, ToDelete: len(rep.ToDelete),
	}
	switch {
	case runErr != nil:
		s.Error = runErr.Error()
	case rep.Refused:
		s.Error = fmt.Sprintf("%d users are absent from Clerk, more than allowed: nothing deleted", len(rep.ToDelete))
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
