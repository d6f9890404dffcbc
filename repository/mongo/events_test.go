package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
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

func TestEventsRecord_StoresThePayloadAsADocumentAndTheBodyExactly(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	body := `{"type":"user.created","data":{"id":"user_1","public_metadata":{"a.b":{"$c":1}}}}`
	ev, _, err := s.Events().Record(ctx, newEvent("msg_p", body))
	if err != nil {
		t.Fatal(err)
	}
	var raw bson.Raw
	oid, _ := bson.ObjectIDFromHex(ev.ID)
	if err := s.Database().Collection(mongo.EventsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: oid}}).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if got, _ := raw.Lookup("rawBody").StringValueOK(); got != body {
		t.Errorf("rawBody = %v, want the body as a string", raw.Lookup("rawBody"))
	}
	if escaped, _ := raw.Lookup("payload", "data", "public_metadata", "a.b", "%24c").AsInt64OK(); escaped != 1 {
		t.Errorf("payload = %v, want the body with its $-prefixed key escaped", raw.Lookup("payload"))
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

// TestEventsRecord_OfConcurrentDeliveriesOneIsTheFirst records one new
// event from eight deliveries at once, again and again: exactly one is
// told it created the event (with findAndModify upserts, the DocumentDB
// engines told several, in most tries).
func TestEventsRecord_OfConcurrentDeliveriesOneIsTheFirst(t *testing.T) {
	s := mongotest.Open(t)
	for round := range 20 {
		ev := newEvent(fmt.Sprintf("msg_first_%d", round), `{}`)
		var created atomic.Int64
		var wg stdsync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, c, err := s.Events().Record(context.Background(), ev)
				if err != nil {
					t.Error(err)
				}
				if c {
					created.Add(1)
				}
			})
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Errorf("round %d: %d deliveries were told they stored the event first, want 1", round, n)
		}
	}
}
