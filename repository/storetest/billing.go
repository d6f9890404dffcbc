package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// deliverSubscription delivers a state of subscription id (no items) of
// payer in status, at Clerk time at, by event eventID.
func deliverSubscription(t *testing.T, s repository.Store, id string, payer models.Payer, status string, at time.Time, eventID string) {
	t.Helper()
	ch := models.SubscriptionChange{SubscriptionID: id, EventID: eventID, SourceTime: at, Status: status, Payer: payer}
	userID, objectID := ch.IDs()
	ev := models.Event{EventID: eventID, Type: "subscription.updated", EventType: models.EventUpdated, UserID: userID,
		ObjectID: objectID, RawBody: []byte(`{}`), Source: models.SourceClerk, SourceTimestamp: &at, ReceivedAt: t0,
		Status: models.StatusStored}
	if d, err := s.Deliver(context.Background(), ev, ch, time.Now()); err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("Deliver %s of %s = %+v, %v; want applied", eventID, id, d, err)
	}
}

// subscriptionIDs pages through the subscriptions f selects, limit at a
// time, and returns the ids listed, in order.
func subscriptionIDs(t *testing.T, s repository.Store, f models.SubscriptionFilter) []string {
	t.Helper()
	var ids []string
	for range 50 {
		page, err := s.Billing().Subscriptions(context.Background(), f)
		if err != nil {
			t.Fatalf("Subscriptions(%+v): %v", f, err)
		}
		if len(page.Subscriptions) > f.Limit {
			t.Fatalf("Subscriptions(%+v): %d on a page", f, len(page.Subscriptions))
		}
		for _, sub := range page.Subscriptions {
			ids = append(ids, sub.SubscriptionID)
		}
		if page.NextCursor == "" {
			return ids
		}
		f.After = page.NextCursor
	}
	t.Fatalf("Subscriptions(%+v): more than 50 pages", f)
	return nil
}

