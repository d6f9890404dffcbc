package mongo_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// TestMongoDB_EveryQueryUsesAnIndexAndNoSortInMemory asks the server to
// explain each query of README.md's query → index table and fails when
// its winning plan scans the collection (COLLSCAN) or sorts in memory
// (SORT). It needs a MongoDB at MONGODB_URI: the embedded engine neither
// explains nor uses indexes that way (see sqliteindex_test.go for it).
func TestMongoDB_EveryQueryUsesAnIndexAndNoSortInMemory(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	// Some documents, so that every collection and index exists.
	if _, err := s.Users().Apply(ctx, change("user_1", "msg_1", time.Second, "a@example.com"), now); err != nil {
		t.Fatal(err)
	}
	ev, _, err := s.Events().Record(ctx, newEvent("msg_1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, now); err != nil {
		t.Fatal(err)
	}
	oid, _ := bson.ObjectIDFromHex(ev.ID)
	cursor := fmt.Sprintf("%d_%s", now.UnixMilli(), ev.ID)

	type query struct {
		name string
		cmd  bson.D // the command to explain
	}
	find := func(coll string, filter, sort bson.D) bson.D {
		c := bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}, {Key: "limit", Value: 51}}
		if sort != nil {
			c = append(c, bson.E{Key: "sort", Value: sort})
		}
		return c
	}
	count := func(coll string, filter bson.D) bson.D {
		return bson.D{{Key: "count", Value: coll}, {Key: "query", Value: filter}}
	}
	update := func(coll string, filter bson.D) bson.D {
		return bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: filter}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}},
		}}}}
	}
	users, events, counters := repository.UsersCollection, repository.EventsCollection, repository.CountersCollection
	byID := func(id any) bson.D { return bson.D{{Key: "_id", Value: id}} }
	var qs []query
	for _, f := range []models.UserFilter{
		{Limit: 50}, {Limit: 50, After: oid.Hex()}, {Limit: 50, IncludeDeleted: true},
		{Limit: 50, Email: "a@example.com"}, {Limit: 50, Email: "a@example.com", IncludeDeleted: true},
	} {
		filter, sort, err := repository.UserListQuery(f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{fmt.Sprintf("users list %+v", f), find(users, filter, sort)})
	}
	for _, f := range []models.ChangeFilter{
		{Since: now.Add(-time.Hour), Until: now, Limit: 50},
		{Since: now.Add(-time.Hour), Until: now, Limit: 50, After: cursor},
	} {
		filter, _, err := repository.ChangesFilter(f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{fmt.Sprintf("change feed %+v", f), find(users, filter, repository.ChangesOrder)})
	}
	userID := repository.DocIDForTest("user_1")
	qs = append(qs,
		query{"user by _id (Get, Apply's state)", find(users, byID(userID), nil)},
		query{"Apply's conditional update", update(users, repository.UserWriteFilter(change("user_1", "msg_2", 2*time.Second, "a@example.com")))},
		query{"event by _id (Record's read, Get)", find(events, byID(oid), nil)},
		query{"event by eventId (Get)", find(events, bson.D{{Key: "eventId", Value: "msg_1"}}, nil)},
	)
	for _, f := range []models.EventFilter{
		{}, {Status: models.StatusProcessed}, {EventType: models.EventUpdated}, {UserID: "user_1"},
		{Status: models.StatusFailed, EventType: models.EventCreated},
		{UserID: "user_1", Status: models.StatusStored, EventType: models.EventDeleted},
		{Since: now.Add(-time.Hour), Until: now}, {Status: models.StatusProcessed, Since: now.Add(-time.Hour)},
		{After: cursor}, {UserID: "user_1", After: cursor},
	} {
		f.Limit = 50
		filter, err := repository.EventListFilter(f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{fmt.Sprintf("event log %+v", f), find(events, filter, repository.EventLogOrder)})
	}
	qs = append(qs,
		query{"stats: stored", count(events, bson.D{{Key: "status", Value: models.StatusStored}})},
		query{"stats: failed", count(events, bson.D{{Key: "status", Value: models.StatusFailed}})},
		query{"stats: gave up", count(events, bson.D{{Key: "status", Value: models.StatusFailed}, {Key: "retryAt", Value: nil}})},
		query{"stats: outcome counters", find(counters, repository.CountersFilter, nil)},
		query{"sweep: stuck stored events", find(events, repository.DueStoredFilter(now),
			bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}})},
		query{"sweep: failed events due", find(events, repository.DueFailedFilter(now), bson.D{{Key: "retryAt", Value: 1}})},
		query{"sweep: claim", update(events, append(byID(oid), repository.ClaimCond(0, now)...))},
		query{"retention: old processed events", find(events, repository.RetentionFilter(now), nil)},
		query{"retention: delete", bson.D{{Key: "delete", Value: events}, {Key: "deletes", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{oid}}}}, {Key: "status", Value: models.StatusProcessed}}},
			{Key: "limit", Value: 0},
		}}}}},
		query{"mark processed / failed", update(events, bson.D{{Key: "_id", Value: oid}, repository.NotProcessed})},
		query{"count an outcome", update(counters, byID("outcome:applied:00"))},
		query{"erasure: tombstones due", find(users, repository.EraseDueFilter(now), nil)},
		query{"erasure: a deleted user's events", find(events, repository.EventsToErase("user_1"), nil)},
		query{"reconcile: walk of active users", find(users, repository.WalkFilter(now), bson.D{{Key: "_id", Value: 1}})},
	)
	for _, q := range qs {
		var res bson.Raw
		err := s.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: q.cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res)
		if err != nil {
			t.Errorf("%s: explain: %v", q.name, err)
			continue
		}
		plan, err := res.LookupErr("queryPlanner", "winningPlan")
		if err != nil {
			t.Errorf("%s: no queryPlanner.winningPlan in %s", q.name, res)
			continue
		}
		stages := planStages(plan)
		for _, st := range stages {
			if st == "COLLSCAN" || st == "SORT" {
				t.Errorf("%s: plan %v has %s", q.name, stages, st)
			}
		}
		t.Logf("%s: %s", q.name, strings.Join(stages, " ← "))
	}
}

