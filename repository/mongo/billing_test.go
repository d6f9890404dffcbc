package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// billingItem is a state of the item itemID of payer, on the plan slug.
func billingItem(payer models.Payer, itemID, slug string, status models.ItemStatus, eventID string, at time.Duration) models.SubscriptionItemChange {
	return models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{
		ItemID: itemID, SubscriptionID: "csub_cas", Payer: payer, Status: status,
		Plan:            models.BillingPlan{ID: "cplan_" + slug, Slug: slug, Name: slug},
		SourceUpdatedAt: t0.Add(at), LastEventID: eventID,
	}}
}

// deliverItem delivers ch in an event of its own.
func deliverItem(t *testing.T, s *mongo.Store, ch models.SubscriptionItemChange, now time.Time) models.Delivered {
	t.Helper()
	ts := ch.SourceUpdatedAt
	ev := models.Event{EventID: ch.LastEventID, Type: models.TypeSubscriptionItemUpdated, EventType: models.EventUpdated,
		UserID: ch.Payer.UserID(), ObjectID: ch.ItemID, RawBody: []byte(`{}`), Source: models.SourceClerk,
		SourceTimestamp: &ts, ReceivedAt: t0, Status: models.StatusStored}
	d, err := s.Deliver(context.Background(), ev, ch, now)
	if err != nil {
		t.Fatalf("Deliver %s: %v", ch.LastEventID, err)
	}
	return d
}

// TestBilling_ARecomputationThatMissedAnItemNeverWritesOverTheNewerPlan
// makes the race of two deliveries for one payer happen: the first reads
// the payer's items (its own only), then, before it writes the plan, the
// second writes its item and the plan of both. The first's write is
// refused (the plan is no longer the one it read) and it recomputes: the
// plan is that of both items, not the first's alone.
func TestBilling_ARecomputationThatMissedAnItemNeverWritesOverTheNewerPlan(t *testing.T) {
	ctx := context.Background()
	s := mongotest.OpenWith(t, mongo.Options{DeliveryBatch: 1})
	payer := models.Payer{Kind: models.KindUser, ID: "user_cas"}
	// The plan before: pending (an abandoned item). The first delivery:
	// the old item ended (a pending plan with it). The second: the new
	// item active.
	deliverItem(t, s, billingItem(payer, "csub_item_gone", "gone", models.ItemAbandoned, "msg_gone", 0), time.Now())
	ended := billingItem(payer, "csub_item_old", "old", models.ItemEnded, "msg_old", time.Second)
	active := billingItem(payer, "csub_item_new", "new", models.ItemActive, "msg_new", 2*time.Second)
	fired := false // the hook runs again inside the second delivery
	mongo.SetBeforePlanWrite(s, func() {
		if !fired {
			fired = true
			deliverItem(t, s, active, time.Now())
		}
	})
	if d := deliverItem(t, s, ended, time.Now()); d.Outcome != models.OutcomeApplied {
		t.Fatalf("outcome = %q, want applied", d.Outcome)
	}
	mongo.SetBeforePlanWrite(s, nil)
	p, err := s.Billing().Plan(ctx, payer)
	if err != nil || p.Status != models.PlanActive || p.Plan == nil || p.Plan.Slug != "new" {
		t.Errorf("plan = %+v, %v; want the new item's, active", p, err)
	}
}

// TestBilling_ConcurrentDeliveriesForOnePayerEndInThePlanOfAllItsItems
// delivers items of one payer at once, in and out of batches: the plan
// stored is models.PlanOf of every item.
func TestBilling_ConcurrentDeliveriesForOnePayerEndInThePlanOfAllItsItems(t *testing.T) {
	for _, batch := range []int{1, 0} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			ctx := context.Background()
			s := mongotest.OpenWith(t, mongo.Options{DeliveryBatch: batch})
			payer := models.Payer{Kind: models.KindOrganization, ID: "org_cas"}
			statuses := []models.ItemStatus{models.ItemEnded, models.ItemUpcoming, models.ItemCanceled, models.ItemAbandoned,
				models.ItemEnded, models.ItemIncomplete, models.ItemActive, models.ItemEnded}
			var wg sync.WaitGroup
			for i, st := range statuses {
				ch := billingItem(payer, fmt.Sprintf("csub_item_%d", i), fmt.Sprintf("plan-%d", i), st,
					fmt.Sprintf("msg_%d", i), time.Duration(len(statuses)-i)*time.Second)
				wg.Go(func() { deliverItem(t, s, ch, time.Now()) })
			}
			wg.Wait()
			items, err := s.Billing().Items(ctx, payer)
			if err != nil || len(items) != len(statuses) {
				t.Fatalf("items = %d, %v; want %d", len(items), err, len(statuses))
			}
			p, err := s.Billing().Plan(ctx, payer)
			if want := models.PlanOf(items); err != nil || !reflect.DeepEqual(p.PayerPlan, want) {
				t.Errorf("plan = %+v, %v;\nwant %+v", p.PayerPlan, err, want)
			}
		})
	}
}