// testBillingSubscriptionsPage lists subscriptions, all, of a payer, in a
// status, of both, in pages of every size: the newest Clerk time first,
// each once, a newer state moving a subscription first.
func testBillingSubscriptionsPage(t *testing.T, s repository.Store) {
	ctx := context.Background()
	org := models.Payer{Kind: models.KindOrganization, ID: "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"}
	other := models.Payer{Kind: models.KindUser, ID: "user_2g7np7Hrk0SN6kj5EDMLDaKNL0S"}
	if page, err := s.Billing().Subscriptions(ctx, models.SubscriptionFilter{Limit: 10}); err != nil ||
		len(page.Subscriptions) != 0 || page.NextCursor != "" {
		t.Fatalf("no subscription: %+v, %v; want an empty last page", page, err)
	}
	for _, d := range []struct {
		id     string
		payer  models.Payer
		status string
		at     time.Duration
	}{
		{"csub_1", billingPayer, "active", 1 * time.Second},
		{"csub_2", billingPayer, "past_due", 2 * time.Second},
		{"csub_3", org, "active", 3 * time.Second},
		{"csub_4", billingPayer, "active", 4 * time.Second},
		{"csub_5", other, "active", 3 * time.Second}, // the same Clerk time as csub_3
		{"csub_6", org, "ended", -400 * 24 * time.Hour},
	} {
		deliverSubscription(t, s, d.id, d.payer, d.status, t0.Add(d.at), "msg_"+d.id)
	}
	// A newer state of csub_1 moves it first, in another status.
	deliverSubscription(t, s, "csub_1", billingPayer, "past_due", t0.Add(5*time.Second), "msg_csub_1b")
	// An older one changes nothing.
	ev := models.Event{EventID: "msg_csub_1a", Type: "subscription.updated", EventType: models.EventUpdated,
		UserID: billingPayer.ID, ObjectID: "csub_1", RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: t0, Status: models.StatusStored}
	old := models.SubscriptionChange{SubscriptionID: "csub_1", EventID: "msg_csub_1a", SourceTime: t0, Status: "active", Payer: billingPayer}
	if d, err := s.Deliver(ctx, ev, old, time.Now()); err != nil || d.Outcome != models.OutcomeStale {
		t.Fatalf("an older state = %+v, %v; want stale", d, err)
	}
	// csub_3 and csub_5 share a Clerk time: either comes first, as the
	// store's ids order them, but each page walk lists both once.
	tie := func(before, after []string, first, second string) [][]string {
		return [][]string{
			append(append(append([]string{}, before...), first, second), after...),
			append(append(append([]string{}, before...), second, first), after...),
		}
	}
	for _, tc := range []struct {
		name string
		f    models.SubscriptionFilter
		want [][]string // the orders allowed
	}{
		{"all", models.SubscriptionFilter{}, tie([]string{"csub_1", "csub_4"}, []string{"csub_2", "csub_6"}, "csub_3", "csub_5")},
		{"a payer", models.SubscriptionFilter{Payer: &billingPayer}, [][]string{{"csub_1", "csub_4", "csub_2"}}},
		{"an organization payer", models.SubscriptionFilter{Payer: &org}, [][]string{{"csub_3", "csub_6"}}},
		{"a status", models.SubscriptionFilter{Status: "active"}, tie([]string{"csub_4"}, nil, "csub_3", "csub_5")},
		{"another status", models.SubscriptionFilter{Status: "past_due"}, [][]string{{"csub_1", "csub_2"}}},
		{"a payer in a status", models.SubscriptionFilter{Payer: &billingPayer, Status: "past_due"}, [][]string{{"csub_1", "csub_2"}}},
		{"an organization in a status", models.SubscriptionFilter{Payer: &org, Status: "ended"}, [][]string{{"csub_6"}}},
		{"a status no one is in", models.SubscriptionFilter{Status: "canceled"}, [][]string{nil}},
		{"a payer without subscriptions", models.SubscriptionFilter{Payer: &models.Payer{Kind: models.KindUser, ID: "user_nobody"}}, [][]string{nil}},
		{"a payer's id of another kind", models.SubscriptionFilter{Payer: &models.Payer{Kind: models.KindOrganization, ID: billingPayer.ID}}, [][]string{nil}},
	} {
		for _, limit := range []int{1, 2, 3, 10} {
			f := tc.f
			f.Limit = limit
			got := subscriptionIDs(t, s, f)
			ok := false
			for _, w := range tc.want {
				ok = ok || slices.Equal(got, w)
			}
			if !ok {
				t.Errorf("%s, limit %d: %v, want %v", tc.name, limit, got, tc.want)
			}
		}
	}
	page, err := s.Billing().Subscriptions(ctx, models.SubscriptionFilter{Payer: &org, Limit: 1})
	if err != nil || len(page.Subscriptions) != 1 || page.NextCursor == "" {
		t.Fatalf("first page of the organization's = %+v, %v", page, err)
	}
	if sub := page.Subscriptions[0]; sub.SubscriptionID != "csub_3" || sub.Payer != org || sub.Status != "active" ||
		!sub.SourceUpdatedAt.Equal(t0.Add(3*time.Second)) || sub.LastEventID != "msg_csub_3" {
		t.Errorf("subscription = %+v; want csub_3's state", sub)
	}
	for _, c := range []string{"nonsense", "12_", "_csub_1", "x_csub_1"} {
		if _, err := s.Billing().Subscriptions(ctx, models.SubscriptionFilter{After: c, Limit: 2}); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("cursor %q: %v; want ErrInvalid", c, err)
		}
	}
}

