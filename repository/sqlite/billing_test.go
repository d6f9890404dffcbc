package sqlite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestEventLog_BillingEventsAreFoundByTheirKindAndShortTypes: the event
// log filtered by a billing kind finds its events of every short type the
// kinds table gives it (active, ended, past_due…, not only created,
// updated and deleted), and filtered by such a type finds the events of
// each kind that has it, with a status too, page by page.
func TestEventLog_BillingEventsAreFoundByTheirKindAndShortTypes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, ev := range []struct{ id, typ string }{
		{"msg_b1", models.TypeSubscriptionItemEnded},
		{"msg_b2", models.TypeSubscriptionItemActive},
		{"msg_b3", models.TypeSubscriptionActive},
		{"msg_b4", models.TypeSubscriptionPastDueLegacy},
		{"msg_b5", models.TypeSubscriptionItemFreeTrialEnding},
		{"msg_b6", models.TypeUserCreated},
		{"msg_b7", models.TypePaymentAttemptUpdated},
	} {
		if _, _, err := s.Events().Record(ctx, models.Event{EventID: ev.id, Type: ev.typ, EventType: models.EventTypeOf(ev.typ),
			RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    models.EventFilter
		want []string
	}{
		{models.EventFilter{Kind: models.KindSubscriptionItem}, []string{"msg_b5", "msg_b2", "msg_b1"}},
		{models.EventFilter{EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Kind: models.KindSubscriptionItem, EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Kind: models.KindSubscription}, []string{"msg_b4", "msg_b3"}},
		{models.EventFilter{EventType: models.EventActive}, []string{"msg_b3", "msg_b2"}},
		{models.EventFilter{EventType: models.EventPastDue}, []string{"msg_b4"}},
		{models.EventFilter{EventType: models.EventUpdated}, []string{"msg_b7"}},
		{models.EventFilter{Status: models.StatusStored, Kind: models.KindSubscriptionItem}, []string{"msg_b5", "msg_b2", "msg_b1"}},
		{models.EventFilter{Status: models.StatusStored, EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Status: models.StatusFailed, Kind: models.KindSubscriptionItem}, nil},
	} {
		// A page of one at a time: the ranges are merged in the log's order.
		var got []string
		f := c.f
		f.Limit = 1
		for range 10 {
			page, err := s.Events().List(ctx, f)
			if err != nil {
				t.Fatalf("List(%+v): %v", f, err)
			}
			for _, ev := range page.Events {
				got = append(got, ev.EventID)
			}
			if page.NextCursor == "" {
				break
			}
			f.After = page.NextCursor
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}

// openStore opens a store in a new directory of t's, closed when t ends.
func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

var billingT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// itemState is a state of item id of payer at billingT0+at, by eventID.
func itemState(id string, payer models.Payer, status models.ItemStatus, slug, eventID string, at time.Duration) models.SubscriptionItemChange {
	return models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{ItemID: id, Payer: payer, Status: status,
		Plan: models.BillingPlan{ID: "cplan_" + slug, Slug: slug}, SourceUpdatedAt: billingT0.Add(at), LastEventID: eventID}}
}

// TestBilling_AnItemThatChangesPayerRecomputesBothPayersPlans: a newer
// state of an item with another payer moves the item: the new payer's
// plan is computed from it, and the old payer's from the items it has
// left (none: it has no plan any more).
func TestBilling_AnItemThatChangesPayerRecomputesBothPayersPlans(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	a, b := models.Payer{Kind: models.KindUser, ID: "user_a"}, models.Payer{Kind: models.KindOrganization, ID: "org_b"}
	for _, ch := range []models.SubscriptionItemChange{
		itemState("csub_item_1", a, models.ItemActive, "pro", "msg_1", 0),
		itemState("csub_item_2", b, models.ItemEnded, "free", "msg_2", 0),
		itemState("csub_item_1", b, models.ItemActive, "pro", "msg_3", time.Second),
	} {
		if _, err := s.apply(ctx, ch, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := s.Billing().Plan(ctx, a); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("the old payer's plan = %+v, %v; want none: it has no item left", p, err)
	}
	if p, err := s.Billing().Plan(ctx, b); err != nil || p.Status != models.PlanActive || p.ItemID != "csub_item_1" || p.Payer.ID != "org_b" {
		t.Errorf("the new payer's plan = %+v, %v; want the moved item's", p, err)
	}
	if items, err := s.Billing().Items(ctx, a); err != nil || len(items) != 0 {
		t.Errorf("the old payer's items = %+v, %v; want none", items, err)
	}
}

// TestBilling_APlansUpdatedAtMovesOnlyWhenThePlanChanges: an item write
// that leaves the plan as it was (a newer state of the item that changes
// nothing the plan shows) does not touch the stored plan; one that
// changes it moves its updatedAt.
func TestBilling_APlansUpdatedAtMovesOnlyWhenThePlanChanges(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	payer := models.Payer{Kind: models.KindUser, ID: "user_a"}
	first, second, third := billingT0.Add(time.Hour), billingT0.Add(2*time.Hour), billingT0.Add(3*time.Hour)
	ch := itemState("csub_item_1", payer, models.ItemActive, "pro", "msg_1", 0)
	if _, err := s.apply(ctx, ch, first); err != nil {
		t.Fatal(err)
	}
	ch = itemState("csub_item_1", payer, models.ItemActive, "pro", "msg_2", time.Second)
	ch.Interval = "month" // not part of the plan
	if o, err := s.apply(ctx, ch, second); err != nil || o != models.OutcomeApplied {
		t.Fatalf("apply = %s, %v", o, err)
	}
	if p, err := s.Billing().Plan(ctx, payer); err != nil || !p.UpdatedAt.Equal(first) {
		t.Errorf("plan after a write that leaves it = %+v, %v; want updatedAt %v", p, err, first)
	}
	if items, _ := s.Billing().Items(ctx, payer); len(items) != 1 || items[0].Interval != "month" {
		t.Errorf("items = %+v; want the item's newer state", items)
	}
	if _, err := s.apply(ctx, itemState("csub_item_1", payer, models.ItemCanceled, "pro", "msg_3", 2*time.Second), third); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Billing().Plan(ctx, payer); err != nil || !p.UpdatedAt.Equal(third) || p.Status != models.PlanCanceled {
		t.Errorf("plan after a write that changes it = %+v, %v; want canceled, updatedAt %v", p, err, third)
	}
}

// TestBilling_APayersPlanAndItemsReadItsNewestItemsUpToTheBound: a payer
// with more than models.MaxPayerItems items has its newest ones read, the
// newest first, and its plan computed from them.
func TestBilling_APayersPlanAndItemsReadItsNewestItemsUpToTheBound(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	payer := models.Payer{Kind: models.KindUser, ID: "user_many"}
	n := models.MaxPayerItems + 5
	err := s.write(ctx, func(t *wtx) error {
		var touched payers
		for i := range n {
			status := models.ItemEnded
			if i == n-1 {
				status = models.ItemActive
			}
			ch := itemState(fmt.Sprintf("csub_item_%04d", i), payer, status, fmt.Sprintf("p%d", i), fmt.Sprintf("msg_%04d", i),
				time.Duration(i)*time.Second)
			if _, err := writeItem(t, ch, time.Now(), &touched); err != nil {
				return err
			}
		}
		return recomputePlans(t, touched, time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	items, err := s.Billing().Items(ctx, payer)
	if err != nil || len(items) != models.MaxPayerItems || items[0].ItemID != fmt.Sprintf("csub_item_%04d", n-1) ||
		items[len(items)-1].ItemID != fmt.Sprintf("csub_item_%04d", n-models.MaxPayerItems) {
		t.Errorf("items: %d, %v; want the newest %d, the newest first", len(items), err, models.MaxPayerItems)
	}
	if p, err := s.Billing().Plan(ctx, payer); err != nil || p.Status != models.PlanActive || p.Plan.Slug != fmt.Sprintf("p%d", n-1) {
		t.Errorf("plan = %+v, %v; want the newest item's", p, err)
	}
}

// TestBilling_PaymentAttemptsPageNewestFirstByPaymentPayerOrAll: pages of
// payment attempts in each selection, the newest Clerk time first (the
// larger id first at one time), every attempt once; a cursor no page
// returned is invalid.
func TestBilling_PaymentAttemptsPageNewestFirstByPaymentPayerOrAll(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	a, b := models.Payer{Kind: models.KindUser, ID: "user_a"}, models.Payer{Kind: models.KindOrganization, ID: "org_b"}
	for i, at := range []struct {
		id, payment string
		payer       models.Payer
		at          time.Duration
	}{
		{"pa_1", "cpa_1", a, 0}, {"pa_2", "cpa_1", a, time.Second}, {"pa_3", "cpa_2", b, time.Second},
		{"pa_4", "cpa_2", b, 2 * time.Second}, {"pa_5", "cpa_3", a, 3 * time.Second},
	} {
		ch := models.PaymentAttemptChange{AttemptID: at.id, PaymentID: at.payment, EventID: fmt.Sprintf("msg_%d", i),
			SourceTime: billingT0.Add(at.at), Status: "paid", Payer: at.payer, Totals: []byte(`{"grand_total":{"amount":100}}`),
			SubscriptionItemIDs: []string{"csub_item_1"}}
		if _, err := s.apply(ctx, ch, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    models.PaymentAttemptFilter
		want []string
	}{
		{models.PaymentAttemptFilter{}, []string{"pa_5", "pa_4", "pa_3", "pa_2", "pa_1"}},
		{models.PaymentAttemptFilter{PaymentID: "cpa_1"}, []string{"pa_2", "pa_1"}},
		{models.PaymentAttemptFilter{PaymentID: "cpa_1", Payer: &b}, nil},
		{models.PaymentAttemptFilter{PaymentID: "cpa_2", Payer: &b}, []string{"pa_4", "pa_3"}},
		{models.PaymentAttemptFilter{Payer: &a}, []string{"pa_5", "pa_2", "pa_1"}},
	} {
		var got []string
		f := c.f
		f.Limit = 2
		for range 10 {
			page, err := s.Billing().PaymentAttempts(ctx, f)
			if err != nil {
				t.Fatalf("PaymentAttempts(%+v): %v", f, err)
			}
			for _, pa := range page.Attempts {
				got = append(got, pa.AttemptID)
			}
			if page.NextCursor == "" {
				break
			}
			f.After = page.NextCursor
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("PaymentAttempts(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	page, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{PaymentID: "cpa_3", Limit: 1})
	if err != nil || len(page.Attempts) != 1 || string(page.Attempts[0].Totals) != `{"grand_total":{"amount":100}}` ||
		!slices.Equal(page.Attempts[0].SubscriptionItemIDs, []string{"csub_item_1"}) || page.Attempts[0].Payer != a {
		t.Errorf("an attempt read back = %+v, %v", page.Attempts, err)
	}
	for _, bad := range []string{"x", "12", "_pa_1", "12_", "x_pa_1"} {
		if _, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{After: bad, Limit: 2}); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("cursor %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestBilling_APlanRoundTripsEveryField: the stored plan reads back as
// models.PlanOf of the payer's items says it, every field of it (the plan
// in force with its period, seats and amount, and the upcoming one).
func TestBilling_APlanRoundTripsEveryField(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	payer := models.Payer{Kind: models.KindOrganization, ID: "org_a", PayerID: "cpayer_a"}
	amount, seats, upSeats := int64(2500), int64(10), int64(3)
	end, start := billingT0.Add(30*24*time.Hour), billingT0.Add(30*24*time.Hour)
	current := itemState("csub_item_1", payer, models.ItemCanceled, "pro", "msg_1", time.Second)
	current.IsFreeTrial, current.PeriodEnd, current.Seats, current.SubscriptionID = true, &end, &seats, "csub_1"
	current.Plan = models.BillingPlan{ID: "cplan_pro", Slug: "pro", Name: "Pro", Amount: &amount, Currency: "USD", IsRecurring: true}
	next := itemState("csub_item_2", payer, models.ItemUpcoming, "free", "msg_2", 2*time.Second)
	next.PeriodStart, next.Seats = &start, &upSeats
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	for _, ch := range []models.SubscriptionItemChange{current, next} {
		if _, err := s.apply(ctx, ch, now); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Billing().Plan(ctx, payer)
	if err != nil {
		t.Fatal(err)
	}
	want := models.PlanOf([]models.SubscriptionItem{current.SubscriptionItem, next.SubscriptionItem})
	if !reflect.DeepEqual(got.PayerPlan, want) || want.Upcoming == nil || !want.CanceledAtPeriodEnd {
		t.Errorf("plan read back = %+v\nwant %+v", got.PayerPlan, want)
	}
	items, err := s.Billing().Items(ctx, payer)
	wantItem := current.SubscriptionItem
	wantItem.CreatedAt, wantItem.UpdatedAt = now, now // usersync's writes of it
	if err != nil || len(items) != 2 || !reflect.DeepEqual(items[1], wantItem) {
		t.Errorf("items read back = %+v, %v\nwant the second %+v", items, err, wantItem)
	}
}
