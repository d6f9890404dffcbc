package sync_test

import (
	"context"
	"fmt"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// TestIngest_ConcurrentDeliveriesOfOneEventKeepItsFirstOutcome delivers
// one event 100 times at once, as Svix retries and replays may: it is
// processed once, keeps its first outcome, and attempts counts that one
// attempt, not 100.
func TestIngest_ConcurrentDeliveriesOfOneEventKeepItsFirstOutcome(t *testing.T) {
	ctx := context.Background()
	// A hundred connections opened at once on a busy machine: generous
	// waits, so that the test says what happened, not how fast.
	s := repotest.NewStore(t)
	svc := sync.New(s.Events(), s, nil)
	raw := userEvent("user_many", 1000, "many@example.com")
	ce, err := models.DecodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	var wg stdsync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := svc.Ingest(ctx, sync.Delivery{EventID: "msg_many", Body: raw, Event: ce})
			if err != nil || res.Status != models.StatusProcessed || res.Outcome != models.OutcomeApplied {
				t.Errorf("Ingest = %+v, %v; want processed/applied", res, err)
			}
		}()
	}
	wg.Wait()
	ev, _, err := s.Events().Record(ctx, models.Event{EventID: "msg_many"})
	if err != nil || ev.Status != models.StatusProcessed || ev.Outcome != models.OutcomeApplied || ev.Attempts != 1 {
		t.Errorf("event = %+v, %v; want processed/applied after 1 attempt", ev, err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByStatus[models.StatusProcessed] != 1 || st.ByOutcome[models.OutcomeApplied] != 1 {
		t.Errorf("stats = %+v, %v; want the event counted once", st, err)
	}
}

// TestSweep_SeveralInstancesClaimEachEventSoAttemptsCountRealAttempts
// runs four sweeps at once over events that all fail (their user cannot
// be written yet): each event is claimed by one sweep per pass, so it has one
// attempt, not four.
func TestSweep_SeveralInstancesClaimEachEventSoAttemptsCountRealAttempts(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	old := time.Now().Add(-time.Hour)
	const n = 12
	var ids []string
	for i := range n {
		ev := store(t, s, fmt.Sprintf("msg_%02d", i), userEvent(fmt.Sprintf("user_%02d", i), 1000, "taken@example.com"), old)
		ids = append(ids, ev.ID)
	}
	var wg stdsync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &sync.Recovery{Service: sync.New(s.Events(), refusing(s), nil), Store: s.Events(), Grace: time.Minute, Batch: 5}
			if _, err := rec.SweepOnce(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		ev := status(t, s, id)
		if ev.Status != models.StatusFailed || ev.Attempts != 1 {
			t.Errorf("event %s: %s after %d attempts; want failed after 1", ev.EventID, ev.Status, ev.Attempts)
		}
	}
}

func TestClaim_OneSweepHoldsAnEventUntilItsLeaseEnds(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev := store(t, s, "msg_c", userEvent("user_c", 1000, ""), now)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},                // free
		{time.Second, false},     // held
		{time.Minute, true},      // the lease ran out
		{time.Minute + 1, false}, // held again
	}
	for i, st := range steps {
		got, err := s.Events().Claim(ctx, ev.ID, 0, now.Add(st.at), time.Minute)
		if err != nil || got != st.want {
			t.Fatalf("step %d: Claim at +%v = %v, %v; want %v", i, st.at, got, err, st.want)
		}
	}
	if got, err := s.Events().Claim(ctx, ev.ID, 1, now.Add(time.Hour), time.Minute); err != nil || got {
		t.Errorf("Claim with attempts the event has not had = %v, %v; want false", got, err)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, now); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Events().Claim(ctx, ev.ID, 1, now.Add(time.Hour), time.Minute); err != nil || got {
		t.Errorf("Claim of a processed event = %v, %v; want false", got, err)
	}
}

// refusing is s's deliveries, which cannot apply anything yet.
func refusing(s repository.Store) sync.Store {
	return repotest.Hook(s, func(context.Context, models.Change) error {
		return fmt.Errorf("test: %w", models.ErrRetryLater)
	})
}
