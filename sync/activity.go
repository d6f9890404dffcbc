package sync

import (
	"context"
	stdsync "sync"
	"time"

	"github.com/usersync/usersync/models"
)

// ActivityStore keeps the per-minute and per-hour counts of the
// console's charts (repository.Activity).
type ActivityStore interface {
	// Add adds n to the count of kind in the minute bucket and in the
	// hour bucket that hold at.
	Add(ctx context.Context, at time.Time, kind string, n int64) error
}

// Activity counts events received and processing outcomes per minute, in
// memory, and adds the counts to the store when flushed: one write per
// minute and kind per flush, whatever the rate of events, rather than a
// write per event on the webhook's path. Counts not yet flushed are lost
// if the process dies: the charts may miss the last seconds of a crashed
// instance, never an event.
type Activity struct {
	store ActivityStore
	now   func() time.Time

	mu      stdsync.Mutex
	pending map[activityKey]int64
}

type activityKey struct {
	minute int64 // Unix seconds of the minute's start
	kind   string
}

// NewActivity returns counts that flush to store; now may be nil for
// time.Now.
func NewActivity(store ActivityStore, now func() time.Time) *Activity {
	if now == nil {
		now = time.Now
	}
	return &Activity{store: store, now: now, pending: map[activityKey]int64{}}
}

// Note counts one event of kind now. It never blocks on the store. A nil
// *Activity counts nothing.
func (a *Activity) Note(kind string) {
	if a == nil {
		return
	}
	k := activityKey{minute: a.now().Unix() / 60 * 60, kind: kind}
	a.mu.Lock()
	a.pending[k]++
	a.mu.Unlock()
}

// maxPendingBuckets bounds the counts kept in memory while the store
// fails: a day of minutes for every kind.
const maxPendingBuckets = 24 * 60 * 5

// Flush adds the pending counts to the store. Counts the store refused
// stay pending for the next flush (up to a bound), so that an outage of
// the database loses none of them.
func (a *Activity) Flush(ctx context.Context) error {
	a.mu.Lock()
	pending := a.pending
	a.pending = map[activityKey]int64{}
	a.mu.Unlock()
	var first error
	for k, n := range pending {
		if first == nil {
			err := a.store.Add(ctx, time.Unix(k.minute, 0).UTC(), k.kind, n)
			if err == nil {
				continue
			}
			first = err
		}
		a.mu.Lock()
		if len(a.pending) < maxPendingBuckets {
			a.pending[k] += n
		}
		a.mu.Unlock()
	}
	return first
}

// ActivityFlushInterval is how often Run flushes.
const ActivityFlushInterval = 5 * time.Second

// Run flushes every interval until ctx is done, then once more.
func (a *Activity) Run(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := a.Flush(fctx); err != nil && onError != nil {
				onError(err)
			}
			cancel()
			return
		case <-t.C:
			if err := a.Flush(ctx); err != nil && onError != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}

// SetActivity makes the service count what it receives and what
// processing did into a; nil counts nothing.
func (s *Service) SetActivity(a *Activity) { s.activity = a }

// noteOutcome counts one processing attempt that ended in res or failed.
func (s *Service) noteOutcome(outcome models.Outcome, failed bool) {
	if failed {
		s.activity.Note(models.ActivityFailed)
		return
	}
	s.activity.Note(string(outcome))
}
