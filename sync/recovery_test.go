package sync_test

import (
	"context"
	"fmt"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func userEvent(userID string, updatedAt int64, email string) []byte {
	return fmt.Appendf(nil, `{"type":"user.updated","timestamp":%d,"data":{"id":%q,"updated_at":%d,"first_name":"v%d","primary_email_address_id":"idn_1","email_addresses":[{"id":"idn_1","email_address":%q}]}}`,
		updatedAt, userID, updatedAt, updatedAt, email)
}

// store records ev as if a delivery had stored it at receivedAt and died.
func store(t *testing.T, s repotest.Store, eventID string, body []byte, receivedAt time.Time) models.Event {
	t.Helper()
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ev := models.Event{
		EventID: eventID, Type: ce.Type, EventType: ce.EventType(), UserID: ce.UserID(), RawBody: body,
		Source: models.SourceClerk, ReceivedAt: receivedAt, Status: models.StatusStored,
	}
	if ch, err := ce.UserChange(eventID, time.Now()); err == nil {
		ev.SourceTimestamp = &ch.SourceTime
	}
	stored, _, err := s.Events().Record(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func status(t *testing.T, s repotest.Store, id string) models.Event {
	t.Helper()
	ev, err := s.Events().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestSweep_ProcessesStuckAndDueEventsAndLeavesTheRest(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	now := time.Now().UTC()
	svc := sync.New(s.Events(), s, nil)
	rec := &sync.Recovery{Service: svc, Store: s.Events(), Grace: time.Minute}

	stuck := store(t, s, "msg_stuck", userEvent("user_a", 1000, "a@example.com"), now.Add(-2*time.Minute))
	young := store(t, s, "msg_young", userEvent("user_b", 1000, "b@example.com"), now.Add(-10*time.Second))
	failed := store(t, s, "msg_failed", userEvent("user_c", 1000, "c@example.com"), now.Add(-time.Hour))
	past := now.Add(-time.Second)
	if err := s.Events().MarkFailed(ctx, failed.ID, "database unavailable", &past); err != nil {
		t.Fatal(err)
	}
	later := store(t, s, "msg_later", userEvent("user_d", 1000, "d@example.com"), now.Add(-time.Hour))
	future := now.Add(time.Hour)
	if err := s.Events().MarkFailed(ctx, later.ID, "database unavailable", &future); err != nil {
		t.Fatal(err)
	}

	rep, err := rec.SweepOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Swept[models.StatusProcessed] != 2 || rep.Outcomes[models.OutcomeApplied] != 2 {
		t.Errorf("sweep report = %+v, want 2 events processed and applied", rep)
	}
	for id, want := range map[string]models.EventStatus{
		stuck.ID: models.StatusProcessed, failed.ID: models.StatusProcessed,
		young.ID: models.StatusStored, later.ID: models.StatusFailed,
	} {
		if got := status(t, s, id); got.Status != want {
			t.Errorf("event %s: status %s, want %s", got.EventID, got.Status, want)
		}
	}
	for _, u := range []string{"user_a", "user_c"} {
		if _, err := s.Users().Get(ctx, u); err != nil {
			t.Errorf("%s after the sweep: %v", u, err)
		}
	}
}

func TestSweep_AppliesAUsersEventsInClerkOrder(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	old := time.Now().Add(-time.Hour)
	// user_x gives its email to user_y: processed in arrival order, user_y
	// would fail first; in Clerk's order every event applies at once.
	store(t, s, "msg_1", userEvent("user_x", 1000, "shared@example.com"), old)
	store(t, s, "msg_3", userEvent("user_y", 3000, "shared@example.com"), old.Add(time.Second))
	store(t, s, "msg_2", userEvent("user_x", 2000, "x@example.com"), old.Add(2*time.Second))
	rec := &sync.Recovery{Service: sync.New(s.Events(), s, nil), Store: s.Events(), Grace: time.Minute}
	rep, err := rec.SweepOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Swept[models.StatusProcessed] != 3 {
		t.Errorf("sweep report = %+v, want 3 processed", rep)
	}
	if y, err := s.Users().Get(ctx, "user_y"); err != nil || y.Email != "shared@example.com" {
		t.Errorf("user_y = %+v, %v", y, err)
	}
}

func TestSweep_GivesUpAfterMaxAttemptsAndCountsIt(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	clock := time.Now()
	now := func() time.Time { return clock }
	// The user cannot be written: every attempt fails.
	svc := sync.New(s.Events(), refusing(s), now)
	svc.SetBackoff(sync.Backoff{First: time.Second, Max: time.Minute, MaxAttempts: 3})
	rec := &sync.Recovery{Service: svc, Store: s.Events(), Grace: time.Minute, Now: now}

	store(t, s, "msg_holder", userEvent("user_holder", 1000, "taken@example.com"), clock.Add(-2*time.Hour))
	if _, err := sync.New(s.Events(), s, now).Process(ctx, status(t, s, "msg_holder")); err != nil {
		t.Fatal(err)
	}
	ev := store(t, s, "msg_blocked", userEvent("user_blocked", 1000, "taken@example.com"), clock.Add(-time.Hour))
	for range 5 {
		if _, err := rec.SweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Hour) // past any retry time
	}
	got := status(t, s, ev.ID)
	if got.Status != models.StatusFailed || got.Attempts != 3 || got.RetryAt != nil {
		t.Errorf("event = status %s, %d attempts, retry at %v; want failed after 3 attempts, no retry", got.Status, got.Attempts, got.RetryAt)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.GaveUp != 1 || st.ByStatus[models.StatusFailed] != 1 || st.ByStatus[models.StatusProcessed] != 1 {
		t.Errorf("stats = %+v, %v; want 1 failed (given up) and 1 processed", st, err)
	}
}

func TestSweep_SeveralInstancesApplyEachEventOnce(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	old := time.Now().Add(-time.Hour)
	const n = 20
	for i := range n {
		store(t, s, fmt.Sprintf("msg_%02d", i), userEvent(fmt.Sprintf("user_%02d", i), 1000, fmt.Sprintf("u%02d@example.com", i)), old)
	}
	var wg stdsync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := &sync.Recovery{Service: sync.New(s.Events(), s, nil), Store: s.Events(), Grace: time.Minute, Batch: 7}
			if _, err := rec.SweepOnce(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByStatus[models.StatusProcessed] != n || st.ByOutcome[models.OutcomeApplied] != n {
		t.Errorf("stats = %+v, %v; want all %d processed and applied", st, err, n)
	}
	page, err := s.Users().List(ctx, models.UserFilter{Limit: 1000, IncludeDeleted: true})
	if err != nil || len(page.Users) != n {
		t.Errorf("%d users, %v; want %d", len(page.Users), err, n)
	}
}

func TestRetention_DeletesOnlyOldProcessedEvents(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	now := time.Now()
	svc := sync.New(s.Events(), s, nil)
	var oldProcessed []string
	for i := range 5 {
		ev := store(t, s, fmt.Sprintf("msg_old_%d", i), userEvent(fmt.Sprintf("user_o%d", i), 1000, ""), now.Add(-48*time.Hour))
		if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, now.Add(-47*time.Hour)); err != nil {
			t.Fatal(err)
		}
		oldProcessed = append(oldProcessed, ev.ID)
	}
	recent := store(t, s, "msg_recent", userEvent("user_r", 1000, ""), now)
	if _, err := svc.Process(ctx, recent); err != nil {
		t.Fatal(err)
	}
	oldStored := store(t, s, "msg_old_stored", userEvent("user_s", 1000, ""), now.Add(-48*time.Hour))
	oldFailed := store(t, s, "msg_old_failed", userEvent("user_f", 1000, ""), now.Add(-48*time.Hour))
	if err := s.Events().MarkFailed(ctx, oldFailed.ID, "boom", nil); err != nil {
		t.Fatal(err)
	}

	rec := &sync.Recovery{Service: svc, Store: s.Events(), Retention: 24 * time.Hour, Batch: 2}
	n, err := rec.RetainOnce(ctx)
	if err != nil || n != 5 {
		t.Fatalf("RetainOnce = %d, %v; want the 5 old processed events", n, err)
	}
	for _, id := range oldProcessed {
		if _, err := s.Events().Get(ctx, id); err == nil {
			t.Errorf("old processed event %s kept", id)
		}
	}
	for _, id := range []string{recent.ID, oldStored.ID, oldFailed.ID} {
		if _, err := s.Events().Get(ctx, id); err != nil {
			t.Errorf("event %s deleted: %v", id, err)
		}
	}
	if n, _ := (&sync.Recovery{Service: svc, Store: s.Events()}).RetainOnce(ctx); n != 0 {
		t.Errorf("retention 0 deleted %d events, want none (keep forever)", n)
	}
}

func TestRecovery_RunStopsWhenAsked(t *testing.T) {
	s := repotest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	passes := make(chan sync.Report, 10)
	rec := &sync.Recovery{Service: sync.New(s.Events(), s, nil), Store: s.Events(),
		Observe: func(r sync.Report) {
			select {
			case passes <- r:
			default:
			}
		}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(ctx, 10*time.Millisecond)
	}()
	<-passes // the first pass runs at once
	<-passes
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// deadlineStore records the deadline of the context of each search for
// due events.
type deadlineStore struct {
	sync.RecoveryStore
	deadlines chan time.Duration
}

func (d deadlineStore) Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.deadlines <- time.Until(dl)
	} else {
		d.deadlines <- 0
	}
	return d.RecoveryStore.Due(ctx, stuckBefore, now, limit)
}

// TestRun_APassMayTakeLongerThanOneRequest: a pass's searches read whole
// collections on the embedded engine; they get PassTimeout, not the
// store's default operation timeout (10 s), which would fail them for ever
// once the collection is large.
func TestRun_APassMayTakeLongerThanOneRequest(t *testing.T) {
	s := repotest.NewStore(t)
	st := deadlineStore{s.Events(), make(chan time.Duration, 1)}
	rec := &sync.Recovery{Service: sync.New(s.Events(), s, nil), Store: st, Grace: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rec.Run(ctx, time.Hour) }()
	left := <-st.deadlines
	cancel()
	<-done
	if left < sync.PassTimeout-time.Minute || left > sync.PassTimeout {
		t.Errorf("the sweep's search had %s left, want about %s", left, sync.PassTimeout)
	}
}
