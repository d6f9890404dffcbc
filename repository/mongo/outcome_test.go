package mongo_test

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
	"github.com/usersync/usersync/repository/storetest"
)

// TestStats_AnEarlierVersionsDeletedUserReadsAndCountsAsDeleted writes,
// as an earlier version did, three processed events of a deleted user
// with the outcome deleted_user: two counted in a counter document under
// that name, one still flagged uncounted (not yet folded); an activity
// bucket with a deleted_user count; and a deleted organization's event.
// Every event reads deleted, Stats counts the five under deleted (before
// and after its fold) and nothing under deleted_user, retention takes the
// old ones off the count that counted them, and the bucket reads one
// deleted count.
func TestStats_AnEarlierVersionsDeletedUserReadsAndCountsAsDeleted(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	db := s.Database()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	event := func(eventID, typ, userID, objectID, outcome string, processedAt time.Time, flagged bool) bson.D {
		d := bson.D{
			{Key: "_id", Value: bson.NewObjectID()}, {Key: "eventId", Value: eventID},
			{Key: "type", Value: typ}, {Key: "eventType", Value: "updated"},
			{Key: "rawBody", Value: "{}"}, {Key: "source", Value: "clerk"}, {Key: "signature", Value: ""},
			{Key: "status", Value: "processed"}, {Key: "outcome", Value: outcome},
			{Key: "receivedAt", Value: processedAt}, {Key: "processedAt", Value: processedAt}, {Key: "attempts", Value: 1},
		}
		if userID != "" {
			d = append(d, bson.E{Key: "userId", Value: userID})
		}
		if objectID != "" {
			d = append(d, bson.E{Key: "objectId", Value: objectID})
		}
		if flagged {
			d = append(d, bson.E{Key: "uncounted", Value: outcome})
		}
		return d
	}
	if _, err := db.Collection(mongo.EventsCollection).InsertMany(ctx, []any{
		event("msg_u1", "user.updated", "user_1", "", "deleted_user", old, false),
		event("msg_u2", "user.updated", "user_1", "", "deleted_user", old, false),
		event("msg_u3", "user.updated", "user_1", "", "deleted_user", now, true),
		event("msg_o1", "organization.updated", "", "org_1", "deleted", now, true),
	}); err != nil {
		t.Fatal(err)
	}
	minute := now.Truncate(time.Minute)
	if _, err := db.Collection(mongo.CountersCollection).InsertOne(ctx, bson.D{
		{Key: "_id", Value: "outcome:deleted_user:03"}, {Key: "n", Value: int64(2)},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection(mongo.ActivityCollection).InsertOne(ctx, bson.D{
		{Key: "_id", Value: fmt.Sprintf("m:%012d", minute.Unix())}, {Key: "start", Value: minute},
		{Key: "n", Value: bson.D{{Key: "deleted_user", Value: int64(2)}, {Key: "deleted", Value: int64(1)}}},
	}); err != nil {
		t.Fatal(err)
	}
	ev, _, err := s.Events().Record(ctx, newEvent("msg_u4", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeDeleted, now); err != nil {
		t.Fatal(err)
	}

	if got, err := s.Events().Get(ctx, "msg_o1"); err != nil || got.Outcome != models.OutcomeDeleted {
		t.Errorf("event msg_o1: outcome %q, %v; want deleted", got.Outcome, err)
	}
	storetest.CheckReadAsDeleted(t, s, "user_1", "msg_u1", "msg_u2", "msg_u3", "msg_u4")
	want := func(step string, deleted int64) {
		t.Helper()
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byOutcome := map[models.Outcome]int64{models.OutcomeApplied: 0, models.OutcomeStale: 0, models.OutcomeDeleted: deleted, models.OutcomeIgnored: 0,
			models.OutcomeActivity: 0}
		if !maps.Equal(st.ByOutcome, byOutcome) || st.ByStatus[models.StatusProcessed] != deleted {
			t.Errorf("%s: stats = %+v; want %d processed, by outcome %v", step, st, deleted, byOutcome)
		}
	}
	want("first stats", 5)
	want("after the fold", 5)
	n, err := db.Collection(mongo.EventsCollection).CountDocuments(ctx, bson.D{{Key: "uncounted", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil || n != 0 {
		t.Errorf("%d events still flagged after Stats folded, %v; want 0", n, err)
	}
	if n, err := s.Events().DeleteProcessedBefore(ctx, now.Add(-24*time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want the 2 old events", n, err)
	}
	want("after retention", 3)

	buckets, err := s.Activity().Buckets(ctx, models.ActivityMinute, minute, minute.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(buckets) != 1 || !maps.Equal(buckets[0].Counts, map[string]int64{models.ActivityDeleted: 3}) {
		t.Errorf("activity = %+v; want one bucket, deleted 3", buckets)
	}
}
