package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// testDiscard: only a failed event free of claims is discarded; it keeps
// when, why and who, leaves the failed counts and the failures, is
// finished (a retry of its eventId finds it, no mark, claim or sweep
// changes it), and retention deletes it once its time has passed.
func testDiscard(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ev := func(id string) models.Event { return record(t, s, newEvent(id, "user_1", `{"b":"`+id+`"}`)) }
	failed, retrying, stored, processed, claimed := ev("msg_failed"), ev("msg_retrying"), ev("msg_stored"), ev("msg_processed"), ev("msg_claimed")
	retry := t0.Add(time.Minute)
	for _, f := range []struct {
		ev    models.Event
		retry *time.Time
	}{{failed, nil}, {retrying, &retry}, {claimed, &retry}} {
		if err := s.Events().MarkFailed(ctx, f.ev.ID, "boom", f.retry); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Events().MarkProcessed(ctx, processed.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(10 * time.Minute)
	if ok, err := s.Events().Claim(ctx, claimed.ID, 1, at, time.Hour); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	d := models.Discard{At: at, Reason: "the payload can never apply", By: "key sha256:0123456789ab"}

	// Not failed, or held by a sweep: a conflict, and nothing changes.
	for _, e := range []models.Event{stored, processed, claimed} {
		if _, err := s.Events().Discard(ctx, e.EventID, d); !errors.Is(err, models.ErrConflict) {
			t.Errorf("Discard(%s) = %v, want a conflict", e.EventID, err)
		}
		if got := getEvent(t, s, e.ID); got.Status == models.StatusDiscarded || got.Discarded != nil {
			t.Errorf("event %s was discarded: %+v", e.EventID, got)
		}
	}
	if _, err := s.Events().Discard(ctx, "msg_unknown", d); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("Discard(unknown) = %v, want not found", err)
	}

	// A failed event, given up or still to be retried, by its id or eventId.
	for _, e := range []struct {
		ev models.Event
		by string
	}{{failed, failed.EventID}, {retrying, retrying.ID}} {
		got, err := s.Events().Discard(ctx, e.by, d)
		if err != nil {
			t.Fatalf("Discard(%s): %v", e.by, err)
		}
		if got.Status != models.StatusDiscarded || got.Discarded == nil || !got.Discarded.At.Equal(at) ||
			got.Discarded.Reason != d.Reason || got.Discarded.By != d.By || got.RetryAt != nil || got.ID != e.ev.ID {
			t.Errorf("Discard(%s) = %+v (discarded %+v), want it discarded at %v by %q for %q, with no retry",
				e.by, got, got.Discarded, at, d.By, d.Reason)
		}
		if again := getEvent(t, s, e.ev.EventID); again.Status != models.StatusDiscarded || again.Discarded == nil || again.Discarded.Reason != d.Reason {
			t.Errorf("event %s read back = %+v", e.ev.EventID, again)
		}
	}
	if _, err := s.Events().Discard(ctx, failed.EventID, d); !errors.Is(err, models.ErrConflict) {
		t.Errorf("a second Discard = %v, want a conflict", err)
	}

	// Finished: a retry of its eventId finds it, and nothing moves it.
	again, created, err := s.Events().Record(ctx, newEvent(failed.EventID, "user_1", `{}`))
	if err != nil || created || again.Status != models.StatusDiscarded {
		t.Errorf("Record of a discarded eventId = %+v, created %v, %v; want the discarded event", again, created, err)
	}
	if ok, err := s.Events().Claim(ctx, failed.ID, again.Attempts, at.Add(time.Hour), time.Minute); err != nil || ok {
		t.Errorf("Claim of a discarded event = %v, %v; want refused", ok, err)
	}
	if err := s.Events().MarkFailed(ctx, failed.ID, "again", &retry); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, retrying.ID, models.OutcomeApplied, at); err != nil {
		t.Fatal(err)
	}
	for _, e := range []models.Event{failed, retrying} {
		if got := getEvent(t, s, e.ID); got.Status != models.StatusDiscarded || got.Outcome != "" || got.RetryAt != nil {
			t.Errorf("a mark changed discarded event %s: %+v", e.EventID, got)
		}
	}
	if due, err := s.Events().Due(ctx, at.Add(time.Hour), at.Add(time.Hour), 10); err != nil {
		t.Fatal(err)
	} else {
		for _, e := range due {
			if e.Status == models.StatusDiscarded {
				t.Errorf("the sweep is due to process discarded event %s", e.EventID)
			}
		}
	}

	// Counted apart: no longer failed, given up or a failure to group.
	st, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[models.StatusDiscarded] != 2 || st.ByStatus[models.StatusFailed] != 1 || st.GaveUp != 0 ||
		st.ByKind[models.KindUser].Failed != 1 || st.ByStatus[models.StatusProcessed] != 1 {
		t.Errorf("stats = %+v; want 2 discarded, 1 failed (the claimed one), none given up, 1 processed", st)
	}
	groups, err := s.Events().FailureGroups(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, g := range groups.Groups {
		n += g.Count
	}
	if n != 1 {
		t.Errorf("failure groups count %d events, want 1 (discarded ones are not failures)", n)
	}
	discardedLog, err := s.Events().List(ctx, models.EventFilter{Status: models.StatusDiscarded, Limit: 10})
	if err != nil || len(discardedLog.Events) != 2 {
		t.Errorf("the event log of discarded events = %d events, %v; want 2", len(discardedLog.Events), err)
	}

	// Retention: finished since it was discarded; the counters keep theirs.
	if n, err := s.Events().DeleteProcessedBefore(ctx, at, 10); err != nil || n != 1 {
		t.Errorf("retention before the discard = %d, %v; want the processed event only", n, err)
	}
	if n, err := s.Events().DeleteProcessedBefore(ctx, at.Add(time.Millisecond), 10); err != nil || n != 2 {
		t.Errorf("retention after the discard = %d, %v; want the 2 discarded events", n, err)
	}
	if _, err := s.Events().Get(ctx, failed.ID); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a discarded event outlived retention: %v", err)
	}
	st, err = s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByStatus[models.StatusDiscarded] != 0 || st.ByOutcome[models.OutcomeApplied] != 0 || st.ByStatus[models.StatusProcessed] != 0 {
		t.Errorf("stats after retention = %+v; want none discarded, none processed", st)
	}
}
