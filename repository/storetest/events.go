package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the events of the event log: a retry is recognised,
// one event per eventId, the body kept exactly, the first outcome stays,
// the sweep's due events and claims, and retention.

func newEvent(id, userID, body string) models.Event {
	return models.Event{
		EventID: id, Type: "user.created", EventType: models.EventCreated, UserID: userID,
		RawBody: []byte(body), Source: models.SourceClerk, ReceivedAt: t0, Status: models.StatusStored,
	}
}

// kindEvent is a stored event of kind k changing object (a user id for a
// user event, an organization or membership id else), of user userID.
func kindEvent(eventID string, k models.Kind, et models.EventType, object, userID string, at time.Duration) models.Event {
	typ := models.TypesOf(k)[slices.Index([]models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}, et)]
	ev := models.Event{EventID: eventID, Type: typ, EventType: et, UserID: userID, ObjectID: object,
		RawBody: []byte(`{"public_user_data":{"first_name":"Ada"}}`), Source: models.SourceClerk,
		ReceivedAt: t0.Add(at), Status: models.StatusStored}
	if k == models.KindUser {
		ev.ObjectID = ""
	}
	return ev
}

func record(t *testing.T, s repository.Store, ev models.Event) models.Event {
	t.Helper()
	got, created, err := s.Events().Record(context.Background(), ev)
	if err != nil || !created {
		t.Fatalf("Record(%s) = %v, %v; want a new event", ev.EventID, created, err)
	}
	return got
}

func getEvent(t *testing.T, s repository.Store, id string) models.Event {
	t.Helper()
	ev, err := s.Events().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get event %s: %v", id, err)
	}
	return ev
}

func testRetryRecognised(t *testing.T, s repository.Store) {
	ctx := context.Background()
	first := record(t, s, newEvent("msg_1", "user_1", `{"type":"user.created"}`))
	if first.Status != models.StatusStored || first.ID == "" {
		t.Fatalf("Record = %+v, want a stored event with an id", first)
	}
	if err := s.Events().MarkProcessed(ctx, first.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	again, created, err := s.Events().Record(ctx, newEvent("msg_1", "user_1", `{"type":"user.created"}`))
	if err != nil || created || again.ID != first.ID || again.Status != models.StatusProcessed || again.Outcome != models.OutcomeApplied {
		t.Fatalf("Record again = %+v, %v, %v; want the processed event", again, created, err)
	}
	// A failure reported late, by a concurrent delivery, does not undo it.
	if err := s.Events().MarkFailed(ctx, first.ID, "late failure", nil); err != nil {
		t.Fatal(err)
	}
	got := getEvent(t, s, first.ID)
	if got.Status != models.StatusProcessed || got.Error != "" || got.Attempts != 1 {
		t.Errorf("event = %+v; want processed after 1 attempt", got)
	}
	if byEventID := getEvent(t, s, "msg_1"); byEventID.ID != first.ID {
		t.Errorf("Get by eventId = %s, want %s", byEventID.ID, first.ID)
	}
}

func testConcurrentRecord(t *testing.T, s repository.Store) {
	var created atomic.Int32
	ids := make(chan string, 30)
	var wg stdsync.WaitGroup
	for range 30 {
		wg.Go(func() {
			ev, c, err := s.Events().Record(context.Background(), newEvent("msg_same", "user_1", `{}`))
			if err != nil {
				t.Error(err)
				return
			}
			if c {
				created.Add(1)
			}
			ids <- ev.ID
		})
	}
	wg.Wait()
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Errorf("deliveries of one event got ids %s and %s", first, id)
		}
	}
	if created.Load() != 1 {
		t.Errorf("%d deliveries created the event, want 1", created.Load())
	}
}

func testBodyExact(t *testing.T, s repository.Store) {
	for _, body := range []string{
		"{\"type\":\"user.created\",\"x\":\"\xff\xfe\"}", // not UTF-8
		`{"type":"user.created","data":` + deep(300) + `}`,
		`{"type":"user.created","data":{"public_metadata":{"a.b":{"$c":1}}}}`,
	} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_body%d", len(body)), "user_1", body))
		if got := getEvent(t, s, ev.ID); string(got.RawBody) != body {
			t.Errorf("raw body = %q, want %q", got.RawBody, body)
		}
	}
}

func deep(n int) string {
	b := make([]byte, 0, 6*n+1)
	for range n {
		b = append(b, `{"a":`...)
	}
	b = append(b, '1')
	for range n {
		b = append(b, '}')
	}
	return string(b)
}

