package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// Activity is the activity table: counts per minute and per hour, by kind.
type Activity struct{ s *Store }

// activityRetention is how long the buckets of each size are kept.
var activityRetention = []struct{ size, keep time.Duration }{
	{models.ActivityMinute, models.ActivityMinuteRetention},
	{models.ActivityHour, models.ActivityHourRetention},
}

// Add adds n to kind in the minute and the hour that hold at, and deletes
// the buckets of each size past their retention, in one write: two upserts
// and two deletes by a range of the primary key. The write is one
// statement per bucket (n = n + ?), so adds of several callers all count.
func (a *Activity) Add(ctx context.Context, at time.Time, kind string, n int64) error {
	if !models.ValidActivityKind(kind) {
		return fmt.Errorf("%w: activity kind %s", models.ErrInvalid, models.Quote(kind))
	}
	if n == 0 {
		return nil
	}
	err := a.s.write(ctx, func(t *wtx) error {
		for _, b := range activityRetention {
			start := at.UTC().Truncate(b.size)
			if _, err := t.exec(qActivityAdd, b.size.Milliseconds(), ms(start), kind, n); err != nil {
				return err
			}
			if _, err := t.exec(qActivityPrune, b.size.Milliseconds(), ms(start.Add(-b.keep))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("count %s activity: %w", kind, err)
	}
	return nil
}

// Buckets returns the buckets of size that start in [from, to), oldest
// first: one range of the primary key. Its error wraps models.ErrInvalid
// for a size other than a minute or an hour.
func (a *Activity) Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error) {
	if size != models.ActivityMinute && size != models.ActivityHour {
		return nil, fmt.Errorf("%w: activity bucket size %s (a minute or an hour)", models.ErrInvalid, size)
	}
	rows, err := a.s.r.QueryContext(ctx, qActivityRange, size.Milliseconds(), ms(from), ms(to))
	if err != nil {
		return nil, fmt.Errorf("read activity: %w", translate(err))
	}
	defer rows.Close()
	out := []models.ActivityBucket{}
	for rows.Next() {
		var (
			start, n int64
			kind     string
		)
		if err := rows.Scan(&start, &kind, &n); err != nil {
			return nil, fmt.Errorf("read activity: %w", translate(err))
		}
		if len(out) == 0 || out[len(out)-1].Start.UnixMilli() != start {
			out = append(out, models.ActivityBucket{Start: fromMS(start), Counts: map[string]int64{}})
		}
		out[len(out)-1].Counts[models.ReadActivityKind(kind)] += n // an earlier version's deleted_user is deleted
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read activity: %w", translate(err))
	}
	return out, nil
}