// TestBilling_APlanUnchangedByAnItemKeepsItsTime: an item that changes
// nothing of the plan (an abandoned one) is written, and the plan's
// UpdatedAt stays that of the write that changed it; a later item that
// changes it moves it.
func TestBilling_APlanUnchangedByAnItemKeepsItsTime(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	payer := models.Payer{Kind: models.KindUser, ID: "user_time"}
	first := time.Now().UTC().Truncate(time.Millisecond)
	deliverItem(t, s, billingItem(payer, "csub_item_a", "pro", models.ItemActive, "msg_a", time.Second), first)
	deliverItem(t, s, billingItem(payer, "csub_item_b", "free", models.ItemAbandoned, "msg_b", 2*time.Second), first.Add(time.Minute))
	p, err := s.Billing().Plan(ctx, payer)
	if err != nil || !p.UpdatedAt.Equal(first) || p.Plan == nil || p.Plan.Slug != "pro" {
		t.Errorf("plan = %+v, %v; want pro, updated at %v", p, err, first)
	}
	later := first.Add(2 * time.Minute)
	deliverItem(t, s, billingItem(payer, "csub_item_a", "pro", models.ItemCanceled, "msg_c", 3*time.Second), later)
	if p, err := s.Billing().Plan(ctx, payer); err != nil || !p.UpdatedAt.Equal(later) || !p.CanceledAtPeriodEnd {
		t.Errorf("plan = %+v, %v; want canceled, updated at %v", p, err, later)
	}
}

