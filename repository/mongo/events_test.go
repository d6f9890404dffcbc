package mongo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
	"github.com/usersync/usersync/repository/repotest"
)

func newEvent(id, body string) models.Event {
	return models.Event{
		EventID: id, Type: "user.created", EventType: models.EventCreated, UserID: "user_1",
		RawBody: []byte(body), Source: models.SourceClerk, ReceivedAt: t0, Status: models.StatusStored,
	}
}

func TestEventsRecord_ARetryIsRecognised(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	first, created, err := s.Events().Record(ctx, newEvent("msg_1", `{"type":"user.created"}`))
	if err != nil || !created || first.Status != models.StatusStored {
		t.Fatalf("Record = %+v, %v, %v; want a new stored event", first, created, err)
	}
	if err := s.Events().MarkProcessed(ctx, first.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	again, created, err := s.Events().Record(ctx, newEvent("msg_1", `{"type":"user.created"}`))
	if err != nil || created || again.ID != first.ID || again.Status != models.StatusProcessed || again.Outcome != models.OutcomeApplied {
		t.Fatalf("Record again = %+v, %v, %v; want the processed event", again, created, err)
	}
	// A failure reported late, by a concurrent delivery, does not undo it.
	if err := s.Events().MarkFailed(ctx, first.ID, "late failure", nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Events().Get(ctx, first.ID)
	if err != nil || got.Status != models.StatusProcessed || got.Error != "" || got.Attempts != 1 {
		t.Errorf("event = %+v, %v; want processed after 1 attempt", got, err)
	}
	if string(got.RawBody) != `{"type":"user.created"}` {
		t.Errorf("raw body = %q", got.RawBody)
	}
}

func TestEventsRecord_KeepsEveryBodyTheEngineCannotStoreAsADocument(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	repository.SetPayloadDocsForTest(s, true) // the payload document is what an engine may refuse
	deep := `{"type":"user.created","data":` + strings.Repeat(`{"a":`, 300) + `1` + strings.Repeat(`}`, 300) + `}`
	ev, created, err := s.Events().Record(ctx, newEvent("msg_deep", deep))
	if err != nil || !created {
		t.Fatalf("Record of a deeply nested body: %v", err)
	}
	got, err := s.Events().Get(ctx, ev.ID)
	if err != nil || string(got.RawBody) != deep {
		t.Errorf("raw body not kept: %v", err)
	}
}

func TestEventsGet_UnknownIsNotFound(t *testing.T) {
	s := mongotest.Open(t)
	for _, id := range []string{"nope", bson.NewObjectID().Hex()} {
		if _, err := s.Events().Get(context.Background(), id); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func TestStore_EngineDownIsUnavailable(t *testing.T) {
	if repotest.UsesMongoDB() {
		t.Skip("stops the embedded engine")
	}
	engine := repotest.StartEngine(t)
	s := repotest.NewStoreAt(t, engine.URI(), repository.Options{ServerSelectionTimeout: 500 * time.Millisecond})
	engine.Stop()
	if err := s.Ping(context.Background()); !errors.Is(err, models.ErrUnavailable) {
		t.Errorf("Ping with the engine down = %v, want ErrUnavailable", err)
	}
	engine.Start()
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping after restart = %v", err)
	}
}

func TestEventsRecord_StoresThePayloadAsADocumentAndTheBodyExactly(t *testing.T) {
	ctx := context.Background()
	for _, docs := range []bool{true, false} {
		s := mongotest.Open(t)
		repository.SetPayloadDocsForTest(s, docs) // as on MongoDB, and as on FerretDB
		body := `{"type":"user.created","data":{"id":"user_1","public_metadata":{"a.b":{"$c":1}}}}`
		ev, _, err := s.Events().Record(ctx, newEvent("msg_p", body))
		if err != nil {
			t.Fatal(err)
		}
		var raw bson.Raw
		oid, _ := bson.ObjectIDFromHex(ev.ID)
		if err := s.Database().Collection(repository.EventsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: oid}}).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		if got, _ := raw.Lookup("rawBody").StringValueOK(); got != body {
			t.Errorf("rawBody = %v, want the body as a string", raw.Lookup("rawBody"))
		}
		_, err = raw.LookupErr("payload")
		hasPayload := err == nil
		escaped, _ := raw.Lookup("payload", "data", "public_metadata", "a%2Eb", "%24c").AsInt64OK()
		switch {
		case docs && (!hasPayload || escaped != 1):
			t.Errorf("payload documents on: payload = %v, want the body with escaped keys", raw.Lookup("payload"))
		case !docs && hasPayload:
			t.Errorf("payload documents off: payload stored: %v", raw.Lookup("payload"))
		}
	}
}

func TestEventsRecord_KeepsANonUTF8BodyAsBinary(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	body := "{\"type\":\"user.created\",\"x\":\"\xff\xfe\"}"
	ev, _, err := s.Events().Record(ctx, newEvent("msg_bin", body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Events().Get(ctx, ev.ID)
	if err != nil || string(got.RawBody) != body {
		t.Errorf("raw body = %q, %v; want %q", got.RawBody, err, body)
	}
}
