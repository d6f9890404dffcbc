package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// TestDeliver_StoresAppliesAndMarksInOneWriteAndKeepsAFailedEventStored
// checks the one-transaction delivery against the three steps it stands
// for: a new event is processed with its outcome; a duplicate of a
// processed one is found and not applied again; a change that cannot
// apply leaves its event stored (for the caller to mark failed), and a
// later delivery of it applies.
func TestDeliver_StoresAppliesAndMarksInOneWriteAndKeepsAFailedEventStored(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	ev := func(id string) models.Event {
		return models.Event{EventID: id, Type: "user.created", EventType: models.EventCreated, UserID: "user_d",
			RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: now, Status: models.StatusStored}
	}
	ch := models.Change{UserID: "user_d", EventID: "msg_1", SourceTime: now, DisplayName: "D", Metadata: json.RawMessage(`{}`)}

	deliver := s.Users().(sync.Deliverer).Deliver
	stored, created, outcome, err := deliver(ctx, ev("msg_1"), ch, now)
	if err != nil || !created || outcome != models.OutcomeApplied || stored.Status != models.StatusProcessed {
		t.Fatalf("Deliver = %+v, %v, %q, %v; want a new event processed, applied", stored, created, outcome, err)
	}
	if got, _ := s.Events().Get(ctx, "msg_1"); got.Status != models.StatusProcessed || got.Attempts != 1 {
		t.Errorf("event = %+v, want processed after 1 attempt", got)
	}
	if st, _ := s.Events().Stats(ctx); st.ByOutcome[models.OutcomeApplied] != 1 {
		t.Errorf("stats = %+v, want the outcome counted", st)
	}

	again, created, outcome, err := deliver(ctx, ev("msg_1"), ch, now.Add(time.Second))
	if err != nil || created || outcome != "" || again.Status != models.StatusProcessed {
		t.Errorf("Deliver of a processed event = %+v, %v, %q, %v; want it found, not applied", again, created, outcome, err)
	}

	bad := ch
	bad.EventID, bad.Metadata = "msg_2", json.RawMessage(`[1]`)
	stored, created, _, err = deliver(ctx, ev("msg_2"), bad, now)
	if !errors.Is(err, models.ErrInvalid) || !created || stored.ID == "" {
		t.Fatalf("Deliver of a change that cannot apply = %+v, %v, %v; want it stored and the error", stored, created, err)
	}
	if got, err := s.Events().Get(ctx, "msg_2"); err != nil || got.Status != models.StatusStored {
		t.Errorf("event of a failed change = %+v, %v; want it stored", got, err)
	}
	if u, _ := s.Users().Get(ctx, "user_d"); u.LastEventID != "msg_1" {
		t.Errorf("user = %+v, want the failed change not applied", u)
	}
}