// TestBilling_PaymentAttemptsArePagedNewestFirst pages the attempts of a
// payment, of a payer and all of them with cursors, and refuses a cursor
// it did not return.
func TestBilling_PaymentAttemptsArePagedNewestFirst(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	payer := models.Payer{Kind: models.KindUser, ID: "user_pay"}
	other := models.Payer{Kind: models.KindOrganization, ID: "org_pay"}
	var want []string // the payer's attempts, newest first
	for i := range 5 {
		p, payment := payer, "cpa_1"
		if i%2 == 1 {
			payment = "cpa_2"
		}
		if i == 4 {
			p = other
		}
		ch := models.PaymentAttemptChange{AttemptID: fmt.Sprintf("pa_%d", i), PaymentID: payment, EventID: fmt.Sprintf("msg_pa_%d", i),
			// two at the same millisecond: the cursor tells them apart
			SourceTime: t0.Add(time.Duration(min(i, 3)) * time.Second), Status: "paid", Payer: p,
			Totals: []byte(`{"grand_total":{"amount":1000,"currency":"USD"}}`), SubscriptionItemIDs: []string{"csub_item_x"}}
		ev := models.Event{EventID: ch.EventID, Type: models.TypePaymentAttemptUpdated, EventType: models.EventUpdated,
			UserID: p.UserID(), ObjectID: ch.AttemptID, RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: t0, Status: models.StatusStored}
		if d, err := s.Deliver(ctx, ev, ch, time.Now()); err != nil || d.Outcome != models.OutcomeApplied {
			t.Fatalf("Deliver = %+v, %v", d, err)
		}
		if p == payer {
			want = append([]string{ch.AttemptID}, want...)
		}
	}
	all := func(f models.PaymentAttemptFilter) []string {
		t.Helper()
		var ids []string
		for range 10 {
			page, err := s.Billing().PaymentAttempts(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page.Attempts {
				ids = append(ids, a.AttemptID)
			}
			if page.NextCursor == "" {
				return ids
			}
			f.After = page.NextCursor
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	// pa_3 and pa_4 share a Clerk time: their order is by _id.
	if got := all(models.PaymentAttemptFilter{Payer: &payer, Limit: 1}); !slices.Equal(got, want) {
		t.Errorf("a payer's attempts = %v, want %v", got, want)
	}
	if got := all(models.PaymentAttemptFilter{PaymentID: "cpa_1", Limit: 2}); !slices.Equal(got, []string{"pa_4", "pa_2", "pa_0"}) {
		t.Errorf("a payment's attempts = %v", got)
	}
	if got := all(models.PaymentAttemptFilter{Limit: 2}); len(got) != 5 || got[len(got)-1] != "pa_0" {
		t.Errorf("every attempt = %v", got)
	}
	page, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{PaymentID: "cpa_2", Limit: 10})
	if err != nil || len(page.Attempts) != 2 || string(page.Attempts[0].Totals) != `{"grand_total":{"amount":1000,"currency":"USD"}}` ||
		!slices.Equal(page.Attempts[0].SubscriptionItemIDs, []string{"csub_item_x"}) {
		t.Errorf("attempts of cpa_2 = %+v, %v; want both, with their totals and items as sent", page, err)
	}
	if _, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{After: "nope"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a malformed cursor: %v, want ErrInvalid", err)
	}
}

// TestPrepare_APreviousVersionsDatabaseGainsTheBillingCollections opens a
// database the previous version prepared (marked, without the billing
// collections): Prepare and Migrate accept it as it is, create the
// collections and EnsureIndexes their indexes, and billing deliveries
// apply.
func TestPrepare_APreviousVersionsDatabaseGainsTheBillingCollections(t *testing.T) {
	for _, how := range []string{"prepare", "migrate"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			old := mongotest.Open(t)
			if _, err := old.Users().Apply(ctx, change("user_1", "msg_1", time.Second, "a@example.com"), time.Now()); err != nil {
				t.Fatal(err)
			}
			for _, base := range []string{mongo.SubscriptionsCollection, mongo.SubscriptionItemsCollection,
				mongo.PaymentAttemptsCollection, mongo.BillingPlansCollection} {
				if err := old.Database().Collection(old.CollectionName(base)).Drop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			s := mongotest.Unprepared(t, mongotest.URI(t), old.Database().Name(), mongo.Options{})
			switch how {
			case "prepare":
				if err := s.Prepare(ctx); err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				if err := s.EnsureIndexes(ctx); err != nil {
					t.Fatal(err)
				}
			case "migrate":
				if _, err := s.Migrate(ctx, false); err != nil {
					t.Fatalf("Migrate: %v", err)
				}
			}
			names, err := s.Database().ListCollectionNames(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				base    string
				indexes []string
			}{
				{mongo.SubscriptionsCollection, nil},
				{mongo.SubscriptionItemsCollection, []string{"payerKind_1_payerId_1_sourceUpdatedAt_-1"}},
				{mongo.PaymentAttemptsCollection, []string{"paymentId_1_sourceUpdatedAt_-1__id_-1",
					"payerKind_1_payerId_1_sourceUpdatedAt_-1__id_-1", "sourceUpdatedAt_-1__id_-1"}},
				{mongo.BillingPlansCollection, []string{"updatedAt_1__id_1"}},
			} {
				if !slices.Contains(names, c.base) {
					t.Errorf("no collection %s", c.base)
					continue
				}
				specs, err := s.Database().Collection(c.base).Indexes().ListSpecifications(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range c.indexes {
					if !slices.ContainsFunc(specs, func(sp driver.IndexSpecification) bool { return sp.Name == want }) {
						t.Errorf("%s has no index %s", c.base, want)
					}
				}
			}
			payer := models.Payer{Kind: models.KindUser, ID: "user_1"}
			deliverItem(t, s, billingItem(payer, "csub_item_1", "pro", models.ItemActive, "msg_2", time.Second), time.Now())
			if p, err := s.Billing().Plan(ctx, payer); err != nil || p.Status != models.PlanActive {
				t.Errorf("plan = %+v, %v", p, err)
			}
		})
	}
}
