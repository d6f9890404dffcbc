package mongo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
	"github.com/usersync/usersync/sync"
)

// An event stored for a deleted user while a pass unmarks the user's
// tombstone (after the pass listed the user's events) keeps it marked, so
// the next pass erases that event.
func TestErasure_AnEventStoredDuringAPassKeepsTheUserDue(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	marked := func(userID string) bool {
		t.Helper()
		n, err := s.Database().Collection(mongo.UsersCollection).CountDocuments(ctx, bson.D{
			{Key: "userId", Value: userID}, {Key: "eraseAfter", Value: bson.D{{Key: "$exists", Value: true}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	for _, tc := range []struct {
		user      string
		lateEvent bool
	}{{"user_quiet", false}, {"user_late", true}} {
		del := deletion(tc.user, "msg_del_"+tc.user, time.Second)
		if _, err := s.Users().Apply(ctx, del, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !marked(tc.user) {
			t.Fatalf("%s: a new tombstone is not marked for erasure", tc.user)
		}
		if tc.lateEvent {
			if _, _, err := s.Events().Record(ctx, models.Event{
				EventID: "msg_late", Type: models.TypeUserUpdated, EventType: models.EventUpdated, UserID: tc.user,
				RawBody: []byte(`{"type":"user.updated"}`), Source: models.SourceClerk, ReceivedAt: time.Now().UTC(),
				Status: models.StatusStored,
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := mongo.UnmarkErasureForTest(ctx, s, tc.user, del.SourceTime); err != nil {
			t.Fatal(err)
		}
		if got := marked(tc.user); got != tc.lateEvent {
			t.Errorf("%s: marked after the pass = %v, want %v", tc.user, got, tc.lateEvent)
		}
	}
}

// TestErasure_AnEventAfterTheUserWasErasedIsErasedAtOnce delivers events
// for a user an admin has erased: one the store applies (deleted)
// and one it gives up on (its payload cannot be applied). Both are erased
// in the delivery itself, and no collection holds the user's email after.
func TestErasure_AnEventAfterTheUserWasErasedIsErasedAtOnce(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	svc := sync.New(s.Events(), s, nil)
	const t0 = int64(1_760_000_000_000)
	const email = "erased.person@example.com"
	deliver := func(id string, body []byte) sync.Result {
		t.Helper()
		ce, err := models.DecodeEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := svc.Ingest(ctx, sync.Delivery{EventID: id, Signature: "v1,x", Body: body, Event: ce})
		return res
	}
	deliver("msg_created", clerkBody(t, "user.created", "user_gone", t0, email))
	del := models.UserChange{UserID: "user_gone", EventID: "msg_deleted", SourceTime: time.UnixMilli(t0 + 1000), Deleted: true}
	if _, err := s.Users().Apply(ctx, del, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EraseUser(ctx, "user_gone", time.Now()); err != nil {
		t.Fatal(err)
	}
	late := deliver("msg_late", clerkBody(t, "user.updated", "user_gone", t0+2000, email))
	if late.Status != models.StatusProcessed || late.Outcome != models.OutcomeDeleted {
		t.Fatalf("late event = %+v; want processed, deleted", late)
	}
	invalid := clerkBody(t, "user.updated", "user_gone", t0+3000, email)
	invalid = []byte(strings.Replace(string(invalid), `"updated_at":`, `"updated_at":"x","was":`, 1))
	if res := deliver("msg_invalid", invalid); res.Status != models.StatusFailed {
		t.Fatalf("invalid event = %+v; want failed", res)
	}
	for _, id := range []string{"msg_late", "msg_invalid"} {
		ev, err := s.Events().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ErasedAt == nil || len(ev.RawBody) != 0 {
			t.Errorf("%s = erased at %v, body %q; want it erased", id, ev.ErasedAt, ev.RawBody)
		}
	}
	for _, coll := range []string{mongo.UsersCollection, mongo.EventsCollection, mongo.CountersCollection} {
		cur, err := s.Database().Collection(coll).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			if text := cur.Current.String(); strings.Contains(strings.ToLower(text), email) {
				t.Errorf("%s holds the erased user's email: %s", coll, text)
			}
		}
		cur.Close(ctx)
	}
}
