package mongo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// TestMongoDB_EveryQueryUsesAnIndexAndNoSortInMemory asks the server at
// MONGODB_URI to explain each query of the query → index table
// (docs/mongodb.md) and judges the plan with checkPlan: on MongoDB no
// query may read a whole collection or sort in memory; on a DocumentDB
// engine, the queries of documentDBExceptions may, and are reported. An
// update or delete the engine refuses to explain (DocumentDB:
// NotImplemented) is reported, not failed.
// sessionChange is a session event of userID at now embedding a state.
func sessionChange(userID, eventID string, now time.Time) models.SessionChange {
	st := change(userID, eventID, 3*time.Second, "")
	return models.SessionChange{UserID: userID, EventID: eventID, ActiveAt: now, User: &st}
}

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
	if err := s.Activity().Add(ctx, now, models.ActivityReceived, 1); err != nil {
		t.Fatal(err)
	}
	run, err := s.Runs().Record(ctx, models.ReconcileSummary{Kind: "reconcile", Trigger: "command", StartedAt: now})
	if err != nil {
		t.Fatal(err)
	}

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
	update := func(coll string, filter bson.D) bson.D {
		return bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: filter}, {Key: "u", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}}},
		}}}}
	}
	users, events, counters := mongo.UsersCollection, mongo.EventsCollection, mongo.CountersCollection
	activity, runs := s.CollectionName(mongo.ActivityCollection), s.CollectionName(mongo.RunsCollection)
	byID := func(id any) bson.D { return bson.D{{Key: "_id", Value: id}} }
	var qs []query
	// A page of users without an email walks the _id space in windows
	// (pages.go): what is sent is a window's query.
	for _, f := range []struct {
		name string
		f    models.UserFilter
	}{
		{"users list: active, a window of _id", models.UserFilter{Limit: 50}},
		{"users list: active, after a cursor, a window of _id", models.UserFilter{Limit: 50, After: oid.Hex()}},
		{"users list: all, a window of _id", models.UserFilter{Limit: 50, IncludeDeleted: true}},
		{"users list: active, by email", models.UserFilter{Limit: 50, Email: "a@example.com"}},
		{"users list: all, by email", models.UserFilter{Limit: 50, Email: "a@example.com", IncludeDeleted: true}},
	} {
		filter, sort, err := mongo.UserListQuery(f.f)
		if err != nil {
			t.Fatal(err)
		}
		if f.f.Email == "" {
			if filter, err = mongo.UserWindowFilter(f.f); err != nil {
				t.Fatal(err)
			}
		}
		qs = append(qs, query{f.name, find(users, filter, sort)})
	}
	for _, f := range []struct {
		name string
		f    models.ChangeFilter
	}{
		{"change feed: window", models.ChangeFilter{Since: now.Add(-time.Hour), Until: now, Limit: 50}},
		{"change feed: window, after a cursor", models.ChangeFilter{Since: now.Add(-time.Hour), Until: now, Limit: 50, After: cursor}},
	} {
		filter, _, err := mongo.ChangesFilter(f.f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{f.name, find(users, filter, mongo.ChangesOrder)})
	}
	userID := mongo.DocIDForTest("user_1")
	sessionEvents := func(userIDs ...string) bson.D {
		filter, index := mongo.SessionEventsFilter(userIDs...)
		return append(find(events, filter, nil), bson.E{Key: "hint", Value: index})
	}
	qs = append(qs,
		query{"user by _id (Get, Apply's state)", find(users, byID(userID), nil)},
		query{"Apply's conditional update", update(users, mongo.UserWriteFilter(change("user_1", "msg_2", 2*time.Second, "a@example.com")))},
		query{"a session's activity write", update(users, mongo.ActivityWriteFilter("user_1", now))},
		query{"a session's user state write", update(users, mongo.SessionWriteFilter(sessionChange("user_1", "msg_3", now)))},
		query{"a batch's session users", find(users, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{userID}}}}}, nil)},
		query{"a new user's session events", sessionEvents("user_1")},
		query{"a batch's new users' session events", sessionEvents("user_1", "user_2")},
		query{"event by _id (Record's read, Get)", find(events, byID(oid), nil)},
		query{"event by eventId (Get)", find(events, bson.D{{Key: "eventId", Value: "msg_1"}}, nil)},
	)
	for _, f := range []struct {
		name string
		f    models.EventFilter
	}{
		{"event log", models.EventFilter{}},
		{"event log: status", models.EventFilter{Status: models.StatusProcessed}},
		{"event log: eventType", models.EventFilter{EventType: models.EventUpdated}},
		{"event log: userId", models.EventFilter{UserID: "user_1"}},
		{"event log: status and eventType", models.EventFilter{Status: models.StatusFailed, EventType: models.EventCreated}},
		{"event log: userId, status and eventType", models.EventFilter{UserID: "user_1", Status: models.StatusStored, EventType: models.EventDeleted}},
		{"event log: window", models.EventFilter{Since: now.Add(-time.Hour), Until: now}},
		{"event log: status, since", models.EventFilter{Status: models.StatusProcessed, Since: now.Add(-time.Hour)}},
		{"event log: after a cursor", models.EventFilter{After: cursor}},
		{"event log: userId, after a cursor", models.EventFilter{UserID: "user_1", After: cursor}},
		{"event log: kind", models.EventFilter{Kind: models.KindMembership}},
		{"event log: kind and eventType", models.EventFilter{Kind: models.KindOrganization, EventType: models.EventDeleted}},
		{"event log: status and kind", models.EventFilter{Status: models.StatusFailed, Kind: models.KindMembership}},
		{"event log: objectId", models.EventFilter{ObjectID: "orgmem_1"}},
		{"event log: objectId, status, after a cursor", models.EventFilter{ObjectID: "org_1", Status: models.StatusStored, After: cursor}},
	} {
		f.f.Limit = 50
		filter, err := mongo.EventListFilter(f.f)
		if err != nil {
			t.Fatal(err)
		}
		if mongo.LogWindowed(f.f) {
			// Walked down from the cursor (or now) in windows of
			// receivedAt (events.go): what is sent is a window's query.
			f.name += ", a window of receivedAt"
			filter = mongo.EventWindowFilter(f.f, now)
		}
		qs = append(qs, query{f.name, find(events, filter, mongo.EventLogOrder)})
	}
	qs = append(qs,
		// The $match that the stats aggregation begins with.
		query{"stats: stored and failed events", find(events, mongo.UnprocessedFilter, nil)},
		query{"stats: discarded events", find(events, mongo.DiscardedFilter, nil)},
		query{"stats: outcome counters", find(counters, mongo.CountersFilter, nil)},
		query{"sweep: stuck stored events", find(events, mongo.DueStoredFilter(now),
			bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}})},
		query{"sweep: failed events due", find(events, mongo.DueFailedFilter(now), bson.D{{Key: "retryAt", Value: 1}})},
		query{"sweep: claim", update(events, append(byID(oid), mongo.ClaimCond(0, now)...))},
		query{"retention: old processed events", find(events, mongo.RetentionFilter(now), nil)},
		query{"retention: delete", bson.D{{Key: "delete", Value: events}, {Key: "deletes", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{oid}}}}, {Key: "status", Value: models.StatusProcessed}}},
			{Key: "limit", Value: 0},
		}}}}},
		query{"mark processed / failed", update(events, bson.D{{Key: "_id", Value: oid}, mongo.NotProcessed})},
		query{"count an outcome", update(counters, byID("outcome:applied:00"))},
		query{"erasure: tombstones due", find(users, mongo.EraseDueFilter(now), nil)},
		query{"erasure: a deleted user's events", find(events, mongo.EventsToErase("user_1"), nil)},
		query{"erasure: a deleted membership's events", find(events, mongo.MembershipEventsToErase("orgmem_1"), nil)},
		query{"reconcile: walk of active users", find(users, mongo.WalkFilter(now), bson.D{{Key: "_id", Value: 1}})},
		query{"failures: the newest failed events", find(events, mongo.FailedFilter, mongo.EventLogOrder)},
		query{"activity: add to a bucket", update(activity, byID("m:"+fmt.Sprintf("%012d", now.Unix()/60*60)))},
		query{"activity: a range of buckets", find(activity,
			mongo.ActivityRange("m:", now.Add(-24*time.Hour), now), mongo.ActivityOrder)},
		query{"activity: old buckets", find(activity, mongo.ActivityPrune("m:", now.Add(-48*time.Hour)), nil)},
		query{"reconcile runs: latest first", find(runs, bson.D{}, mongo.RunsOrder)},
		query{"reconcile runs: older than the kept ones", find(runs, mongo.RunsPrune(run.ID), nil)},
	)
	orgs, members := s.CollectionName(mongo.OrganizationsCollection), s.CollectionName(mongo.MembershipsCollection)
	for _, f := range []struct {
		name string
		f    models.OrganizationFilter
	}{
		{"organizations list: active", models.OrganizationFilter{Limit: 50}},
		{"organizations list: all, after a cursor", models.OrganizationFilter{Limit: 50, IncludeDeleted: true, After: oid.Hex()}},
		{"organizations list: by slug", models.OrganizationFilter{Limit: 50, Slug: "acme"}},
	} {
		filter, sort, err := mongo.OrgListQuery(f.f)
		if err != nil {
			t.Fatal(err)
		}
		if f.f.Slug == "" {
			// walked in windows of _id, as users are
			if filter, err = mongo.OrgWindowFilter(f.f); err != nil {
				t.Fatal(err)
			}
			f.name += ", a window of _id"
		}
		qs = append(qs, query{f.name, find(orgs, filter, sort)})
	}
	for _, f := range []struct {
		name string
		f    models.MembershipFilter
	}{
		{"memberships of an organization: active", models.MembershipFilter{OrgID: "org_1"}},
		{"memberships of an organization: all, after a cursor", models.MembershipFilter{OrgID: "org_1", IncludeDeleted: true}},
		{"memberships of a user: active", models.MembershipFilter{UserID: "user_1"}},
	} {
		// walked in windows of _id, as users are
		window, err := mongo.MemberWindowFilter(f.f, oid.Hex())
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{f.name + ", a window of _id", find(members, window, bson.D{{Key: "_id", Value: 1}})})
	}
	feed, _, err := mongo.ChangesFilter(models.ChangeFilter{Since: now.Add(-time.Hour), Until: now, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	member := models.MembershipChange{MembershipID: "orgmem_1", OrgID: "org_1", UserID: "user_1", EventID: "msg_2", SourceTime: now}
	invite := models.InvitationChange{InvitationID: "orginv_1", OrgID: "org_1", EventID: "msg_2", SourceTime: now,
		Status: models.InvitationPending, Metadata: json.RawMessage(`{}`)}
	if _, err := s.Invitations().Apply(ctx, invite, now); err != nil {
		t.Fatal(err)
	}
	invs := s.CollectionName(mongo.InvitationsCollection)
	org := models.OrganizationChange{OrgID: "org_1", EventID: "msg_2", SourceTime: now}
	in := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{userID, mongo.DocIDForTest("user_2")}}}}}
	qs = append(qs,
		query{"organization change feed", find(orgs, feed, mongo.ChangesOrder)},
		query{"membership change feed", find(members, feed, mongo.ChangesOrder)},
		query{"reconcile: walk of active organizations", find(orgs, mongo.WalkFilter(now), bson.D{{Key: "_id", Value: 1}})},
		query{"reconcile: walk of active memberships", find(members, mongo.WalkFilter(now), bson.D{{Key: "_id", Value: 1}})},
		query{"erasure: membership tombstones due", find(members, mongo.EraseDueFilter(now), nil)},
		query{"organization by _id (Get, Apply's state)", find(orgs, byID(mongo.DocIDForTest("org_1")), nil)},
		query{"Organizations.Apply's conditional update", update(orgs, mongo.OrgWriteFilter(org))},
		query{"membership by _id (Get, Apply's state)", find(members, byID(mongo.DocIDForTest("orgmem_1")), nil)},
		query{"Memberships.Apply's conditional update", update(members, mongo.MembershipWriteFilter(member))},
		query{"the older holder of a pair", update(members, mongo.TakePairFilter(member))},
		query{"cascade: an organization's memberships", update(members, mongo.CascadeFilter(bson.E{Key: "organizationId", Value: "org_1"}))},
		query{"cascade: a user's memberships", update(members, mongo.CascadeFilter(bson.E{Key: "userId", Value: "user_1"}))},
		query{"members of a page (join)", find(users, in, nil)},
		query{"invitations of an organization", find(invs, mongo.InvitationListFilter(models.InvitationFilter{OrgID: "org_1"}, "orginv_0"), mongo.InvitationOrder)},
		query{"invitations of an organization: one status", find(invs,
			mongo.InvitationListFilter(models.InvitationFilter{OrgID: "org_1", Status: models.InvitationPending}, ""), mongo.InvitationOrder)},
		query{"invitation by _id (Get, Apply's state)", find(invs, byID(mongo.DocIDForTest("orginv_1")), nil)},
		query{"Invitations.Apply's conditional update", update(invs, mongo.InvitationWriteFilter(invite))},
		query{"cascade: an organization's invitations", update(invs, mongo.InvitationCascadeFilter("org_1"))},
		query{"invitation change feed", find(invs, feed, mongo.ChangesOrder)},
		query{"erasure: invitations due", find(invs, mongo.EraseDueFilter(now), nil)},
		query{"organizations of a page (join)", find(orgs, in, nil)},
	)
	// Clerk Billing (billing.go): a subscription, an item and an attempt,
	// so that the collections and indexes exist.
	payer := models.Payer{Kind: models.KindUser, ID: "user_1"}
	item := models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{ItemID: "csub_item_1", Payer: payer,
		Status: models.ItemActive, Plan: models.BillingPlan{ID: "cplan_1", Slug: "pro"}, SourceUpdatedAt: now, LastEventID: "msg_3"}}
	attempt := models.PaymentAttemptChange{AttemptID: "pa_1", PaymentID: "cpa_1", EventID: "msg_4", SourceTime: now, Status: "paid", Payer: payer}
	for _, ch := range []models.Change{
		models.SubscriptionChange{SubscriptionID: "csub_1", EventID: "msg_3", SourceTime: now, Status: "active", Payer: payer,
			Items: []models.SubscriptionItemChange{item}},
		attempt,
	} {
		userID, objectID := ch.IDs()
		ev := models.Event{EventID: ch.Version().EventID, Type: "subscription.updated", EventType: models.EventUpdated, UserID: userID,
			ObjectID: objectID, RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: now, Status: models.StatusStored}
		if _, err := s.Deliver(ctx, ev, ch, now); err != nil {
			t.Fatal(err)
		}
	}
	subs, items := s.CollectionName(mongo.SubscriptionsCollection), s.CollectionName(mongo.SubscriptionItemsCollection)
	attempts, plans := s.CollectionName(mongo.PaymentAttemptsCollection), s.CollectionName(mongo.BillingPlansCollection)
	itemsFilter, itemsSort := mongo.ItemsQuery(payer)
	attemptCursor := fmt.Sprintf("%d_%s", now.UnixMilli(), mongo.DocIDForTest("pa_1").Hex())
	qs = append(qs,
		query{"billing: subscription by _id (Subscription, the write's state)", find(subs, byID(mongo.DocIDForTest("csub_1")), nil)},
		query{"billing: an object's conditional upsert", update(subs, mongo.BillingWriteFilter("csub_1", attempt.Version()))},
		query{"billing: a payer's items (the plan, Items)", find(items, itemsFilter, itemsSort)},
		query{"billing: a payer's plan by _id (Plan, its compare-and-swap)", find(plans, byID(mongo.DocIDForTest("user/user_1")), nil)},
	)
	// The plans' change feed (PlanChanges) walks updatedAt in windows as
	// the users' feed does (pages.go): what is sent is a window's query.
	planCursor := fmt.Sprintf("%d_%s", now.UnixMilli(), mongo.DocIDForTest("user/user_1").Hex())
	for _, f := range []struct {
		name string
		f    models.ChangeFilter
	}{
		{"billing: the plans' change feed, a window", models.ChangeFilter{Since: now.Add(-time.Hour), Until: now, Limit: 50}},
		{"billing: the plans' change feed, a window after a cursor", models.ChangeFilter{Since: now.Add(-time.Hour), Until: now, Limit: 50, After: planCursor}},
	} {
		filter, _, err := mongo.ChangesFilter(f.f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{f.name, find(plans, filter, mongo.ChangesOrder)})
	}
	for _, f := range []struct {
		name string
		f    models.PaymentAttemptFilter
	}{
		{"billing: a payment's attempts", models.PaymentAttemptFilter{PaymentID: "cpa_1"}},
		{"billing: a payer's attempts, after a cursor", models.PaymentAttemptFilter{Payer: &payer, After: attemptCursor}},
		{"billing: every attempt", models.PaymentAttemptFilter{}},
		{"billing: every attempt, after a cursor", models.PaymentAttemptFilter{After: attemptCursor}},
	} {
		filter, err := mongo.AttemptsFilter(f.f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{f.name, find(attempts, filter, mongo.AttemptOrder)})
	}
	subCursor := fmt.Sprintf("%d_%s", now.UnixMilli(), mongo.DocIDForTest("csub_1").Hex())
	for _, f := range []struct {
		name string
		f    models.SubscriptionFilter
	}{
		{"billing: a payer's subscriptions", models.SubscriptionFilter{Payer: &payer}},
		{"billing: a payer's subscriptions in a status, after a cursor", models.SubscriptionFilter{Payer: &payer, Status: "active", After: subCursor}},
		{"billing: subscriptions in a status", models.SubscriptionFilter{Status: "active"}},
		{"billing: subscriptions in a status, after a cursor", models.SubscriptionFilter{Status: "past_due", After: subCursor}},
		{"billing: every subscription", models.SubscriptionFilter{}},
		{"billing: every subscription, after a cursor", models.SubscriptionFilter{After: subCursor}},
	} {
		filter, err := mongo.SubsFilter(f.f, now)
		if err != nil {
			t.Fatal(err)
		}
		if mongo.SubsWindowed(f.f) {
			// Walked down from the cursor (or now) in windows of
			// sourceUpdatedAt (billing.go): what is sent is a window's query.
			f.name += ", a window of sourceUpdatedAt"
		}
		qs = append(qs, query{f.name, find(subs, filter, mongo.SubOrder)})
	}
	// Outbound webhooks (outbound.go): an outbox entry, a delivery and
	// an attempt, so that the collections and indexes exist.
	o := s.Outbound()
	o.SetRecording(true)
	obChange := change("user_ob", "msg_ob", time.Second, "")
	obEvent := models.Event{EventID: "msg_ob", Type: models.TypeUserCreated, EventType: models.EventCreated, UserID: "user_ob",
		RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: now, Status: models.StatusStored}
	if _, err := s.Deliver(ctx, obEvent, obChange, now); err != nil {
		t.Fatal(err)
	}
	o.SetRecording(false)
	obPending := models.Pending{Kind: models.KindUser, ObjectID: "user_ob", UserID: "user_ob", Change: models.EventCreated,
		Version: obChange.Version(), At: now}
	obEndpoints(t, o, "ep_1")
	if err := o.Fanout(ctx, []models.Fanout{{Pending: obPending, Endpoints: []string{"ep_1"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	sent, err := o.Delivery(ctx, "ep_1", models.KindUser, "user_ob")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Settle(ctx, models.Settlement{Sent: sent, Result: sent, Attempt: models.Attempt{EndpointID: "ep_1", MessageID: sent.MessageID, At: now}}); err != nil {
		t.Fatal(err)
	}
	sendAttempts, _, err := o.Attempts(ctx, models.AttemptFilter{Limit: 1})
	if err != nil || len(sendAttempts) != 1 {
		t.Fatalf("attempts = %+v, %v", sendAttempts, err)
	}
	deliveries, sendAttemptsColl := s.CollectionName(mongo.DeliveriesCollection), s.CollectionName(mongo.DeliveryAttemptsCollection)
	qs = append(qs,
		// As Outbox reads it: hinted, in the index's order, not sorted.
		query{"outbound: the outbox", append(find(events, mongo.OutboxFilter, nil), bson.E{Key: "hint", Value: mongo.OutboxIndex})},
		query{"outbound: the outbox's oldest entry", find(events, mongo.OutboxFilter, mongo.OutboxOrder)},
		query{"outbound: take entries out of the outbox", update(events, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{oid}}}}})},
		query{"outbound: the deliveries a fan-out touches", find(deliveries, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{sent.EndpointID + "/user/user_ob"}}}}}, nil)},
		query{"outbound: a delivery's compare-and-set", update(deliveries, bson.D{{Key: "_id", Value: "ep_1/user/user_ob"}, {Key: "rev", Value: 1}})},
		query{"outbound: due deliveries", append(find(deliveries, mongo.DueDeliveriesFilter("ep_1", now), nil), bson.E{Key: "hint", Value: mongo.DueIndex})},
		query{"outbound: an endpoint's backlog (count)", find(deliveries, mongo.BacklogFilter("ep_1"), nil)},
		query{"outbound: an endpoint's oldest pending delivery", find(deliveries, mongo.BacklogFilter("ep_1"), mongo.BacklogOrder)},
		query{"outbound: an endpoint's deliveries, a page", find(deliveries,
			mongo.DeliveriesPageFilter(models.DeliveryFilter{EndpointID: "ep_1"}, "user/user_a"), bson.D{{Key: "_id", Value: 1}})},
		query{"outbound: an endpoint's failed deliveries, a page", find(deliveries,
			mongo.DeliveriesPageFilter(models.DeliveryFilter{EndpointID: "ep_1", Status: models.DeliveryFailed}, ""), bson.D{{Key: "_id", Value: 1}})},
		query{"outbound: requeue a window", find(deliveries, mongo.RequeueWindowFilter("ep_1", now.Add(-time.Hour)), nil)},
		query{"outbound: delete an endpoint's deliveries", find(deliveries, mongo.EndpointDeliveriesFilter("ep_1", ""), nil)},
		query{"outbound: erasure: a user's deliveries", find(deliveries, mongo.UserDeliveriesFilter("user_1"), nil)},
		query{"outbound: erasure: a membership's deliveries", find(deliveries, mongo.MembershipDeliveriesFilter("orgmem_1", "user_1"), nil)},
		query{"outbound: old attempts", find(sendAttemptsColl, mongo.SendAttemptsBeforeFilter(now), nil)},
	)
	for _, f := range []struct {
		name string
		f    models.AttemptFilter
	}{
		{"outbound: attempts of an endpoint", models.AttemptFilter{EndpointID: "ep_1"}},
		{"outbound: attempts of an endpoint, after a cursor", models.AttemptFilter{EndpointID: "ep_1", After: sendAttempts[0].ID}},
		{"outbound: failed attempts of an endpoint", models.AttemptFilter{EndpointID: "ep_1", Failed: true}},
		{"outbound: failed attempts, after a cursor", models.AttemptFilter{Failed: true, After: sendAttempts[0].ID}},
		{"outbound: every attempt", models.AttemptFilter{}},
		{"outbound: every attempt, after a cursor", models.AttemptFilter{After: sendAttempts[0].ID}},
	} {
		// Walked down from the cursor (or now) in windows of _id
		// (outbound.go): what is sent is a window's query.
		filter, err := mongo.SendAttemptsWindowFilter(f.f, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{f.name + ", a window of _id", find(sendAttemptsColl, filter, mongo.SendAttemptsOrder)})
	}
	used := map[string]map[string]bool{} // collection → the indexes some plan reads
	for _, q := range qs {
		var res bson.Raw
		err := s.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: q.cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res)
		var ce driver.CommandError
		if errors.As(err, &ce) && (ce.Code == codeNotImplemented || ce.Name == "NotImplemented") {
			// DocumentDB explains no update or delete: its filter, as a
			// find, is what picks the index.
			t.Logf("%s: the engine does not explain it (%s): its filter is explained as a find", q.name, ce.Message)
			err = s.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: asFind(q.cmd)}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res)
		}
		if err != nil {
			t.Errorf("%s: explain: %v", q.name, err)
			continue
		}
		coll, _ := q.cmd[0].Value.(string)
		if used[coll] == nil {
			used[coll] = map[string]bool{}
		}
		for _, name := range planIndexes(res) {
			used[coll][name] = true
		}
		err = checkPlan(res)
		_, documentDB := res.Lookup("queryPlanner", "Plan").DocumentOK()
		reason, excepted := documentDBExceptions[q.name]
		switch {
		case err == nil:
			t.Logf("%s: ok", q.name)
		case documentDB && excepted && planProblems(err) != nil:
			t.Logf("%s: known on DocumentDB engines (%s): %v", q.name, reason, err)
		default:
			t.Errorf("%s: %v", q.name, err)
		}
	}
	// Every index the store made is read by some query above, or keeps a
	// unique rule: an index no query reads costs every write and may lead
	// a planner astray (DocumentDB intersects indexes). On a DocumentDB
	// engine the plan is PostgreSQL's choice by cost, and of a test's few
	// documents every index that can serve a condition costs alike (its
	// indexes serve a condition on any of their fields): one no plan read
	// here is reported, not failed.
	_, documentDB := documentDBEngine(ctx, s)
	for _, coll := range []string{users, events, orgs, members, subs, items, attempts, plans, deliveries, sendAttemptsColl} {
		specs, err := s.Database().Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range specs {
			if sp.Name == "_id_" || used[coll][sp.Name] {
				continue
			}
			if rule := mongo.UniqueRuleOf(coll, sp.Name); rule != "" {
				t.Logf("%s.%s: read by no query; it keeps %s", coll, sp.Name, rule)
				continue
			}
			if documentDB {
				t.Logf("%s.%s: no plan read it on this engine (another index served its queries)", coll, sp.Name)
				continue
			}
			t.Errorf("%s.%s: the store makes it, but no query of the query → index table reads it", coll, sp.Name)
		}
	}
}

