package sync_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func TestMain(m *testing.M) { repotest.Main(m) }

const body = `{"type":"user.created","timestamp":1760000000500,"data":{"id":"user_crash","updated_at":1760000000000,"first_name":"Crash","primary_email_address_id":"idn_1","email_addresses":[{"id":"idn_1","email_address":"crash@example.com"}]}}`

func TestProcess_AnEventLeftStoredByACrashIsAppliedLater(t *testing.T) {
	ctx := context.Background()
	store := repotest.NewStore(t)
	// The process died after storing the event and before writing the user.
	stored, _, err := store.Events().Record(ctx, models.Event{
		EventID: "msg_crash", Type: "user.created", EventType: models.EventCreated, UserID: "user_crash",
		RawBody: []byte(body), Source: models.SourceClerk, ReceivedAt: time.Now(), Status: models.StatusStored,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Users().Get(ctx, "user_crash"); !errors.Is(err, models.ErrNotFound) {
		t.Fatalf("user before recovery: %v", err)
	}
	ev, err := store.Events().Get(ctx, stored.ID)
	if err != nil {
		t.Fatal(err)
	}
	svc := sync.New(store.Events(), store, nil)
	res, err := svc.Process(ctx, ev)
	if err != nil || res.Status != models.StatusProcessed || res.Outcome != models.OutcomeApplied {
		t.Fatalf("Process = %+v, %v; want processed/applied", res, err)
	}
	u, err := store.Users().Get(ctx, "user_crash")
	if err != nil || u.Email != "crash@example.com" || u.LastEventID != "msg_crash" {
		t.Errorf("user after recovery = %+v, %v", u, err)
	}
	// Processing it once more (a second instance's sweep) changes nothing.
	res, err = svc.Process(ctx, ev)
	if err != nil || res.Outcome != models.OutcomeApplied {
		t.Errorf("Process again = %+v, %v", res, err)
	}
	if again, _ := store.Users().Get(ctx, "user_crash"); !again.UpdatedAt.Equal(u.UpdatedAt) {
		t.Errorf("second Process rewrote the user: updatedAt %v → %v", u.UpdatedAt, again.UpdatedAt)
	}
}

func TestIngest_AnInvalidPayloadIsStoredAsFailed(t *testing.T) {
	ctx := context.Background()
	store := repotest.NewStore(t)
	raw := []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)
	ev, err := models.DecodeEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	svc := sync.New(store.Events(), store, nil)
	res, err := svc.Ingest(ctx, sync.Delivery{EventID: "msg_bad", Body: raw, Event: ev})
	if !errors.Is(err, models.ErrInvalid) || res.Status != models.StatusFailed {
		t.Fatalf("Ingest = %+v, %v; want failed with ErrInvalid", res, err)
	}
	stored, _, err := store.Events().Record(ctx, models.Event{EventID: "msg_bad"})
	if err != nil || stored.Status != models.StatusFailed || stored.UserID != "user_bad" || stored.Error == "" || stored.Attempts != 1 {
		t.Errorf("stored event = %+v, %v; want failed for user_bad with its error", stored, err)
	}
}
