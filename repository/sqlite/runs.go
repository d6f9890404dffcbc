package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/usersync/usersync/models"
)

// Runs is the reconcile_runs table: the summaries of the last reconcile
// and backfill runs.
type Runs struct{ s *Store }

const runColumns = `id, kind, triggered_by, started_at, duration_ms, success, error, clerk_users, local_users,
	applied, stale, unchanged, deleted, failed, refused, to_delete, kinds`

// runKinds is the kinds column: the counts of each kind a run read.
type runKinds struct {
	Users         *runCounts `json:"users,omitempty"`
	Organizations *runCounts `json:"organizations,omitempty"`
	Memberships   *runCounts `json:"memberships,omitempty"`
	// Absent from the runs kept before invitations were counted.
	Invitations *runCounts `json:"invitations,omitempty"`
	// Absent from the runs kept before subscription items were counted:
	// not read.
	SubscriptionItems *runCounts `json:"subscriptionItems,omitempty"`
}

type runCounts struct {
	Clerk     int  `json:"clerk"`
	Local     int  `json:"local"`
	Applied   int  `json:"applied"`
	Stale     int  `json:"stale"`
	Unchanged int  `json:"unchanged"`
	Deleted   int  `json:"deleted"`
	Failed    int  `json:"failed"`
	Refused   bool `json:"refused"`
	ToDelete  int  `json:"toDelete"`
}

func newRunCounts(c *models.ReconcileCounts) *runCounts {
	if c == nil {
		return nil
	}
	d := runCounts(*c)
	return &d
}

func (c *runCounts) model() *models.ReconcileCounts {
	if c == nil {
		return nil
	}
	m := models.ReconcileCounts(*c)
	return &m
}

// Record keeps r and deletes the summaries past the last
// models.KeptReconcileRuns (by start, then id), in one write; the ID is
// the row's.
func (r *Runs) Record(ctx context.Context, sum models.ReconcileSummary) (models.ReconcileSummary, error) {
	sum = sum.Bounded()
	kinds, err := json.Marshal(runKinds{
		Users: newRunCounts(sum.Users), Organizations: newRunCounts(sum.Organizations), Memberships: newRunCounts(sum.Memberships),
		Invitations: newRunCounts(sum.Invitations), SubscriptionItems: newRunCounts(sum.SubscriptionItems),
	})
	if err != nil {
		return sum, fmt.Errorf("record reconcile run: %w", err)
	}
	// The users' columns, as the runs recorded before the kinds column.
	users := models.ReconcileCounts{Local: -1}
	if sum.Users != nil {
		users = *sum.Users
	}
	err = r.s.write(ctx, func(t *wtx) error {
		res, err := t.exec(`INSERT INTO reconcile_runs (kind, triggered_by, started_at, duration_ms, success, error,
			clerk_users, local_users, applied, stale, unchanged, deleted, failed, refused, to_delete, kinds)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sum.Kind, sum.Trigger, ms(sum.StartedAt), sum.Duration.Milliseconds(), sum.Success, text(sum.Error),
			users.Clerk, users.Local, users.Applied, users.Stale, users.Unchanged, users.Deleted, users.Failed,
			sum.Refused(), users.ToDelete, string(kinds))
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
// latest start first, in the order of the start index. A run recorded
// before the kinds column has the users' counts only.
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
			u                     models.ReconcileCounts
			id, started, duration int64
			errText, kinds        sql.NullString
		)
		if err := rows.Scan(&id, &s.Kind, &s.Trigger, &started, &duration, &s.Success, &errText, &u.Clerk,
			&u.Local, &u.Applied, &u.Stale, &u.Unchanged, &u.Deleted, &u.Failed, &u.Refused, &u.ToDelete, &kinds); err != nil {
			return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
		}
		s.ID, s.StartedAt, s.Duration, s.Error = strconv.FormatInt(id, 10), fromMS(started), time.Duration(duration)*time.Millisecond, errText.String
		if !kinds.Valid {
			s.Users = &u
		} else {
			var k runKinds
			if err := json.Unmarshal([]byte(kinds.String), &k); err != nil {
				return nil, fmt.Errorf("read reconcile run %d: its kinds: %w", id, err)
			}
			s.Users, s.Organizations, s.Memberships = k.Users.model(), k.Organizations.model(), k.Memberships.model()
			s.Invitations, s.SubscriptionItems = k.Invitations.model(), k.SubscriptionItems.model()
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
	}
	return out, nil
}
