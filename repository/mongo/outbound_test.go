package mongo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// The MongoDB store's own side of outbound webhooks: what has no
// transaction here (a fan-out and a settle of one object in two
// instances; the outbox on the event documents, which retention deletes;
// a membership's deliveries at its erasure). The behaviour suite
// (storetest) covers the rest.

var obT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func obPending(userID, eventID string, at time.Duration, c models.EventType) models.Pending {
	return models.Pending{Kind: models.KindUser, ObjectID: userID, UserID: userID, Change: c, Origin: models.OriginWebhook,
		Version: models.Version{SourceTime: obT0.Add(at), EventID: eventID, Deleted: c == models.EventDeleted}, At: obT0.Add(at)}
}

// obEndpoints creates the endpoints ids: a fan-out writes deliveries for
// existing endpoints only.
func obEndpoints(t *testing.T, o interface {
	CreateEndpoint(context.Context, models.Endpoint) error
}, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := o.CreateEndpoint(context.Background(), models.Endpoint{ID: id, URL: "https://example.com/" + id, Enabled: true,
			Secret: "whsec_a", CreatedAt: obT0, UpdatedAt: obT0}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOutbound_ASettleRacingAFanoutKeepsTheChangeQueuedMeanwhile: a newer
// change is fanned out between the settle's read and its write. The
// settle's write is refused (the revision moved), and it settles again
// from the delivery as it is now: the newer change stays pending, the
// first is recorded as received.
func TestOutbound_ASettleRacingAFanoutKeepsTheChangeQueuedMeanwhile(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	o := s.Outbound()
	first := obPending("user_race", "msg_race_1", time.Second, models.EventCreated)
	second := obPending("user_race", "msg_race_2", 2*time.Second, models.EventUpdated)
	obEndpoints(t, o, "ep_race")
	if err := o.Fanout(ctx, []models.Fanout{{Pending: first, Endpoints: []string{"ep_race"}}}, nil, obT0); err != nil {
		t.Fatal(err)
	}
	sent, err := o.Delivery(ctx, "ep_race", models.KindUser, "user_race")
	if err != nil {
		t.Fatal(err)
	}
	at := obT0.Add(time.Minute)
	result := sent
	result.Status, result.Fields, result.LastStatus, result.LastAt = models.DeliveryDelivered, map[string]string{"a": "1"}, 200, &at
	result.DeliveredAt, result.DeliveredMsg = &at, sent.MessageID
	fired := 0
	mongo.SetBeforeDeliveryWrite(s, func() {
		if fired++; fired == 1 {
			if err := o.Fanout(ctx, []models.Fanout{{Pending: second, Endpoints: []string{"ep_race"}}}, nil, at); err != nil {
				t.Error(err)
			}
		}
	})
	if err := o.Settle(ctx, models.Settlement{Sent: sent, Result: result, Attempt: models.Attempt{EndpointID: "ep_race", MessageID: sent.MessageID, At: at, Status: 200, Delivered: true}}); err != nil {
		t.Fatal(err)
	}
	mongo.SetBeforeDeliveryWrite(s, nil)
	d, err := o.Delivery(ctx, "ep_race", models.KindUser, "user_race")
	if err != nil || d.Status != models.DeliveryPending || d.MessageID != second.MessageID() || d.DeliveredMsg != first.MessageID() ||
		!d.NextAt.Equal(at) {
		t.Errorf("delivery = %+v, %v; want the newer change pending, due at the settle, the first one received", d, err)
	}
	if ds, err := o.Due(ctx, "ep_race", at, 10); err != nil || len(ds) != 1 || ds[0].MessageID != second.MessageID() {
		t.Errorf("due = %+v, %v; want the newer change", ds, err)
	}
}

// TestOutbound_ConcurrentFanoutsOfOneObjectKeepTheNewestChange: while a
// fan-out of a new object computes its insert, another writes an older
// change of it first; the insert is refused as a duplicate, and the
// fan-out goes round again from the stored delivery: the newer change
// replaces the older.
func TestOutbound_ConcurrentFanoutsOfOneObjectKeepTheNewestChange(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	o := s.Outbound()
	obEndpoints(t, o, "ep_two")
	older := obPending("user_two", "msg_two_1", time.Second, models.EventCreated)
	newer := obPending("user_two", "msg_two_2", 2*time.Second, models.EventUpdated)
	fired := 0
	mongo.SetBeforeDeliveryWrite(s, func() {
		if fired++; fired == 1 {
			if err := o.Fanout(ctx, []models.Fanout{{Pending: older, Endpoints: []string{"ep_two"}}}, nil, obT0); err != nil {
				t.Error(err)
			}
		}
	})
	if err := o.Fanout(ctx, []models.Fanout{{Pending: newer, Endpoints: []string{"ep_two"}}}, nil, obT0); err != nil {
		t.Fatal(err)
	}
	mongo.SetBeforeDeliveryWrite(s, nil)
	d, err := o.Delivery(ctx, "ep_two", models.KindUser, "user_two")
	if err != nil || d.MessageID != newer.MessageID() || d.Change != models.EventCreated || d.Status != models.DeliveryPending {
		t.Errorf("delivery = %+v, %v; want the newer change in place of the creation, still a creation", d, err)
	}
}

// TestOutbound_AFanoutThatKeepsLosingAsksToBeRetriedLater: a fan-out whose
// compare-and-set is refused every round gives up after a few, with
// models.ErrRetryLater, and leaves its entries in the outbox.
func TestOutbound_AFanoutThatKeepsLosingAsksToBeRetriedLater(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	o := s.Outbound()
	o.SetRecording(true)
	ch := change("user_lose", "msg_lose", time.Second, "")
	if _, err := s.Deliver(ctx, batchEvent(ch, models.TypeUserCreated), ch, obT0); err != nil {
		t.Fatal(err)
	}
	entries, err := o.Outbox(ctx, 10)
	if err != nil || len(entries) != 1 {
		t.Fatalf("outbox = %+v, %v", entries, err)
	}
	p := entries[0].Pending
	obEndpoints(t, o, "ep_lose")
	if err := o.Fanout(ctx, []models.Fanout{{Pending: p, Endpoints: []string{"ep_lose"}}}, nil, obT0); err != nil {
		t.Fatal(err)
	}
	deliveries := s.Database().Collection(s.CollectionName(mongo.DeliveriesCollection))
	mongo.SetBeforeDeliveryWrite(s, func() {
		if _, err := deliveries.UpdateOne(ctx, bson.D{}, bson.D{{Key: "$inc", Value: bson.D{{Key: "rev", Value: 1}}}}); err != nil {
			t.Error(err)
		}
	})
	p.Version.EventID, p.Version.SourceTime = "msg_lose_2", p.Version.SourceTime.Add(time.Second)
	err = o.Fanout(ctx, []models.Fanout{{Pending: p, Endpoints: []string{"ep_lose"}}}, []string{entries[0].Key}, obT0)
	mongo.SetBeforeDeliveryWrite(s, nil)
	if !errors.Is(err, models.ErrRetryLater) {
		t.Errorf("Fanout = %v, want retry later", err)
	}
	if got, err := o.Outbox(ctx, 10); err != nil || len(got) != 1 {
		t.Errorf("outbox = %+v, %v; want the entry kept", got, err)
	}
}

// TestOutbound_RetentionKeepsAnEventUntilItsOutboxEntryIsFannedOut: the
// outbox is on the event documents, and retention deletes an event only
// once its entry is taken out.
func TestOutbound_RetentionKeepsAnEventUntilItsOutboxEntryIsFannedOut(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	o := s.Outbound()
	o.SetRecording(true)
	ch := change("user_kept", "msg_kept", time.Second, "")
	if _, err := s.Deliver(ctx, batchEvent(ch, models.TypeUserCreated), ch, obT0); err != nil {
		t.Fatal(err)
	}
	later := obT0.Add(365 * 24 * time.Hour)
	if n, err := s.Events().DeleteProcessedBefore(ctx, later, 100); err != nil || n != 0 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want the event kept while its entry waits", n, err)
	}
	entries, err := o.Outbox(ctx, 10)
	if err != nil || len(entries) != 1 {
		t.Fatalf("outbox = %+v, %v; want the entry", entries, err)
	}
	if err := o.Fanout(ctx, nil, []string{entries[0].Key}, obT0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Events().DeleteProcessedBefore(ctx, later, 100); err != nil || n != 1 {
		t.Errorf("DeleteProcessedBefore = %d, %v; want the event deleted once fanned out", n, err)
	}
}

// TestOutbound_AMembershipsErasureTakesItsDeliveries: the erasure of a
// deleted membership deletes its deliveries, and neither its member's nor
// another membership's.
func TestOutbound_AMembershipsErasureTakesItsDeliveries(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	o := s.Outbound()
	now := time.Now().UTC()
	for _, ch := range []models.MembershipChange{
		{MembershipID: "orgmem_gone", OrgID: "org_e", UserID: "user_member", EventID: "msg_m1", SourceTime: obT0, Role: "org:member"},
		{MembershipID: "orgmem_gone", OrgID: "org_e", UserID: "user_member", EventID: "msg_m2", SourceTime: obT0.Add(time.Second), Deleted: true},
		{MembershipID: "orgmem_kept", OrgID: "org_f", UserID: "user_member", EventID: "msg_m3", SourceTime: obT0, Role: "org:member"},
	} {
		if _, err := s.Memberships().Apply(ctx, ch, now); err != nil {
			t.Fatal(err)
		}
	}
	member := func(id string) models.Pending {
		return models.Pending{Kind: models.KindMembership, ObjectID: id, UserID: "user_member", Change: models.EventCreated,
			Origin: models.OriginWebhook, Version: models.Version{SourceTime: obT0, EventID: "msg_" + id}, At: obT0}
	}
	obEndpoints(t, o, "ep_m")
	fs := []models.Fanout{
		{Pending: member("orgmem_gone"), Endpoints: []string{"ep_m"}},
		{Pending: member("orgmem_kept"), Endpoints: []string{"ep_m"}},
		{Pending: obPending("user_member", "msg_member", 0, models.EventCreated), Endpoints: []string{"ep_m"}},
	}
	if err := o.Fanout(ctx, fs, nil, now); err != nil {
		t.Fatal(err)
	}
	res, err := s.EraseDeletedBefore(ctx, now.Add(365*24*time.Hour), now)
	if err != nil || res.Memberships != 1 {
		t.Fatalf("EraseDeletedBefore = %+v, %v; want the membership erased", res, err)
	}
	if _, err := o.Delivery(ctx, "ep_m", models.KindMembership, "orgmem_gone"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("an erased membership's delivery stays: %v", err)
	}
	for _, k := range []struct {
		kind models.Kind
		id   string
	}{{models.KindMembership, "orgmem_kept"}, {models.KindUser, "user_member"}} {
		if _, err := o.Delivery(ctx, "ep_m", k.kind, k.id); err != nil {
			t.Errorf("the delivery of %s %s went: %v", k.kind, k.id, err)
		}
	}
}
