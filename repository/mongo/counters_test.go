package mongo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// TestStats_ProcessedEventsAreCountedByCountersNotByReadingThem checks
// that stats read processed counts from the counters, which move with
// the writes that make an event processed and with retention, rather
// than from the events: events removed behind the store's back stay
// counted, and retention's deletes are subtracted.
func TestStats_ProcessedEventsAreCountedByCountersNotByReadingThem(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	var seeded []models.Event
	for i := range 4 {
		outcome := models.OutcomeApplied
		if i == 3 {
			outcome = models.OutcomeStale
		}
		ev := newEvent(fmt.Sprintf("msg_seed_%d", i), `{}`)
		ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts = models.StatusProcessed, outcome, &old, 1
		seeded = append(seeded, ev)
	}
	if err := s.SeedEvents(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range []models.Outcome{models.OutcomeApplied, models.OutcomeDeleted} {
		ev, _, err := s.Events().Record(ctx, newEvent(fmt.Sprintf("msg_live_%d", i), `{}`))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second mark is a concurrent delivery's: not counted
			if err := s.Events().MarkProcessed(ctx, ev.ID, outcome, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, _, err := s.Events().Record(ctx, newEvent("msg_stored", `{}`)); err != nil {
		t.Fatal(err)
	}
	want := func(step string, processed, applied, stale, deleted int64) {
		t.Helper()
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ByStatus[models.StatusProcessed] != processed || st.ByOutcome[models.OutcomeApplied] != applied ||
			st.ByOutcome[models.OutcomeStale] != stale || st.ByOutcome[models.OutcomeDeleted] != deleted ||
			st.ByStatus[models.StatusStored] != 1 {
			t.Errorf("%s: stats = %+v; want %d processed (%d applied, %d stale, %d deleted), 1 stored",
				step, st, processed, applied, stale, deleted)
		}
	}
	want("seeded and processed", 6, 4, 1, 1)

	// Retention deletes the four old ones, through the processedAt index.
	for {
		n, err := s.Events().DeleteProcessedBefore(ctx, now.Add(-24*time.Hour), 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	want("after retention", 2, 1, 0, 1)

	// Events removed without the store: still counted, so nothing reads them.
	if _, err := s.Database().Collection(mongo.EventsCollection).DeleteMany(ctx,
		bson.D{{Key: "status", Value: models.StatusProcessed}}); err != nil {
		t.Fatal(err)
	}
	want("events gone behind the store's back", 2, 1, 0, 1)
}

// TestStats_AFoldStoppedHalfWayCountsItsBatchOnce leaves a fold as a crash
// would, its batch counted in the fold counter and its events still
// flagged: Stats counts each event once, before and after it finishes the
// fold.
func TestStats_AFoldStoppedHalfWayCountsItsBatchOnce(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	var ids []bson.ObjectID
	for i := range 3 {
		ev, _, err := s.Events().Record(ctx, newEvent(fmt.Sprintf("msg_fold_%d", i), `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
			t.Fatal(err)
		}
		oid, _ := bson.ObjectIDFromHex(ev.ID)
		ids = append(ids, oid)
	}
	// Two of the three counted by a fold that stopped before unflagging them.
	if _, err := s.Database().Collection(mongo.CountersCollection).InsertOne(ctx, bson.D{
		{Key: "_id", Value: "outcome:applied:fold"}, {Key: "n", Value: int64(2)}, {Key: "pending", Value: ids[:2]},
	}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"first", "second"} {
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ByOutcome[models.OutcomeApplied] != 3 || st.ByStatus[models.StatusProcessed] != 3 {
			t.Errorf("%s Stats = %+v; want 3 applied", step, st)
		}
	}
	n, err := s.Database().Collection(mongo.EventsCollection).CountDocuments(ctx, bson.D{{Key: "uncounted", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil || n != 0 {
		t.Errorf("%d events still flagged after Stats folded, %v; want 0", n, err)
	}
}
