package sync_test

import (
	"context"
	"fmt"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func TestScheduler_TwoSchedulersNeverRunTwoJobsAtOnce(t *testing.T) {
	store := repotest.NewStore(t)
	other := store.Leases()
	var running, most, runs atomic.Int64
	job := func(context.Context) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		runs.Add(1)
		time.Sleep(5 * time.Millisecond) // room for the other one to try
		running.Add(-1)
		return nil
	}
	scheds := []*sync.Scheduler{
		{Leases: store.Leases(), Name: "reconcile", Owner: "a", Job: job, Log: repotest.Discard()},
		{Leases: other, Name: "reconcile", Owner: "b", Job: job, Log: repotest.Discard()},
	}
	var wg stdsync.WaitGroup
	ran := make([]atomic.Int64, len(scheds))
	for i, s := range scheds {
		// Interval 0: each run's lease ends with it, so both keep trying.
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					ok, err := s.RunOnce(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						ran[i].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("at most %d runs at once, want 1", most.Load())
	}
	if runs.Load() == 0 {
		t.Errorf("no run at all")
	}
	t.Logf("runs: a %d, b %d", ran[0].Load(), ran[1].Load())
}

func TestScheduler_RunsOncePerIntervalAcrossInstances(t *testing.T) {
	store := repotest.NewStore(t)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var runs []string
	mk := func(owner string) *sync.Scheduler {
		return &sync.Scheduler{
			Leases: store.Leases(), Name: "reconcile", Owner: owner, Interval: time.Hour, Now: clock,
			Log: repotest.Discard(),
			Job: func(context.Context) error { runs = append(runs, owner); return nil },
		}
	}
	a, b := mk("a"), mk("b")
	ctx := context.Background()
	steps := []struct {
		at   time.Duration // after the start
		s    *sync.Scheduler
		want bool
	}{
		{0, a, true},
		{0, b, false},
		{30 * time.Minute, b, false},
		{30 * time.Minute, a, false}, // not even its owner before the interval
		{time.Hour, b, true},
		{time.Hour + time.Minute, a, false},
		{2 * time.Hour, a, true},
	}
	start := now
	for _, st := range steps {
		now = start.Add(st.at)
		ran, err := st.s.RunOnce(ctx)
		if err != nil || ran != st.want {
			t.Errorf("at +%v, %s RunOnce = %v, %v; want %v", st.at, st.s.Owner, ran, err, st.want)
		}
	}
	if got := fmt.Sprint(runs); got != "[a b a]" {
		t.Errorf("runs = %s, want [a b a]", got)
	}
}

func TestScheduler_AnExpiredLeaseIsTakenOver(t *testing.T) {
	store := repotest.NewStore(t)
	leases := store.Leases()
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// Process a took the lease for a minute and died.
	if ok, err := leases.Acquire(ctx, "reconcile", "a", now, now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if ok, _ := leases.Acquire(ctx, "reconcile", "b", now.Add(59*time.Second), now.Add(2*time.Minute)); ok {
		t.Errorf("b took a lease that had not expired")
	}
	if ok, err := leases.Acquire(ctx, "reconcile", "b", now.Add(time.Minute), now.Add(2*time.Minute)); !ok || err != nil {
		t.Errorf("b could not take the expired lease: %v, %v", ok, err)
	}
	if ok, _ := leases.Extend(ctx, "reconcile", "a", now.Add(3*time.Minute)); ok {
		t.Errorf("a renewed a lease b holds")
	}
}

func TestScheduler_ALeaseLaterThanTheScheduleSetsIsTakenOver(t *testing.T) {
	store := repotest.NewStore(t)
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }
	var runs int
	mk := func(owner string, interval time.Duration) *sync.Scheduler {
		return &sync.Scheduler{
			Leases: store.Leases(), Name: "reconcile", Owner: owner, Interval: interval, Now: clock,
			Log: repotest.Discard(), Job: func(context.Context) error { runs++; return nil },
		}
	}
	ctx := context.Background()
	steps := []struct {
		name string
		at   time.Duration // after start
		s    *sync.Scheduler
		want bool
	}{
		{"a run every 100 days", 0, mk("a", 100*24*time.Hour), true},
		{"the interval changed to 1 minute: the 100-day lease is stale", time.Hour, mk("b", time.Minute), true},
		{"and the new schedule holds: not again within the minute", time.Hour + 30*time.Second, mk("c", time.Minute), false},
		{"a minute later", time.Hour + time.Minute, mk("c", time.Minute), true},
	}
	for _, st := range steps {
		now = start.Add(st.at)
		if ran, err := st.s.RunOnce(ctx); err != nil || ran != st.want {
			t.Errorf("%s: RunOnce = %v, %v; want %v", st.name, ran, err, st.want)
		}
	}
	if runs != 3 {
		t.Errorf("%d runs, want 3", runs)
	}
}

func TestScheduler_ALeaseSetBeforeTheClockWentBackIsTakenOver(t *testing.T) {
	store := repotest.NewStore(t)
	now := time.Date(2027, 11, 21, 12, 0, 0, 0, time.UTC) // a clock a year ahead
	clock := func() time.Time { return now }
	s := &sync.Scheduler{
		Leases: store.Leases(), Name: "reconcile", Owner: "a", Interval: time.Hour, Now: clock,
		Log: repotest.Discard(), Job: func(context.Context) error { return nil },
	}
	if ran, err := s.RunOnce(context.Background()); !ran || err != nil {
		t.Fatalf("first RunOnce = %v, %v", ran, err)
	}
	now = now.AddDate(-1, 0, 0) // corrected
	if ran, err := s.RunOnce(context.Background()); !ran || err != nil {
		t.Errorf("RunOnce after the clock went back a year = %v, %v; want a run", ran, err)
	}
}

func TestScheduler_ALeaseHeldByARunningJobIsNeverTakenAsStale(t *testing.T) {
	store := repotest.NewStore(t)
	leases := store.Leases()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// Another instance, its clock 30 s ahead, runs a job and renews its
	// lease of a minute.
	if ok, err := leases.Acquire(context.Background(), "reconcile", "a", now.Add(30*time.Second), now.Add(90*time.Second)); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	s := &sync.Scheduler{
		Leases: leases, Name: "reconcile", Owner: "b", Interval: time.Minute, Now: func() time.Time { return now },
		Log: repotest.Discard(), Job: func(context.Context) error { t.Error("b ran while a held the lease"); return nil },
	}
	if ran, err := s.RunOnce(context.Background()); ran || err != nil {
		t.Errorf("RunOnce = %v, %v; want no run", ran, err)
	}
}

// TestScheduler_ARunStoppedMidwayReleasesItsLeaseAndAFinishedOneKeepsIt:
// a graceful stop during a run gives the lease up, so that another
// process runs the job at once; a run that finished keeps the lease until
// the next one is due.
func TestScheduler_ARunStoppedMidwayReleasesItsLeaseAndAFinishedOneKeepsIt(t *testing.T) {
	store := repotest.NewStore(t)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ctx, stop := context.WithCancel(context.Background())
	a := &sync.Scheduler{Leases: store.Leases(), Name: "reconcile", Owner: "a", Interval: time.Hour, Now: clock,
		Log: repotest.Discard(), Job: func(ctx context.Context) error { stop(); <-ctx.Done(); return ctx.Err() }}
	if ran, _ := a.RunOnce(ctx); !ran {
		t.Fatal("a did not run")
	}
	var ranB bool
	b := &sync.Scheduler{Leases: store.Leases(), Name: "reconcile", Owner: "b", Interval: time.Hour, Now: clock,
		Log: repotest.Discard(), Job: func(context.Context) error { ranB = true; return nil }}
	if ran, err := b.RunOnce(context.Background()); !ran || err != nil || !ranB {
		t.Fatalf("b after a's run was stopped = %v, %v; want it to run at once", ran, err)
	}
	ranB = false
	if ran, _ := b.RunOnce(context.Background()); ran || ranB {
		t.Error("a finished run did not keep the lease until the next one is due")
	}
}
