package mongo_test

import (
	"context"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
)

// An event stored for a deleted user while a pass unmarks the user's
// tombstone (after the pass listed the user's events) keeps it marked, so
// the next pass erases that event.
func TestErasure_AnEventStoredDuringAPassKeepsTheUserDue(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	marked := func(userID string) bool {
		t.Helper()
		n, err := s.Database().Collection(repository.UsersCollection).CountDocuments(ctx, bson.D{
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
		if err := repository.UnmarkErasureForTest(ctx, s, tc.user, del.SourceTime); err != nil {
			t.Fatal(err)
		}
		if got := marked(tc.user); got != tc.lateEvent {
			t.Errorf("%s: marked after the pass = %v, want %v", tc.user, got, tc.lateEvent)
		}
	}
}