func testGetUnknown(t *testing.T, s repository.Store) {
	for _, id := range []string{"nope", "123456", "000000000000000000000000"} {
		if _, err := s.Events().Get(context.Background(), id); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
	if err := s.Events().MarkProcessed(context.Background(), "nope", models.OutcomeApplied, t0); err != nil && !errors.Is(err, models.ErrNotFound) {
		t.Errorf("MarkProcessed of an unknown id: %v", err)
	}
}

func testFirstOutcome(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ev := record(t, s, newEvent("msg_first", "user_1", `{}`))
	for _, o := range []models.Outcome{models.OutcomeApplied, models.OutcomeStale, models.OutcomeDeleted} {
		if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0); err != nil {
			t.Fatal(err)
		}
	}
	got := getEvent(t, s, ev.ID)
	if got.Outcome != models.OutcomeApplied || got.Attempts != 1 || !got.ProcessedAt.Equal(t0) {
		t.Errorf("event = %+v; want its first outcome, applied, after 1 attempt", got)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByOutcome[models.OutcomeApplied] != 1 || st.ByOutcome[models.OutcomeStale] != 0 {
		t.Errorf("stats = %+v, %v; want the event counted once, as applied", st, err)
	}
}

func testDue(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := t0.Add(time.Hour)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	mk := func(id string, received time.Duration, source *time.Time) models.Event {
		ev := newEvent(id, "user_1", `{"b":"`+id+`"}`)
		ev.ReceivedAt, ev.SourceTimestamp = t0.Add(received), source
		return record(t, s, ev)
	}
	stuck := mk("msg_stuck", 0, at(5*time.Second))
	mk("msg_fresh", 59*time.Minute+50*time.Second, at(time.Second)) // still the delivery's
	retryNow := mk("msg_retry_now", time.Minute, at(3*time.Second))
	retryLater := mk("msg_retry_later", time.Minute, at(time.Second))
	gaveUp := mk("msg_gave_up", time.Minute, at(time.Second))
	done := mk("msg_done", 0, at(time.Second))
	for _, f := range []struct {
		ev    models.Event
		retry *time.Time
	}{{retryNow, at(30 * time.Minute)}, {retryLater, at(2 * time.Hour)}, {gaveUp, nil}} {
		if err := s.Events().MarkFailed(ctx, f.ev.ID, "boom", f.retry); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Events().MarkProcessed(ctx, done.ID, models.OutcomeApplied, now); err != nil {
		t.Fatal(err)
	}
	due, err := s.Events().Due(ctx, now.Add(-time.Minute), now, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range due {
		got = append(got, ev.EventID)
		if string(ev.RawBody) != `{"b":"`+ev.EventID+`"}` {
			t.Errorf("due event %s without its body: %q", ev.EventID, ev.RawBody)
		}
	}
	if want := []string{retryNow.EventID, stuck.EventID}; !slices.Equal(got, want) {
		t.Errorf("Due = %v, want %v (in Clerk's order)", got, want)
	}
	if due, err := s.Events().Due(ctx, now.Add(-time.Minute), now, 1); err != nil || len(due) != 1 {
		t.Errorf("Due with limit 1 = %d events, %v", len(due), err)
	}
}

func testClaim(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ev := record(t, s, newEvent("msg_claim", "user_1", `{}`))
	var wins atomic.Int32
	var wg stdsync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ok, err := s.Events().Claim(ctx, ev.ID, 0, t0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d sweeps won the claim, want 1", wins.Load())
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 0, t0.Add(2*time.Minute), time.Minute); !ok {
		t.Error("an expired claim cannot be taken over")
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 1, t0.Add(10*time.Minute), time.Minute); ok {
		t.Error("a claim with a stale attempt count won")
	}
	if err := s.Events().MarkFailed(ctx, ev.ID, "boom", nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 1, t0.Add(3*time.Minute), time.Minute); !ok {
		t.Error("a mark does not end the claim")
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 2, t0.Add(time.Hour), time.Minute); ok {
		t.Error("a processed event was claimed")
	}
}

func testRetention(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ids := map[string]string{}
	for _, id := range []string{"old", "new", "stored", "failed"} {
		ids[id] = record(t, s, newEvent("msg_"+id, "user_1", `{}`)).ID
	}
	if err := s.Events().MarkProcessed(ctx, ids["old"], models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ids["new"], models.OutcomeApplied, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkFailed(ctx, ids["failed"], "boom", nil); err != nil {
		t.Fatal(err)
	}
	n, err := s.Events().DeleteProcessedBefore(ctx, t0.Add(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want 1", n, err)
	}
	for id, gone := range map[string]bool{"old": true, "new": false, "stored": false, "failed": false} {
		_, err := s.Events().Get(ctx, ids[id])
		if gone != errors.Is(err, models.ErrNotFound) {
			t.Errorf("event %s: Get error %v, want gone=%v", id, err, gone)
		}
	}
}
