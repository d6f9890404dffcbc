package sync

import (
	"context"
	"log/slog"
	"time"

	"github.com/usersync/usersync/models"
)

// RecoveryStore is what the recovery sweep and retention need of the inbox.
type RecoveryStore interface {
	// Due returns stored events received before stuckBefore and failed
	// events whose retry time has come, oldest Clerk state first.
	Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error)
	// DeleteProcessedBefore deletes up to limit events processed before
	// cutoff, never stored or failed ones.
	DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error)
	// Claim leases the event, read with attempts attempts, to this sweep
	// until now+lease; false when another sweep holds it, or it has had
	// another attempt since, or it is processed.
	Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error)
}

// Recovery is the background work on the inbox: the sweep that processes
// events a crash or an outage left behind, and retention.
//
// It keeps no state of its own, so any number of instances may run it on
// one database: a sweep claims each event (a lease of Lease) before it
// processes it, so that one instance processes it and attempts counts
// real attempts; were two to apply it anyway (a lease run out), the user
// changes once (processing is idempotent).
type Recovery struct {
	Service *Service
	Store   RecoveryStore
	Log     *slog.Logger

	// Grace is how long a stored event is left to the delivery that stored
	// it before the sweep takes it over.
	Grace time.Duration
	// Retention is how long processed events are kept; 0 keeps them forever.
	Retention time.Duration
	// Eraser erases the events of users deleted more than EraseAfter ago;
	// nil, or an EraseAfter of 0, erases nothing.
	Eraser     Eraser
	EraseAfter time.Duration
	// Batch bounds the events one sweep or one delete handles at a time.
	Batch int
	// Lease is how long a sweep holds an event it claimed; 0 means
	// DefaultLease. It must be longer than processing one event takes.
	Lease time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe, if set, is told what each sweep and retention pass did.
	Observe func(Report)
}

// Report is what one pass of the recovery work did.
type Report struct {
	Swept    map[models.EventStatus]int // events processed again, by their new status
	Outcomes map[models.Outcome]int     // and what they did
	Deleted  int                        // processed events removed by retention
	Erased   int                        // events whose body erasure removed
	Err      error                      // why the pass stopped early, if it did

	// SweepDone and RetentionDone report that the sweep, and retention,
	// ran to the end (RetentionDone is false while retention is off).
	SweepDone, RetentionDone bool
}

func (r *Recovery) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// PassTimeout bounds one pass of Run. The searches of a pass (due events,
// old events, users to erase) are index reads, but would read whole
// collections on an engine whose indexes are not usable (an index still
// being built): they get this long rather than the store's default
// operation timeout, which would fail them for ever once the collection is
// large enough. The writes of a pass keep their own short bounds.
const PassTimeout = 15 * time.Minute

// DefaultLease is how long a sweep holds an event by default.
const DefaultLease = time.Minute

func (r *Recovery) lease() time.Duration {
	if r.Lease <= 0 {
		return DefaultLease
	}
	return r.Lease
}

func (r *Recovery) batch() int {
	if r.Batch <= 0 {
		return 100
	}
	return r.Batch
}

// SweepOnce processes the events that are due, batch after batch, until
// none is left or the database fails. It returns what it did.
func (r *Recovery) SweepOnce(ctx context.Context) (Report, error) {
	rep := Report{Swept: map[models.EventStatus]int{}, Outcomes: map[models.Outcome]int{}}
	seen := map[string]bool{}
	for {
		now := r.now()
		evs, err := r.Store.Due(ctx, now.Add(-r.Grace), now, r.batch())
		if err != nil {
			return rep, err
		}
		var fresh []models.Event
		for _, ev := range evs {
			if !seen[ev.ID] { // one still due failed again with a retry time already passed
				seen[ev.ID] = true
				ev.Origin = models.OriginSweep
				fresh = append(fresh, ev)
			}
		}
		err = r.Service.Replay(ctx, fresh, r.lease(), func(rp Replayed) {
			if rp.Skip != "" {
				return // another instance is on it, or it is done
			}
			res := rp.Result
			rep.Swept[res.Status]++
			if res.Outcome != "" && res.Status == models.StatusProcessed {
				rep.Outcomes[res.Outcome]++
			}
			if r.Log != nil {
				lvl := slog.LevelInfo
				if rp.Err != nil {
					lvl = slog.LevelWarn
				}
				r.Log.LogAttrs(ctx, lvl, "event swept", slog.String("event_id", rp.Event.EventID),
					slog.String("user_id", rp.Event.UserID), slog.String("status", string(res.Status)),
					slog.String("outcome", string(res.Outcome)), errAttr(rp.Err))
			}
		})
		if err != nil {
			return rep, err
		}
		if len(evs) < r.batch() || len(fresh) == 0 {
			return rep, nil
		}
	}
}

// RetainOnce deletes processed events older than Retention, batch after
// batch. It does nothing when Retention is 0.
func (r *Recovery) RetainOnce(ctx context.Context) (int, error) {
	if r.Retention <= 0 {
		return 0, nil
	}
	cutoff := r.now().Add(-r.Retention)
	total := 0
	for {
		n, err := r.Store.DeleteProcessedBefore(ctx, cutoff, r.batch())
		total += n
		if err != nil || n < r.batch() {
			return total, err
		}
	}
}

// Eraser is what erasure needs of the store.
type Eraser interface {
	// EraseDeletedBefore removes the bodies of the events of users
	// deleted before cutoff, except events still to be processed.
	EraseDeletedBefore(ctx context.Context, cutoff, now time.Time) (models.Erasure, error)
}

// EraseOnce erases the personal data (bodies and payloads) of the events of
// users deleted more than EraseAfter ago. It does nothing when EraseAfter
// is 0 or there is no Eraser.
func (r *Recovery) EraseOnce(ctx context.Context) (models.Erasure, error) {
	if r.Eraser == nil || r.EraseAfter <= 0 {
		return models.Erasure{}, nil
	}
	now := r.now()
	return r.Eraser.EraseDeletedBefore(ctx, now.Add(-r.EraseAfter), now.UTC())
}

// Run sweeps, applies retention and erases every interval until ctx is
// done, paced by Loop. The first pass runs at once, which recovers what a
// crash left behind as soon as the process is back.
func (r *Recovery) Run(ctx context.Context, interval time.Duration) {
	Loop(ctx, interval, func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, PassTimeout)
		defer cancel()
		rep, err := r.SweepOnce(ctx)
		if err == nil {
			rep.SweepDone = true
			rep.Deleted, err = r.RetainOnce(ctx)
			rep.RetentionDone = err == nil && r.Retention > 0
		}
		if err == nil {
			var er models.Erasure
			er, err = r.EraseOnce(ctx)
			rep.Erased = er.Events
		}
		if err != nil && ctx.Err() == nil && r.Log != nil {
			r.Log.LogAttrs(ctx, slog.LevelWarn, "recovery pass failed", errAttr(err))
		}
		rep.Err = err
		if r.Observe != nil {
			r.Observe(rep)
		}
	})
}

func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("err", err.Error())
}
