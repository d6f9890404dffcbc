package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about Clerk Billing: each object in Clerk's order, a
// subscription's items applied as the items' own states, and each payer's
// plan recomputed from its items in every order of arrival.

// billingPayer is the payer of the fixtures.
var billingPayer = models.Payer{Kind: models.KindUser, ID: "user_34D368EufHwugfYh4yyGNEheM0S"}

// billingFixture decodes the billing fixture file of package models as
// the event eventID carries it.
func billingFixture(t testing.TB, file, eventID string) (models.Event, models.Change) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "billing", file))
	if err != nil {
		t.Fatal(err)
	}
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ce.Decode(eventID, time.Now())
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	userID, objectID := ch.IDs()
	ts := ch.Version().SourceTime
	return models.Event{EventID: eventID, Type: ce.Type, EventType: ce.EventType(), UserID: userID, ObjectID: objectID,
		RawBody: body, Source: models.SourceClerk, SourceTimestamp: &ts, ReceivedAt: t0, Status: models.StatusStored}, ch
}

// billingDelivery is one delivery of a billing fixture.
type billingDelivery struct{ file, eventID string }

// deliverAll delivers each of ds through Deliver, failing on an error.
func deliverAll(t *testing.T, s repository.Store, ds []billingDelivery) {
	t.Helper()
	for _, d := range ds {
		ev, ch := billingFixture(t, d.file, d.eventID)
		if _, err := s.Deliver(context.Background(), ev, ch, time.Now()); err != nil {
			t.Fatalf("Deliver %s (%s): %v", d.eventID, d.file, err)
		}
	}
}

// testBillingPlanInEveryOrder delivers the events of a plan change, and
// of a cancel after it, in every order, each order to a fresh store: the
// payer's plan is the same.
func testBillingPlanInEveryOrder(t *testing.T, open Opener) {
	const (
		ended    = "plan-change.1.subscriptionItem.ended.json"
		active   = "plan-change.2.subscriptionItem.active.json"
		canceled = "subscriptionItem.canceled.json"
	)
	for _, tc := range []struct {
		name       string
		deliveries []billingDelivery
		status     models.PlanStatus
		slug       string
		canceled   bool
	}{
		// A plan change: the old item ends, a new item becomes active.
		{"plan change", []billingDelivery{{ended, "msg_pc1"}, {active, "msg_pc2"}}, models.PlanActive, "team-plan", false},
		// The same, delivered twice each.
		{"plan change with duplicates", []billingDelivery{{ended, "msg_pc1"}, {active, "msg_pc2"}, {ended, "msg_pc1"}},
			models.PlanActive, "team-plan", false},
		// The new item canceled later: the plan holds until its period
		// ends.
		{"cancel", []billingDelivery{{ended, "msg_pc1"}, {active, "msg_pc2"}, {canceled, "msg_cx"}},
			models.PlanCanceled, "team-plan", true},
	} {
		for i, order := range permutations(tc.deliveries) {
			t.Run(fmt.Sprintf("%s/%d", tc.name, i), func(t *testing.T) {
				s := open(t)
				deliverAll(t, s, order)
				p, err := s.Billing().Plan(context.Background(), billingPayer)
				if err != nil {
					t.Fatal(err)
				}
				if p.Status != tc.status || p.Plan == nil || p.Plan.Slug != tc.slug || p.CanceledAtPeriodEnd != tc.canceled ||
					p.Payer.Kind != billingPayer.Kind || p.Payer.ID != billingPayer.ID {
					t.Errorf("plan after %v = %+v; want %s %s (canceled at period end %v)", order, p, tc.status, tc.slug, tc.canceled)
				}
			})
		}
	}
}

func testBillingHalfAPlanChangeIsPending(t *testing.T, s repository.Store) {
	deliverAll(t, s, []billingDelivery{{"plan-change.2.subscriptionItem.active.json", "msg_new"}})
	deliverAll(t, s, []billingDelivery{{"plan-change.1.subscriptionItem.ended.json", "msg_old"}})
	ctx := context.Background()
	if p, err := s.Billing().Plan(ctx, billingPayer); err != nil || p.Status != models.PlanActive || p.Plan.Slug != "team-plan" {
		t.Errorf("plan = %+v, %v; want the new plan active", p, err)
	}
	other := models.Payer{Kind: models.KindOrganization, ID: "org_nobilling"}
	if _, err := s.Billing().Plan(ctx, other); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("plan of a payer without items: %v, want not found", err)
	}
	items, err := s.Billing().Items(ctx, billingPayer)
	if err != nil || len(items) != 2 || items[0].ItemID != "csub_item_3AnewTeamPlanItem0000000000" {
		t.Errorf("items = %+v, %v; want both, the newest first", items, err)
	}
}

func testBillingSubscriptionAppliesItsItems(t *testing.T, s repository.Store) {
	ctx := context.Background()
	deliverAll(t, s, []billingDelivery{{"upstream.subscription.created.json", "msg_sub"}})
	sub, err := s.Billing().Subscription(ctx, "csub_2g7np7Hrk0SN6kj5EDMLDaKNL0S")
	if err != nil || sub.Status != "active" || sub.Payer.ID != billingPayer.ID || sub.LastEventID != "msg_sub" {
		t.Fatalf("subscription = %+v, %v", sub, err)
	}
	p, err := s.Billing().Plan(ctx, billingPayer)
	if err != nil || p.Status != models.PlanActive || p.Plan == nil || p.Plan.Slug != "pro-plan" {
		t.Errorf("plan = %+v, %v; want the subscription's active item's plan", p, err)
	}
	// A standalone event of the same item with the same Clerk time and a
	// larger event id is the newer state; a state of the subscription with
	// a smaller one is stale, and so is its item's.
	ev, ch := billingFixture(t, "upstream.subscriptionItem.active.free.json", "msg_suc")
	d, err := s.Deliver(ctx, ev, ch, time.Now())
	if err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("item event = %+v, %v; want applied", d, err)
	}
	if p, _ := s.Billing().Plan(ctx, billingPayer); p.Plan == nil || p.Plan.Slug != "free-plan" {
		t.Errorf("plan = %+v; want the item's newer state", p)
	}
	ev, ch = billingFixture(t, "upstream.subscription.created.json", "msg_sua0")
	if d, err := s.Deliver(ctx, ev, ch, time.Now()); err != nil || d.Outcome != models.OutcomeStale {
		t.Errorf("an older state of the subscription and its item = %+v, %v; want stale", d, err)
	}
	if p, _ := s.Billing().Plan(ctx, billingPayer); p.Plan == nil || p.Plan.Slug != "free-plan" {
		t.Errorf("plan = %+v; want it unchanged by a stale state", p)
	}
}