// deliverPlanItem delivers a state of item id of payer, on plan slug in
// status, at Clerk time at, by event eventID, written at now: the time a
// plan it changes takes as its updatedAt.
func deliverPlanItem(t *testing.T, s repository.Store, id string, payer models.Payer, slug string, status models.ItemStatus,
	at time.Duration, eventID string, now time.Time) {
	t.Helper()
	ch := models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{ItemID: id, Payer: payer, Status: status,
		Plan: models.BillingPlan{ID: "cplan_" + slug, Slug: slug}, SourceUpdatedAt: t0.Add(at), LastEventID: eventID}}
	userID, objectID := ch.IDs()
	ts := ch.Version().SourceTime
	ev := models.Event{EventID: eventID, Type: "subscriptionItem.updated", EventType: models.EventUpdated, UserID: userID,
		ObjectID: objectID, RawBody: []byte(`{}`), Source: models.SourceClerk, SourceTimestamp: &ts, ReceivedAt: t0,
		Status: models.StatusStored}
	if d, err := s.Deliver(context.Background(), ev, ch, now); err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("Deliver %s of %s = %+v, %v; want applied", eventID, id, d, err)
	}
}

// testBillingItemWrites: an item read back carries usersync's first
// write of it (CreatedAt) and its last (UpdatedAt), equal while only the
// write that created it has written it (what outbound webhooks tell a
// creation by); a stale state moves neither.
func testBillingItemWrites(t *testing.T, s repository.Store) {
	ctx := context.Background()
	payer := models.Payer{Kind: models.KindUser, ID: "user_iw"}
	first := time.Now().UTC().Truncate(time.Millisecond)
	second := first.Add(time.Minute)
	read := func() models.SubscriptionItem {
		t.Helper()
		it, err := s.Billing().Item(ctx, "csub_item_iw")
		if err != nil {
			t.Fatal(err)
		}
		items, err := s.Billing().Items(ctx, payer)
		if err != nil || len(items) != 1 || !items[0].CreatedAt.Equal(it.CreatedAt) || !items[0].UpdatedAt.Equal(it.UpdatedAt) {
			t.Fatalf("the payer's items = %+v, %v; want the item as Item reads it", items, err)
		}
		return it
	}
	deliverPlanItem(t, s, "csub_item_iw", payer, "pro", models.ItemActive, time.Second, "msg_iw1", first)
	if it := read(); !it.CreatedAt.Equal(first) || !it.UpdatedAt.Equal(first) {
		t.Errorf("a new item: createdAt %v, updatedAt %v; want both %v", it.CreatedAt, it.UpdatedAt, first)
	}
	deliverPlanItem(t, s, "csub_item_iw", payer, "pro", models.ItemCanceled, 2*time.Second, "msg_iw2", second)
	if it := read(); !it.CreatedAt.Equal(first) || !it.UpdatedAt.Equal(second) {
		t.Errorf("an updated item: createdAt %v, updatedAt %v; want %v, %v", it.CreatedAt, it.UpdatedAt, first, second)
	}
}