// documentDBEngine reports whether the server of s is a DocumentDB
// engine: its explain answers in PostgreSQL's plan format.
func documentDBEngine(ctx context.Context, s *mongo.Store) (bson.Raw, bool) {
	var res bson.Raw
	err := s.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: mongo.UsersCollection},
		{Key: "filter", Value: bson.D{}}}}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&res)
	if err != nil {
		return nil, false
	}
	_, ok := res.Lookup("queryPlanner", "Plan").DocumentOK()
	return res, ok
}

// asFind is the find with the filter of an update or delete command cmd
// (its first statement).
func asFind(cmd bson.D) bson.D {
	coll, _ := cmd[0].Value.(string)
	var filter any = bson.D{}
	for _, e := range cmd[1:] {
		if stmts, ok := e.Value.(bson.A); ok && len(stmts) > 0 {
			if st, ok := stmts[0].(bson.D); ok {
				for _, f := range st {
					if f.Key == "q" {
						filter = f.Value
					}
				}
			}
		}
	}
	return bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: filter}}
}

// sentInWindows are the page queries, under the names the recorded
// answers give them, that the store never sends whole: it walks their
// index range in windows (window.go), and the explain test judges a
// window's query instead. On a DocumentDB engine the whole query sorts
// every match, which is why.
var sentInWindows = map[string]bool{
	"users list: active": true, "users list: active, after a cursor": true, "users list: all": true,
	"event log": true, "event log: status": true, "event log: eventType": true, "event log: status, since": true,
	"event log: after a cursor": true, "organizations list: active": true, "organizations list: all, after a cursor": true,
	"memberships of an organization: active": true,
}