// billingKindFixtures are one object of each billing kind, for the
// delivery promises every kind keeps (deliver.go).
func billingKindFixtures() map[models.Kind]kindFixture {
	item := func(id string, at time.Duration) models.SubscriptionItemChange {
		return models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{
			ItemID: "csub_item_dl", SubscriptionID: "csub_dl", Payer: models.Payer{Kind: models.KindUser, ID: "user_dlb"},
			Status: models.ItemActive, Plan: models.BillingPlan{ID: "cplan_dl", Slug: "pro", Name: "Pro"},
			SourceUpdatedAt: t0.Add(at), LastEventID: id,
		}}
	}
	return map[models.Kind]kindFixture{
		models.KindSubscriptionItem: {
			state: func(id string, at time.Duration) models.Change { return item(id, at) },
			version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
				items, err := s.Billing().Items(ctx, models.Payer{Kind: models.KindUser, ID: "user_dlb"})
				if err != nil || len(items) == 0 {
					return nil, err
				}
				v := items[0].Version()
				return &v, nil
			},
		},
		models.KindSubscription: {
			state: func(id string, at time.Duration) models.Change {
				// An item and a payer of its own: the subscription_item
				// kind's item would be written by the subscription's states,
				// which the promises of that kind run after, and its payer's
				// newest item would be this one.
				payer := models.Payer{Kind: models.KindUser, ID: "user_dls"}
				it := item(id, at)
				it.ItemID, it.Payer = "csub_item_dls", payer
				return models.SubscriptionChange{SubscriptionID: "csub_dl", EventID: id, SourceTime: t0.Add(at), Status: "active",
					Payer: payer, Items: []models.SubscriptionItemChange{it}}
			},
			version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
				return models.VersionOf(s.Billing().Subscription(ctx, "csub_dl"))
			},
		},
		models.KindPaymentAttempt: {
			state: func(id string, at time.Duration) models.Change {
				return models.PaymentAttemptChange{AttemptID: "pa_dl", PaymentID: "cpa_dl", EventID: id, SourceTime: t0.Add(at),
					Status: "paid", Payer: models.Payer{Kind: models.KindOrganization, ID: "org_dlb"}}
			},
			version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
				page, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{PaymentID: "cpa_dl", Limit: 10})
				if err != nil || len(page.Attempts) == 0 {
					return nil, err
				}
				v := page.Attempts[0].Version()
				return &v, nil
			},
		},
	}
}

func init() {
	for k, f := range billingKindFixtures() {
		kindFixtures[k] = f
	}
}

// testBillingUnknownTypeIsIgnored delivers an event of a billing type
// usersync does not know: it is processed with the outcome ignored,
// counted so, of its prefix's kind, and writes no billing object.
func testBillingUnknownTypeIsIgnored(t *testing.T, s repository.Store) {
	ctx := context.Background()
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "billing", "plan-change.2.subscriptionItem.active.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	env["type"] = "subscriptionItem.somethingNew"
	if body, err = json.Marshal(env); err != nil {
		t.Fatal(err)
	}
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ce.Decode("msg_unknown", time.Now())
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	userID, objectID := ch.IDs()
	ts := ch.Version().SourceTime
	ev := models.Event{EventID: "msg_unknown", Type: ce.Type, EventType: ce.EventType(), UserID: userID, ObjectID: objectID,
		RawBody: body, Source: models.SourceClerk, SourceTimestamp: &ts, ReceivedAt: t0, Status: models.StatusStored}
	d, err := s.Deliver(ctx, ev, ch, time.Now())
	if err != nil || d.Outcome != models.OutcomeIgnored || d.Event.Status != models.StatusProcessed {
		t.Fatalf("Deliver = %+v, %v; want processed, ignored", d, err)
	}
	got, err := s.Events().Get(ctx, "msg_unknown")
	if err != nil || got.Status != models.StatusProcessed || got.Outcome != models.OutcomeIgnored ||
		got.Kind() != models.KindSubscriptionItem || got.EventType != models.EventOther || got.UserID != billingPayer.ID {
		t.Errorf("stored event = %+v, %v; want processed, ignored, a subscription item's, short type other, the payer's", got, err)
	}
	if p, err := s.Billing().Plan(ctx, billingPayer); err == nil || !errors.Is(err, models.ErrNotFound) {
		t.Errorf("plan = %+v, %v; want none: nothing applied", p, err)
	}
	if items, err := s.Billing().Items(ctx, billingPayer); err != nil || len(items) != 0 {
		t.Errorf("items = %v, %v; want none", items, err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByOutcome[models.OutcomeIgnored] != 1 || st.ByStatus[models.StatusProcessed] != 1 {
		t.Errorf("stats = %+v, %v; want one processed, ignored", st, err)
	}
}