// planStages lists the stages of an explained plan, root first, through
// the classic engine's inputStage(s), the slot-based engine's queryPlan,
// and a sharded cluster's shards.
func planStages(v bson.RawValue) []string {
	var out []string
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		doc := v.Document()
		if st, ok := doc.Lookup("stage").StringValueOK(); ok {
			out = append(out, st)
		}
		elems, _ := doc.Elements()
		for _, e := range elems {
			switch e.Key() {
			case "inputStage", "inputStages", "queryPlan", "shards", "winningPlan", "thenStage", "elseStage", "outerStage", "innerStage":
				out = append(out, planStages(e.Value())...)
			}
		}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, e := range vals {
			out = append(out, planStages(e)...)
		}
	}
	return out
}

func TestPlanStages_ReadsClassicAndSlotBasedPlans(t *testing.T) {
	doc := func(s string) bson.RawValue {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			t.Fatal(err)
		}
		b, _ := bson.Marshal(bson.D{{Key: "p", Value: d}})
		return bson.Raw(b).Lookup("p")
	}
	for _, tc := range []struct{ name, plan, want string }{
		{"classic", `{"stage":"LIMIT","inputStage":{"stage":"FETCH","inputStage":{"stage":"IXSCAN","indexName":"status_1"}}}`, "LIMIT FETCH IXSCAN"},
		{"slot-based", `{"queryPlan":{"stage":"SORT","inputStage":{"stage":"COLLSCAN"}},"slotBasedPlan":{"stages":"[1] scan"}}`, "SORT COLLSCAN"},
		{"or", `{"stage":"SORT_MERGE","inputStages":[{"stage":"IXSCAN"},{"stage":"IXSCAN"}]}`, "SORT_MERGE IXSCAN IXSCAN"},
		{"sharded", `{"stage":"SHARD_MERGE","shards":[{"shardName":"a","winningPlan":{"stage":"COLLSCAN"}}]}`, "SHARD_MERGE COLLSCAN"},
	} {
		if got := strings.Join(planStages(doc(tc.plan)), " "); got != tc.want {
			t.Errorf("%s: stages %q, want %q", tc.name, got, tc.want)
		}
	}
}
