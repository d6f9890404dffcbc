package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/usersync/usersync/models"
)

// Runs is the reconcile_runs table: the summaries of the last reconcile
// and backfill runs.
type Runs struct{ s *Store }

const runColumns = `id, kind, triggered_by, started_at, duration_ms, success, error, clerk_users, local_users,
	applied, stale, unchanged, deleted, failed, refused, to_delete`

// Record keeps r and deletes the summaries past the last
// models.KeptReconcileRuns (by start, then id), in one write; the ID is
// the row's.
func (r *Runs) Record(ctx context.Context, sum models.ReconcileSummary) (models.ReconcileSummary, error) {
	sum = sum.Bounded()
	err := r.s.write(ctx, func(t *wtx) error {
		res, err := t.exec(`INSERT INTO reconcile_runs (kind, triggered_by, started_at, duration_ms, success, error,
			clerk_users, local_users, applied, stale, unchanged, deleted, failed, refused, to_delete)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sum.Kind, sum.Trigger, ms(sum.StartedAt), sum.Duration.Milliseconds(), sum.Success, text(sum.Error),
			sum.ClerkUsers, sum.LocalUsers, sum.Applied, sum.Stale, sum.Unchanged, sum.Deleted, sum.Failed,
			sum.Refused, sum.ToDelete)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		sum.ID = strconv.FormatInt(id, 10)
		_, err = t.exec(qRunsPrune, models.KeptReconcileRuns)
		return err
	})
	if err != nil {
		return sum, fmt.Errorf("record reconcile run: %w", err)
	}
	return sum, nil
}

// Last returns the last n summaries (1 to models.KeptReconcileRuns), the
// latest start first, in the order of the start index.
func (r *Runs) Last(ctx context.Context, n int) ([]models.ReconcileSummary, error) {
	n = min(max(n, 1), models.KeptReconcileRuns)
	rows, err := r.s.r.QueryContext(ctx, qRunsLast, n)
	if err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
	}
	defer rows.Close()
	out := []models.ReconcileSummary{}
	for rows.Next() {
		var (
			s                     models.ReconcileSummary
			id, started, duration int64
			errText               sql.NullString
		)
		if err := rows.Scan(&id, &s.Kind, &s.Trigger, &started, &duration, &s.Success, &errText, &s.ClerkUsers,
			&s.LocalUsers, &s.Applied, &s.Stale, &s.Unchanged, &s.Deleted, &s.Failed, &s.Refused, &s.ToDelete); err != nil {
			return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
		}
		s.ID, s.StartedAt, s.Duration, s.Error = strconv.FormatInt(id, 10), fromMS(started), time.Duration(duration)*time.Millisecond, errText.String
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
	}
	return out, nil
}