// codeNotImplemented is the server's NotImplemented error code.
const codeNotImplemented = 238

// documentDBExceptions are the queries that read a whole collection, or
// sort what no condition bounds, on a DocumentDB engine, and why that is
// fine: DocumentDB 0.106 returns nothing in index order, so a query in an
// order sorts every match of its filter. Every page of a list and of the
// event log is sent as windows of its index range (window.go, pages.go),
// each closed on both sides, which bounds its sort: the test explains a
// window's query, and none of them is an exception. What is left reads
// everything on purpose, once.
var documentDBExceptions = map[string]string{
	"reconcile: walk of active users":         "the walk reads every active user anyway, and sorts them first",
	"reconcile: walk of active organizations": "the walk reads every active organization anyway, and sorts them first",
	"reconcile: walk of active memberships":   "the walk reads every active membership anyway, and sorts them first",
	"reconcile runs: latest first":            "the collection holds at most 51 documents",
	"invitations of an organization": "the sort takes one organization's invitations after the cursor (its index range), " +
		"not the collection's: an organization has few",
	"invitations of an organization: one status": "as invitations of an organization: one organization's of one status",
	"billing: every attempt": "the console's list of every payment attempt sorts them all on a DocumentDB engine; " +
		"it is not walked in windows as the event log is (yet)",
	"billing: every attempt, after a cursor": "as every attempt: the cursor bounds the sort from above only",
	"outbound: the outbox's oldest entry": "the sparse outboxSeq_1 index holds only the entries not fanned out yet: " +
		"they are sorted (every 15 s, for the gauge), not the events",
	"outbound: an endpoint's oldest pending delivery": "the sparse pendingKey_1 index holds only the pending " +
		"deliveries: the endpoint's backlog is sorted (every 15 s, for the gauge), not its deliveries",
}
