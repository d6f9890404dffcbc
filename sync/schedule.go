package sync

import (
	"context"
	"log/slog"
	"time"
)

// LeaseStore hands out a named lease to one owner at a time, across every
// process on the database.
type LeaseStore interface {
	// Acquire takes the lease until until if it is free (never taken, or
	// expired by now), and reports whether owner holds it.
	Acquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	// Extend moves the expiry of the lease owner holds; false when owner
	// no longer holds it.
	Extend(ctx context.Context, name, owner string, until time.Time) (bool, error)
	// Reclaim takes the lease until until if it expires after horizon,
	// whoever holds it, and reports whether owner holds it.
	Reclaim(ctx context.Context, name, owner string, horizon, until time.Time) (bool, error)
	// Release gives the lease up if owner holds it.
	Release(ctx context.Context, name, owner string) error
}

// Scheduler runs a job every Interval on one process at a time among all
// that share a database: each process tries to take a lease, the one that
// gets it runs the job, renewing the lease while it runs, and at the end
// keeps the lease until the next run is due, so no other process starts
// one before then. A process that dies mid-run stops renewing; its lease
// expires after TTL and another process takes over.
//
// A lease that ends later than any run of this schedule would set it (more
// than Interval, or TTL, and a minute of clock skew ahead) is stale: the
// interval was shortened (100d to 1m) or a clock went back after the lease
// was set. It is taken over at once instead of waited for.
type Scheduler struct {
	Leases LeaseStore
	Name   string // the lease's name, e.g. "reconcile"
	Owner  string // this process, unique among those on the database
	// Interval is the time between the starts of two runs.
	Interval time.Duration
	// TTL is how long a lease lasts without renewal; it is renewed every
	// TTL/3 during a run. Zero means one minute.
	TTL time.Duration
	// Job is the work. Its context ends when the lease is lost.
	Job func(ctx context.Context) error
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Scheduler) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Scheduler) ttl() time.Duration {
	if s.TTL <= 0 {
		return time.Minute
	}
	return s.TTL
}

// clockSkew is how far apart the clocks of the processes sharing a lease
// may be.
const clockSkew = time.Minute

// horizon is how far from now the lease of a healthy schedule may end: a
// run's renewal (TTL), or the wait for the next run (Interval), on a clock
// up to clockSkew ahead.
func (s *Scheduler) horizon() time.Duration {
	return max(s.Interval, s.ttl()) + clockSkew
}

// RunOnce runs the job if this process gets the lease, and reports whether
// it ran. err is the job's error, or the lease store's.
func (s *Scheduler) RunOnce(ctx context.Context) (ran bool, err error) {
	start := s.now()
	ok, err := s.Leases.Reclaim(ctx, s.Name, s.Owner, start.Add(s.horizon()), start.Add(s.ttl()))
	if err != nil {
		return false, err
	}
	if ok {
		s.Log.Warn("lease ended later than this schedule sets it: taken over as stale (the interval was shortened, or a clock went back)",
			slog.String("lease", s.Name), slog.Duration("interval", s.Interval))
	} else if ok, err = s.Leases.Acquire(ctx, s.Name, s.Owner, start, start.Add(s.ttl())); err != nil || !ok {
		return false, err
	}
	jctx, cancel := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(s.ttl() / 3)
		defer t.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-t.C:
			}
			held, err := s.Leases.Extend(jctx, s.Name, s.Owner, s.now().Add(s.ttl()))
			if jctx.Err() != nil {
				return
			}
			if err != nil || !held {
				// Another process may take the lease: stop before it starts.
				s.Log.Warn("lease lost; stopping the run", slog.String("lease", s.Name), slog.Any("err", err))
				cancel()
				return
			}
		}
	}()
	err = s.Job(jctx)
	cancel()
	<-renewed
	ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer ecancel()
	if ctx.Err() != nil {
		// Stopped mid-run (a graceful stop): the run did not finish, so
		// another process (or this one restarted) may run it at once.
		if rerr := s.Leases.Release(ectx, s.Name, s.Owner); rerr != nil {
			s.Log.Warn("lease not released after a stop; it runs out by itself", slog.String("lease", s.Name), slog.String("err", rerr.Error()))
		}
		return true, err
	}
	// Keep others away until the next run is due. A failure here only
	// lets another process run sooner.
	next := start.Add(s.Interval)
	if now := s.now(); next.Before(now) {
		next = now
	}
	if _, xerr := s.Leases.Extend(ectx, s.Name, s.Owner, next); xerr != nil {
		s.Log.Warn("lease not extended after the run", slog.String("lease", s.Name), slog.String("err", xerr.Error()))
	}
	s.Log.Info("next run", slog.String("lease", s.Name), slog.Time("next_run", next.UTC()))
	return true, err
}

// Run tries to run the job now and then every Interval (but at most a
// minute apart, and at least a second) until ctx ends: the lease decides
// when a run is due.
func (s *Scheduler) Run(ctx context.Context) {
	poll := max(min(s.Interval, time.Minute), time.Second)
	// The first run is now, unless another process runs one or ran one
	// less than an interval ago: then it is due once that lease ends, at
	// the latest by the horizon (later, the lease is stale and taken).
	start := s.now()
	s.Log.Info("schedule started", slog.String("lease", s.Name), slog.Duration("interval", s.Interval),
		slog.Time("next_run_by", start.Add(s.horizon()).UTC()))
	for {
		// The job reports its own outcome; only the lease's failures are
		// logged here.
		if ran, err := s.RunOnce(ctx); err != nil && !ran && ctx.Err() == nil {
			s.Log.Warn("lease not acquired", slog.String("lease", s.Name), slog.String("err", err.Error()))
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