// testBillingPlanChanges walks the plans' change feed: the plans changed
// within [since, until], oldest change first, then the payer, a page at a
// time through the cursor (always set); a plan written after until is not
// served until it is inside; an item write that leaves a plan as it was
// does not move it, one that changes it moves its payer to the end; a
// malformed cursor is invalid.
func testBillingPlanChanges(t *testing.T, s repository.Store) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Millisecond)
	a := models.Payer{Kind: models.KindUser, ID: "user_pfa"}
	b := models.Payer{Kind: models.KindOrganization, ID: "org_pfb"}
	c := models.Payer{Kind: models.KindUser, ID: "user_pfc"}
	deliverPlanItem(t, s, "csub_item_pfa", a, "pro", models.ItemActive, 0, "msg_pf1", base)
	deliverPlanItem(t, s, "csub_item_pfb", b, "team", models.ItemActive, 0, "msg_pf2", base)
	deliverPlanItem(t, s, "csub_item_pfc", c, "pro", models.ItemActive, 0, "msg_pf3", base.Add(time.Millisecond))
	key := func(p models.StoredPlan) string { return string(p.Payer.Kind) + "/" + p.Payer.ID }
	walk := func(since, until time.Time, cursor string, limit int) (keys []string, next string) {
		t.Helper()
		for range 20 {
			page, err := s.Billing().PlanChanges(ctx, models.ChangeFilter{Since: since, Until: until, After: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if page.NextCursor == "" {
				t.Fatal("no NextCursor")
			}
			if len(page.Plans) > limit {
				t.Fatalf("%d plans on a page of %d", len(page.Plans), limit)
			}
			for _, p := range page.Plans {
				keys = append(keys, key(p))
				if p.Plan == nil || p.Status != models.PlanActive || p.UpdatedAt.Before(since) || p.UpdatedAt.After(until) {
					t.Errorf("plan %s = %+v; want an active plan changed within [%v, %v]", key(p), p, since, until)
				}
			}
			cursor = page.NextCursor
			if len(page.Plans) < limit {
				return keys, cursor
			}
		}
		t.Fatal("the walk does not end")
		return nil, ""
	}
	// The settle bound: c, changed after until, is not served yet.
	keys, cursor := walk(base.Add(-time.Microsecond), base, "", 1)
	same := map[string]bool{"user/user_pfa": true, "organization/org_pfb": true}
	if len(keys) != 2 || !same[keys[0]] || !same[keys[1]] || keys[0] == keys[1] {
		t.Errorf("walk to base = %v; want user_pfa and org_pfb (the same time), once each", keys)
	}
	// Polled from the cursor once until has moved on: c, and only c.
	if more, _ := walk(base.Add(-time.Microsecond), base.Add(time.Hour), cursor, 10); !slices.Equal(more, []string{"user/user_pfc"}) {
		t.Errorf("poll after the cursor = %v; want user_pfc alone", more)
	}
	if page, err := s.Billing().PlanChanges(ctx, models.ChangeFilter{Since: base, Until: base.Add(time.Hour), Limit: 10}); err != nil ||
		len(page.Plans) != 3 || page.Plans[2].Plan.Slug != "pro" || page.Plans[2].Payer != c || !page.Plans[2].UpdatedAt.Equal(base.Add(time.Millisecond)) {
		t.Errorf("one page of all = %+v, %v; want 3 plans, user_pfc's last, at base+1ms", page.Plans, err)
	}
	// A newer state of a's item that leaves its plan as it was: nothing
	// moves.
	deliverPlanItem(t, s, "csub_item_pfa", a, "pro", models.ItemActive, time.Second, "msg_pf4", base.Add(5*time.Millisecond))
	keys, _ = walk(base, base.Add(time.Hour), "", 10)
	if len(keys) != 3 || keys[2] != "user/user_pfc" {
		t.Errorf("after a write that leaves a plan = %v; want the same 3 plans, user_pfc last", keys)
	}
	// One that changes it: a moves to the end.
	deliverPlanItem(t, s, "csub_item_pfa", a, "team", models.ItemActive, 2*time.Second, "msg_pf5", base.Add(10*time.Millisecond))
	keys, _ = walk(base, base.Add(time.Hour), "", 2)
	if want := []string{"organization/org_pfb", "user/user_pfc", "user/user_pfa"}; !slices.Equal(keys, want) {
		t.Errorf("after a plan change = %v; want %v", keys, want)
	}
	if keys, _ := walk(base.Add(2*time.Millisecond), base.Add(time.Hour), "", 10); !slices.Equal(keys, []string{"user/user_pfa"}) {
		t.Errorf("since +2ms = %v; want user_pfa alone", keys)
	}
	for _, c := range []string{"nonsense", "1_user"} {
		if _, err := s.Billing().PlanChanges(ctx, models.ChangeFilter{Since: base, Until: base, After: c, Limit: 1}); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("bad cursor %q: %v, want ErrInvalid", c, err)
		}
	}
}
