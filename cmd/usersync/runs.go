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

// newRunSummary is what a run did as the store keeps it: each kind's counts
// (none of a kind the run did not read), and success and the error of
// the run, every kind's. A refused run counts as failed, as it does for
// the scheduler, and so does a partial one (objects it could not apply
// or check).
func newRunSummary(kind, trigger string, rep sync.ReconcileReport, runErr error) models.ReconcileSummary {
	s := models.ReconcileSummary{
		Kind: kind, Trigger: trigger, StartedAt: rep.Started, Duration: rep.Duration,
		Success: runErr == nil && !rep.Refused() && rep.Failures() == "",
	}
	for _, k := range sync.ReconcileKinds() {
		s.Set(k, rep.Counts(k))
	}
	switch {
	case runErr != nil:
		s.Error = runErr.Error()
	case rep.Refused():
		what, verb, _ := refusedCounts(rep)
		s.Error = fmt.Sprintf("%s %s absent from Clerk, more than allowed: nothing deleted", what, verb)
	case rep.Failures() != "":
		s.Error = partial(rep).Error()
	}
	if s.StartedAt.IsZero() {
		s.StartedAt = time.Now()
	}
	return s
}

// recordRun keeps s; its error is the store's.
func recordRun(ctx context.Context, runs runRecorder, s models.ReconcileSummary) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, err := runs.Record(ctx, s); err != nil {
		return fmt.Errorf("record the %s run: %w", s.Kind, err)
	}
	return nil
}

// partial is the error of a run that could not apply, or check, some
// objects: it did the rest, but not all it was to do.
func partial(rep sync.ReconcileReport) error {
	return fmt.Errorf("partial: %s could not be applied or checked (see the failed events, and the lines that say why)", rep.Failures())
}
