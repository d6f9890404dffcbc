package models_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// billingNow is the server's clock of the billing tests: after every
// fixture's times.
var billingNow = time.UnixMilli(1770000000000)

func billingFixture(name string) string { return filepath.Join("billing", name) }

// decodeBilling decodes body as a webhook body and its data as a billing
// event of id eventID.
func decodeBilling(t *testing.T, body []byte, eventID string) models.Change {
	t.Helper()
	ch, err := models.DecodeBilling(decode(t, body), eventID, billingNow)
	if err != nil {
		t.Fatalf("DecodeBilling(%s): %v", eventID, err)
	}
	return ch
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

func msp(v int64) *time.Time { t := ms(v); return &t }

func i64(v int64) *int64 { return &v }

const (
	fixturePayer  = "user_34D368EufHwugfYh4yyGNEheM0S"
	fixturePayerC = "cpayer_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fixtureSub    = "csub_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	proItem       = "csub_item_3AoldProPlanItem00000000000"
	teamItem      = "csub_item_3AnewTeamPlanItem0000000000"
	freeItem      = "csub_item_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	teamPlanID    = "cplan_teamplan000000000000000000000"
)

var userPayer = models.Payer{Kind: models.KindUser, ID: fixturePayer, PayerID: fixturePayerC}

func TestDecodeBilling_ClerksFixtures(t *testing.T) {
	teamPlan := models.BillingPlan{ID: teamPlanID, Slug: "team-plan", Name: "Team Plan", Amount: i64(5000), Currency: "USD", IsRecurring: true}
	proPlan := models.BillingPlan{ID: "cplan_proplan000000000000000000000", Slug: "pro-plan", Name: "Pro Plan", Amount: i64(2000), Currency: "USD", IsRecurring: true}
	tests := []struct {
		file string
		want models.SubscriptionItem
	}{
		{"plan-change.1.subscriptionItem.ended.json", models.SubscriptionItem{
			ItemID: proItem, SubscriptionID: fixtureSub, Payer: userPayer, Status: models.ItemEnded,
			PeriodStart: msp(1761408000000), PeriodEnd: msp(1764000000000), Interval: "month", Plan: proPlan, Seats: i64(5),
			SourceCreatedAt: msp(1761408000000), SourceUpdatedAt: ms(1764000000000), LastEventID: "msg_1",
		}},
		{"plan-change.2.subscriptionItem.active.json", models.SubscriptionItem{
			ItemID: teamItem, SubscriptionID: fixtureSub, Payer: userPayer, Status: models.ItemActive,
			PeriodStart: msp(1764000000000), PeriodEnd: msp(1766592000000), Interval: "month", Plan: teamPlan, Seats: i64(5),
			SourceCreatedAt: msp(1764000000040), SourceUpdatedAt: ms(1764000000053), LastEventID: "msg_1",
		}},
		{"subscriptionItem.canceled.json", models.SubscriptionItem{
			ItemID: teamItem, SubscriptionID: fixtureSub, Payer: userPayer, Status: models.ItemCanceled,
			PeriodStart: msp(1764000000000), PeriodEnd: msp(1766592000000), Interval: "month", Plan: teamPlan, Seats: i64(5),
			SourceCreatedAt: msp(1764000000040), SourceUpdatedAt: ms(1764432000000), LastEventID: "msg_1",
		}},
		// The default free plan: no period_end.
		{"upstream.subscriptionItem.active.free.json", models.SubscriptionItem{
			ItemID: freeItem, SubscriptionID: fixtureSub, Payer: userPayer, Status: models.ItemActive,
			PeriodStart: msp(1716883200000), Interval: "month",
			Plan:  models.BillingPlan{ID: "cplan_2g7np7Hrk0SN6kj5EDMLDaKNL0S", Slug: "free-plan", Name: "Free Plan", Amount: i64(0), Currency: "USD"},
			Seats: i64(5), SourceCreatedAt: msp(1716883200000), SourceUpdatedAt: ms(1716883200000), LastEventID: "msg_1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ch := decodeBilling(t, fixture(t, billingFixture(tc.file)), "msg_1")
			item, ok := ch.(models.SubscriptionItemChange)
			if !ok {
				t.Fatalf("DecodeBilling = %T, want a SubscriptionItemChange", ch)
			}
			if !equal(item.SubscriptionItem, tc.want) {
				t.Errorf("item = %s\nwant   %s", show(item.SubscriptionItem), show(tc.want))
			}
			if u, o := ch.IDs(); u != fixturePayer || o != tc.want.ItemID || ch.Kind() != models.KindSubscriptionItem {
				t.Errorf("IDs() = %q, %q; Kind() = %q", u, o, ch.Kind())
			}
			if v := ch.Version(); !v.SourceTime.Equal(tc.want.SourceUpdatedAt) || v.EventID != "msg_1" || v.Deleted {
				t.Errorf("Version() = %+v, want data.updated_at and the event", v)
			}
		})
	}
}

// A subscription event's items are states of the items, each at its own
// updated_at, with the subscription's payer and id filled in: inside a
// subscription an item has neither.
func TestSubscriptionChange_CarriesItsItemsAsItemChanges(t *testing.T) {
	ch := decodeBilling(t, fixture(t, billingFixture("upstream.subscription.created.json")), "msg_s")
	sub, ok := ch.(models.SubscriptionChange)
	if !ok {
		t.Fatalf("DecodeBilling = %T, want a SubscriptionChange", ch)
	}
	if sub.SubscriptionID != fixtureSub || sub.Status != "active" || sub.Payer != userPayer ||
		!sub.SourceTime.Equal(ms(1716883200000)) || sub.EventID != "msg_s" || !equal(sub.ActiveAt, msp(1716883200000)) ||
		sub.CanceledAt != nil || sub.EndedAt != nil || sub.PastDueAt != nil ||
		sub.LatestPaymentID != "cpa_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || sub.PaymentSourceID != "cps_2g7np7Hrk0SN6kj5EDMLDaKNL0S" {
		t.Errorf("subscription = %s", show(sub))
	}
	if u, o := sub.IDs(); u != fixturePayer || o != fixtureSub || sub.Kind() != models.KindSubscription {
		t.Errorf("IDs() = %q, %q; Kind() = %q", u, o, sub.Kind())
	}
	want := models.SubscriptionItem{
		ItemID: freeItem, SubscriptionID: fixtureSub, Payer: userPayer, Status: models.ItemActive,
		PeriodStart: msp(1716883200000), PeriodEnd: msp(1719561600000), Interval: "month",
		Plan:  models.BillingPlan{ID: "cplan_2g7np7Hrk0SN6kj5EDMLDaKNL0S", Slug: "pro-plan", Name: "Pro Plan", Amount: i64(2000), Currency: "USD", IsRecurring: true},
		Seats: i64(5), SourceCreatedAt: msp(1716883200000), SourceUpdatedAt: ms(1716883200000), LastEventID: "msg_s",
	}
	if len(sub.Items) != 1 || !equal(sub.Items[0].SubscriptionItem, want) {
		t.Fatalf("items = %s\nwant    [%s]", show(sub.Items), show(want))
	}
	if u, o := sub.Items[0].IDs(); u != fixturePayer || o != freeItem {
		t.Errorf("item IDs() = %q, %q", u, o)
	}

	// Each item at its own updated_at, whatever the subscription's.
	body := edit(t, billingFixture("upstream.subscription.created.json"), func(_, d map[string]any) {
		d["updated_at"] = 1764000000100
		items := d["items"].([]any)
		old := items[0].(map[string]any)
		old["status"], old["updated_at"] = "ended", 1764000000000
		items = append(items, map[string]any{
			"id": teamItem, "status": "active", "updated_at": 1764000000053, "period_end": 1766592000000,
			"plan": map[string]any{"id": teamPlanID, "slug": "team-plan"}, "subscription_id": fixtureSub,
		})
		d["items"] = items
	})
	sub = decodeBilling(t, body, "msg_s2").(models.SubscriptionChange)
	if len(sub.Items) != 2 || !sub.Items[0].SourceUpdatedAt.Equal(ms(1764000000000)) || !sub.Items[1].SourceUpdatedAt.Equal(ms(1764000000053)) ||
		sub.Items[1].Payer != userPayer || sub.Items[1].SubscriptionID != fixtureSub || sub.Items[1].Version().EventID != "msg_s2" {
		t.Errorf("items = %s", show(sub.Items))
	}
}

func TestPaymentAttemptChange_KeepsWhatAnAttemptSays(t *testing.T) {
	body := []byte(`{"type":"paymentAttempt.updated","timestamp":1764000001000,"data":{
		"object":"commerce_payment_attempt","id":"cpayatt_2x9","payment_id":"cpa_2x9","status":"failed",
		"failed_at":1764000000900,"failed_reason":{"code":"card_declined","decline_code":"insufficient_funds"},
		"charge_type":"recurring","totals":{"grand_total":{"amount":5000,"currency":"USD"}},
		"payer":{"id":"cpayer_1","user_id":"","organization_id":"org_2x9"},
		"payment_source":{"last4":"4242"},
		"subscription_items":[{"id":"csub_item_2x9","status":"past_due"}],
		"created_at":1764000000000,"updated_at":1764000000900}}`)
	ch := decodeBilling(t, body, "msg_p")
	a, ok := ch.(models.PaymentAttemptChange)
	if !ok {
		t.Fatalf("DecodeBilling = %T, want a PaymentAttemptChange", ch)
	}
	want := models.PaymentAttemptChange{
		AttemptID: "cpayatt_2x9", PaymentID: "cpa_2x9", EventID: "msg_p", SourceTime: ms(1764000000900),
		Status: "failed", ChargeType: "recurring",
		Payer:    models.Payer{Kind: models.KindOrganization, ID: "org_2x9", PayerID: "cpayer_1"},
		FailedAt: msp(1764000000900), FailedCode: "card_declined", FailedDeclineCode: "insufficient_funds",
		Totals:              []byte(`{"grand_total":{"amount":5000,"currency":"USD"}}`),
		SubscriptionItemIDs: []string{"csub_item_2x9"}, SourceCreatedAt: msp(1764000000000),
	}
	if !equal(a, want) {
		t.Errorf("attempt = %s\nwant      %s", show(a), show(want))
	}
	// An organization pays: the event names no user.
	if u, o := a.IDs(); u != "" || o != "cpayatt_2x9" || a.Kind() != models.KindPaymentAttempt {
		t.Errorf("IDs() = %q, %q; Kind() = %q", u, o, a.Kind())
	}
}

// billingTypes is Clerk's catalog of billing types (and the older names of
// the pastDue ones), each with the kind and short type usersync gives it.
var billingTypes = []struct {
	typ   string
	kind  models.Kind
	short models.EventType
}{
	{"subscription.created", models.KindSubscription, models.EventCreated},
	{"subscription.updated", models.KindSubscription, models.EventUpdated},
	{"subscription.active", models.KindSubscription, models.EventActive},
	{"subscription.pastDue", models.KindSubscription, models.EventPastDue},
	{"subscription.past_due", models.KindSubscription, models.EventPastDue},
	{"subscriptionItem.created", models.KindSubscriptionItem, models.EventCreated},
	{"subscriptionItem.updated", models.KindSubscriptionItem, models.EventUpdated},
	{"subscriptionItem.active", models.KindSubscriptionItem, models.EventActive},
	{"subscriptionItem.canceled", models.KindSubscriptionItem, models.EventCanceled},
	{"subscriptionItem.upcoming", models.KindSubscriptionItem, models.EventUpcoming},
	{"subscriptionItem.ended", models.KindSubscriptionItem, models.EventEnded},
	{"subscriptionItem.abandoned", models.KindSubscriptionItem, models.EventAbandoned},
	{"subscriptionItem.incomplete", models.KindSubscriptionItem, models.EventIncomplete},
	{"subscriptionItem.pastDue", models.KindSubscriptionItem, models.EventPastDue},
	{"subscriptionItem.past_due", models.KindSubscriptionItem, models.EventPastDue},
	{"subscriptionItem.freeTrialEnding", models.KindSubscriptionItem, models.EventFreeTrialEnding},
	{"paymentAttempt.created", models.KindPaymentAttempt, models.EventCreated},
	{"paymentAttempt.updated", models.KindPaymentAttempt, models.EventUpdated},
}

// minimalBilling is the smallest body of type typ that usersync accepts.
func minimalBilling(typ string) string {
	item := `{"id":"csub_item_1","status":"active","plan":{"id":"cplan_1","slug":"pro"},` +
		`"payer":{"user_id":"user_1","organization_id":""},"updated_at":1760000000000}`
	data := item
	switch {
	case strings.HasPrefix(typ, "subscription."):
		data = `{"id":"csub_1","status":"active","payer":{"user_id":"user_1","organization_id":""},"items":[` +
			`{"id":"csub_item_1","status":"active","plan":{"id":"cplan_1","slug":"pro"},"updated_at":1760000000000}],` +
			`"updated_at":1760000000000}`
	case strings.HasPrefix(typ, "paymentAttempt."):
		data = `{"id":"cpayatt_1","payment_id":"cpa_1","status":"pending","payer":{"user_id":"user_1","organization_id":""},` +
			`"updated_at":1760000000000}`
	}
	return fmt.Sprintf(`{"type":%q,"timestamp":1760000000000,"data":%s}`, typ, data)
}

// Every type of Clerk's catalog decodes, to its kind's change, and the
// kinds' rows say the same kind and short type; no row has a type the
// catalog has not.
func TestDecodeBilling_EveryCatalogType(t *testing.T) {
	rows := map[string]models.TypeSpec{}
	kindOf := map[string]models.Kind{}
	for _, spec := range models.BillingKindSpecs() {
		for _, ts := range spec.Types {
			if _, dup := rows[ts.Type]; dup {
				t.Errorf("type %s is in two rows", ts.Type)
			}
			rows[ts.Type], kindOf[ts.Type] = ts, spec.Kind
		}
	}
	for _, tc := range billingTypes {
		t.Run(tc.typ, func(t *testing.T) {
			ch := decodeBilling(t, []byte(minimalBilling(tc.typ)), "msg_1")
			if ch.Kind() != tc.kind {
				t.Errorf("Kind() = %q, want %q", ch.Kind(), tc.kind)
			}
			if row, ok := rows[tc.typ]; !ok || row.Change != tc.short || kindOf[tc.typ] != tc.kind {
				t.Errorf("row %+v of kind %q, want short type %q of kind %q", row, kindOf[tc.typ], tc.short, tc.kind)
			}
			if !models.IsBillingType(tc.typ) || !models.IsClerkEventType(tc.typ) {
				t.Errorf("IsBillingType = %v, in ClerkEventTypes = %v; want both", models.IsBillingType(tc.typ), models.IsClerkEventType(tc.typ))
			}
			delete(rows, tc.typ)
		})
	}
	for typ := range rows {
		t.Errorf("row type %s is not in Clerk's catalog", typ)
	}
}

// The older names of the pastDue types are the same events: same kind,
// same short type, same state; a short type's Clerk type is the current
// name.
func TestDecodeBilling_PastDueUnderItsOlderName(t *testing.T) {
	for _, pair := range [][2]string{
		{models.TypeSubscriptionItemPastDue, models.TypeSubscriptionItemPastDueLegacy},
		{models.TypeSubscriptionPastDue, models.TypeSubscriptionPastDueLegacy},
	} {
		now := decodeBilling(t, []byte(minimalBilling(pair[0])), "msg_1")
		old := decodeBilling(t, []byte(minimalBilling(pair[1])), "msg_1")
		if !equal(now, old) {
			t.Errorf("%s = %s, %s = %s; want the same state", pair[0], show(now), pair[1], show(old))
		}
	}
	for _, spec := range models.BillingKindSpecs() {
		if typ := spec.TypeOf(models.EventPastDue); spec.Kind != models.KindPaymentAttempt && !strings.HasSuffix(typ, ".pastDue") {
			t.Errorf("%s: TypeOf(past_due) = %q, want the current name", spec.Kind, typ)
		}
	}
}

// The payer is whichever of user_id and organization_id is an id, the
// other being "" or null; data.object says nothing.
func TestDecodeBilling_PayerIsTheIdThatIsSet(t *testing.T) {
	set := func(user, org any, object string) []byte {
		return edit(t, billingFixture("plan-change.2.subscriptionItem.active.json"), func(_, d map[string]any) {
			p := d["payer"].(map[string]any)
			p["user_id"], p["organization_id"] = user, org
			d["object"], p["object"] = object, object
		})
	}
	org := "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	for _, tc := range []struct {
		name      string
		body      []byte
		want      models.Payer
		wantField string // "": valid
	}{
		{"a user, organization_id empty", set(fixturePayer, "", "subscription_item"), userPayer, ""},
		{"a user, organization_id null", set(fixturePayer, nil, "commerce_subscription_item"), userPayer, ""},
		{"an organization, user_id empty", set("", org, "subscription_item"),
			models.Payer{Kind: models.KindOrganization, ID: org, PayerID: fixturePayerC}, ""},
		{"an organization, data.object says user", set(nil, org, "user"),
			models.Payer{Kind: models.KindOrganization, ID: org, PayerID: fixturePayerC}, ""},
		{"a user, data.object says organization", set(fixturePayer, "", "organization"), userPayer, ""},
		{"both", set(fixturePayer, org, "subscription_item"), models.Payer{}, "data.payer.organization_id"},
		{"neither", set("", nil, "subscription_item"), models.Payer{}, "data.payer.user_id"},
		{"a user id that is not one", set("org_1", "", "subscription_item"), models.Payer{}, "data.payer.user_id"},
		{"an organization id that is not one", set("", "user_1", "subscription_item"), models.Payer{}, "data.payer.organization_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := models.DecodeBilling(decode(t, tc.body), "msg_1", billingNow)
			if tc.wantField != "" {
				wantInvalid(t, err, tc.wantField)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := ch.(models.SubscriptionItemChange).Payer; p != tc.want {
				t.Errorf("payer = %+v, want %+v", p, tc.want)
			}
		})
	}
}

// wantInvalid fails unless err wraps ErrInvalid and names field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var pe *models.PublicError
	if !errors.Is(err, models.ErrInvalid) || !errors.As(err, &pe) || pe.Field != field {
		t.Errorf("error = %v (field %q), want ErrInvalid in %s", err, fieldOf(err), field)
	}
}

func fieldOf(err error) string {
	var pe *models.PublicError
	if errors.As(err, &pe) {
		return pe.Field
	}
	return ""
}

func TestDecodeBilling_RefusesWhatCanNeverApply(t *testing.T) {
	item := billingFixture("plan-change.2.subscriptionItem.active.json")
	sub := billingFixture("upstream.subscription.created.json")
	firstItem := func(d map[string]any) map[string]any { return d["items"].([]any)[0].(map[string]any) }
	many := func(n int) []any {
		items := make([]any, n)
		for i := range items {
			items[i] = map[string]any{"id": fmt.Sprintf("csub_item_%d", i), "status": "ended", "updated_at": 1, "plan": map[string]any{"id": "cplan_1", "slug": "x"}}
		}
		return items
	}
	attempt := func(edit func(d map[string]any)) []byte {
		d := map[string]any{"id": "cpayatt_1", "payment_id": "cpa_1", "status": "paid", "updated_at": 1764000000000,
			"payer": map[string]any{"user_id": "user_1", "organization_id": ""}}
		edit(d)
		return mustJSON(t, map[string]any{"type": "paymentAttempt.updated", "data": d})
	}
	tests := []struct {
		name, file string
		fn         func(env, data map[string]any)
		body       []byte // instead of file and fn
		field      string
	}{
		{name: "an item with a subscription's id", file: item, fn: func(_, d map[string]any) { d["id"] = fixtureSub }, field: "data.id"},
		{name: "an item without updated_at", file: item, fn: func(_, d map[string]any) { delete(d, "updated_at") }, field: "data.updated_at"},
		{name: "an item's updated_at a string", file: item, fn: func(_, d map[string]any) { d["updated_at"] = "1764000000053" }, field: "data.updated_at"},
		{name: "an item from the year 3000", file: item, fn: func(_, d map[string]any) { d["updated_at"] = 32503680000000 }, field: "data.updated_at"},
		{name: "a status Clerk does not have", file: item, fn: func(_, d map[string]any) { d["status"] = "paused" }, field: "data.status"},
		{name: "no plan", file: item, fn: func(_, d map[string]any) { delete(d, "plan") }, field: "data.plan"},
		{name: "a plan without slug", file: item, fn: func(_, d map[string]any) { delete(d["plan"].(map[string]any), "slug") }, field: "data.plan.slug"},
		{name: "a blank slug", file: item, fn: func(_, d map[string]any) { d["plan"].(map[string]any)["slug"] = "  " }, field: "data.plan.slug"},
		{name: "a slug over 256 characters", file: item, fn: func(_, d map[string]any) { d["plan"].(map[string]any)["slug"] = strings.Repeat("s", 257) }, field: "data.plan.slug"},
		{name: "a plan id of another object", file: item, fn: func(_, d map[string]any) { d["plan"].(map[string]any)["id"] = "plan_1" }, field: "data.plan.id"},
		{name: "plan_id not the plan's", file: item, fn: func(_, d map[string]any) { d["plan_id"] = "cplan_other" }, field: "data.plan_id"},
		{name: "a currency over 32 bytes", file: item, fn: func(_, d map[string]any) { d["plan"].(map[string]any)["currency"] = strings.Repeat("U", 33) }, field: "data.plan.currency"},
		{name: "an interval over 32 bytes", file: item, fn: func(_, d map[string]any) { d["interval"] = strings.Repeat("m", 33) }, field: "data.interval"},
		{name: "a period_end that is not a time", file: item, fn: func(_, d map[string]any) { d["period_end"] = -1 }, field: "data.period_end"},
		{name: "a standalone item without payer", file: item, fn: func(_, d map[string]any) { delete(d, "payer") }, field: "data.payer"},
		{name: "a subscription_id of an item", file: item, fn: func(_, d map[string]any) { d["subscription_id"] = teamItem }, field: "data.subscription_id"},
		{name: "a subscription with an item's id", file: sub, fn: func(_, d map[string]any) { d["id"] = teamItem }, field: "data.id"},
		{name: "a subscription without payer", file: sub, fn: func(_, d map[string]any) { delete(d, "payer") }, field: "data.payer"},
		{name: "payer_id not the payer's", file: sub, fn: func(_, d map[string]any) { d["payer_id"] = "cpayer_other" }, field: "data.payer_id"},
		{name: "an item listed twice", file: sub, fn: func(_, d map[string]any) { d["items"] = append(d["items"].([]any), firstItem(d)) }, field: "data.items[].id"},
		{name: "an item of another subscription", file: sub, fn: func(_, d map[string]any) { firstItem(d)["subscription_id"] = "csub_other" }, field: "data.items[].subscription_id"},
		{name: "an item of another payer", file: sub, fn: func(_, d map[string]any) {
			firstItem(d)["payer"] = map[string]any{"user_id": "user_other", "organization_id": ""}
		}, field: "data.items[].payer"},
		{name: "an item's invalid status", file: sub, fn: func(_, d map[string]any) { firstItem(d)["status"] = "" }, field: "data.items[].status"},
		{name: "an item from the year 3000", file: sub, fn: func(_, d map[string]any) { firstItem(d)["updated_at"] = 32503680000000 }, field: "data.items[].updated_at"},
		{name: "501 items", file: sub, fn: func(_, d map[string]any) { d["items"] = many(models.MaxSubscriptionItems + 1) }, field: "data.items"},
		{name: "a latest_payment_id of another object", file: sub, fn: func(_, d map[string]any) { d["latest_payment_id"] = "cps_1" }, field: "data.latest_payment_id"},
		{name: "an attempt without payment_id", body: attempt(func(d map[string]any) { delete(d, "payment_id") }), field: "data.payment_id"},
		{name: "an attempt id that is not an id", body: attempt(func(d map[string]any) { d["id"] = "pa 1" }), field: "data.id"},
		{name: "an attempt without payer", body: attempt(func(d map[string]any) { delete(d, "payer") }), field: "data.payer"},
		{name: "totals not an object", body: attempt(func(d map[string]any) { d["totals"] = []any{1} }), field: "data.totals"},
		{name: "totals over 8 KiB", body: attempt(func(d map[string]any) { d["totals"] = map[string]any{"x": strings.Repeat("x", 9000)} }), field: "data.totals"},
		{name: "a failure code over 256 characters", body: attempt(func(d map[string]any) {
			d["failed_reason"] = map[string]any{"code": strings.Repeat("c", 257)}
		}), field: "data.failed_reason.code"},
		{name: "a key twice", body: []byte(strings.Replace(minimalBilling("subscriptionItem.active"), `"status":"active"`, `"status":"active","status":"ended"`, 1)), field: "data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == nil {
				body = edit(t, tc.file, tc.fn)
			}
			_, err := models.DecodeBilling(decode(t, body), "msg_1", billingNow)
			wantInvalid(t, err, tc.field)
		})
	}
}

func TestDecodeBilling_BoundsWhatItKeeps(t *testing.T) {
	body := edit(t, billingFixture("plan-change.2.subscriptionItem.active.json"), func(_, d map[string]any) {
		d["plan"].(map[string]any)["name"] = "  " + strings.Repeat("é", models.MaxName+10)
		d["seats"] = map[string]any{"quantity": nil}
	})
	it := decodeBilling(t, body, "msg_1").(models.SubscriptionItemChange)
	if n := len([]rune(it.Plan.Name)); n != models.MaxName || it.Seats != nil {
		t.Errorf("plan name of %d characters, seats %v; want the name cut to %d, seats unlimited", n, it.Seats, models.MaxName)
	}
}

func TestIsBillingType_KnownOrNot(t *testing.T) {
	for typ, want := range map[string]bool{
		"subscriptionItem.active": true, "subscriptionItem.somethingNew": true, "subscription.deleted": true,
		"paymentAttempt.refunded": true, "subscription.": false, "subscriptions.created": false,
		"subscription": false, "user.created": false, "invoice.paid": false, "billing.subscription.updated": false,
		"organizationMembership.created": false,
	} {
		if got := models.IsBillingType(typ); got != want {
			t.Errorf("IsBillingType(%q) = %v, want %v", typ, got, want)
		}
	}
	// A billing type usersync does not know decodes to nothing.
	for _, typ := range []string{"subscription.deleted", "subscriptionItem.somethingNew", "user.created"} {
		_, err := models.DecodeBilling(decode(t, []byte(minimalBilling(typ))), "msg_1", billingNow)
		wantInvalid(t, err, "type")
	}
}

func TestDecode_AnUnknownBillingTypeIsAnIgnoredChangeOfItsPrefixsKind(t *testing.T) {
	for typ, kind := range map[string]models.Kind{
		"subscription.deleted": models.KindSubscription, "subscriptionItem.somethingNew": models.KindSubscriptionItem,
		"paymentAttempt.refunded": models.KindPaymentAttempt,
	} {
		ev := decode(t, []byte(minimalBilling(typ)))
		if !ev.IsStored() || ev.Kind() != kind || ev.EventType() != models.EventOther {
			t.Errorf("%s: stored %v, kind %q, short type %q; want stored, %s, other", typ, ev.IsStored(), ev.Kind(), ev.EventType(), kind)
		}
		ch, err := ev.Decode("msg_1", billingNow)
		ig, ok := ch.(models.IgnoredChange)
		if err != nil || !ok || ig.Kind() != kind || ig.Version().EventID != "msg_1" {
			t.Fatalf("%s: Decode = %#v, %v; want an IgnoredChange of %s", typ, ch, err, kind)
		}
		if userID, _ := ig.IDs(); userID != "user_1" || !ig.SourceTime.Equal(time.UnixMilli(1760000000000)) {
			t.Errorf("%s: user %q, time %v; want the payer and data.updated_at", typ, userID, ig.SourceTime)
		}
	}
	// Data that is no billing object is ignored all the same, at the
	// time it was received; a known type's is refused.
	ev := decode(t, []byte(`{"type":"subscription.renamed","data":[1,2]}`))
	if ch, err := ev.Decode("msg_2", billingNow); err != nil || !ch.Version().SourceTime.Equal(billingNow) {
		t.Errorf("Decode = %#v, %v; want ignored at the time received", ch, err)
	}
	if _, err := decode(t, []byte(`{"type":"subscription.created","data":[1,2]}`)).Decode("msg_3", billingNow); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a known type's bad data: %v; want invalid", err)
	}
	if ev := decode(t, []byte(`{"type":"session.created","data":{}}`)); !ev.IsStored() || ev.EventType() != models.EventSession {
		t.Errorf("session.created: stored %v as %q; want stored as a session event of its user", ev.IsStored(), ev.EventType())
	}
}

// FuzzBilling checks that the billing decoder never panics, refuses only
// with ErrInvalid, and that what it accepts keeps its promises: ids of
// their kinds, a payer that is a user or an organization, items that
// carry their subscription's payer and id, times within the server's
// clock. Its seeds are the bodies in testdata/billing and
// testdata/fuzz/FuzzBilling.
func FuzzBilling(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "billing", "*.json"))
	for _, file := range files {
		f.Add(fixture(f, billingFixture(filepath.Base(file))))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := models.DecodeEvent(body)
		if err != nil {
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("DecodeEvent error %v does not wrap ErrInvalid", err)
			}
			return
		}
		ch, err := models.DecodeBilling(ev, "msg_fuzz", billingNow)
		if err != nil {
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("DecodeBilling error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if !models.IsBillingType(ev.Type) {
			t.Fatalf("type %q decoded but is not a billing type", ev.Type)
		}
		checkVersion := func(v models.Version) {
			if v.SourceTime.UnixMilli() <= 0 || v.SourceTime.After(billingNow.Add(models.MaxFutureSkew)) || v.EventID != "msg_fuzz" || v.Deleted {
				t.Errorf("version %+v", v)
			}
		}
		checkPayer := func(p models.Payer, userID string) {
			ok := p.Kind == models.KindUser && models.KindUser.IsID(p.ID) && userID == p.ID ||
				p.Kind == models.KindOrganization && models.KindOrganization.IsID(p.ID) && userID == ""
			if !ok {
				t.Errorf("payer %+v, userID %q", p, userID)
			}
		}
		checkItem := func(it models.SubscriptionItemChange) {
			userID, id := it.IDs()
			checkPayer(it.Payer, userID)
			checkVersion(it.Version())
			if !strings.HasPrefix(id, "csub_item_") || it.Plan.Slug == "" || !strings.HasPrefix(it.Plan.ID, "cplan_") ||
				!slices.Contains([]models.ItemStatus{models.ItemActive, models.ItemPastDue, models.ItemCanceled, models.ItemUpcoming,
					models.ItemEnded, models.ItemAbandoned, models.ItemIncomplete}, it.Status) {
				t.Errorf("item %+v", it)
			}
		}
		switch c := ch.(type) {
		case models.SubscriptionItemChange:
			checkItem(c)
			_ = models.PlanOf([]models.SubscriptionItem{c.SubscriptionItem})
		case models.SubscriptionChange:
			userID, id := c.IDs()
			checkPayer(c.Payer, userID)
			checkVersion(c.Version())
			if !strings.HasPrefix(id, "csub_") || strings.HasPrefix(id, "csub_item_") || len(c.Items) > models.MaxSubscriptionItems {
				t.Errorf("subscription %+v", c)
			}
			var items []models.SubscriptionItem
			seen := map[string]bool{}
			for _, it := range c.Items {
				checkItem(it)
				if it.Payer != c.Payer || it.SubscriptionID != c.SubscriptionID || seen[it.ItemID] {
					t.Errorf("item %+v of subscription %s", it, c.SubscriptionID)
				}
				seen[it.ItemID] = true
				items = append(items, it.SubscriptionItem)
			}
			if p := models.PlanOf(items); len(items) > 0 && p.Payer.ID != c.Payer.ID {
				t.Errorf("PlanOf = %+v, want the subscription's payer", p)
			}
		case models.PaymentAttemptChange:
			userID, id := c.IDs()
			checkPayer(c.Payer, userID)
			checkVersion(c.Version())
			if id == "" || !strings.HasPrefix(c.PaymentID, "cpa_") || len(c.Totals) > models.MaxBillingObjectBytes {
				t.Errorf("attempt %+v", c)
			}
		default:
			t.Fatalf("DecodeBilling = %T", ch)
		}
	})
}

// equal reports whether a and b are the same value, through pointers.
func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// show writes v as JSON, for messages: pointers as what they point to.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A negative amount in a signed Clerk event is kept as Clerk sent it:
// refusing the event would lose the item's state for good, as Clerk sends
// no better one. Clerk's schema gives amounts no lower bound; a plan's
// amount is never read to decide a plan, and an attempt's totals (where
// credits and prorations are) are kept whole.
func TestBilling_ANegativeAmountIsKeptNotRefused(t *testing.T) {
	ch := decodeBilling(t, fixture(t, billingFixture("subscriptionItem.active.negative-amount.json")), "msg_n")
	item, ok := ch.(models.SubscriptionItemChange)
	if !ok {
		t.Fatalf("DecodeBilling = %T, want a SubscriptionItemChange", ch)
	}
	if a := item.Plan.Amount; a == nil || *a != -5000 {
		t.Fatalf("plan amount = %v, want -5000 as Clerk sent it", show(a))
	}
	// A negative seat count, likewise.
	negSeats := strings.Replace(string(fixture(t, billingFixture("subscriptionItem.active.negative-amount.json"))),
		`"quantity": 5`, `"quantity": -2`, 1)
	if it, ok := decodeBilling(t, []byte(negSeats), "msg_s").(models.SubscriptionItemChange); !ok || it.Seats == nil || *it.Seats != -2 {
		t.Errorf("an item of -2 seats = %+v; want it kept as sent", it)
	}
	p := models.PlanOf([]models.SubscriptionItem{item.SubscriptionItem})
	if p.Status != models.PlanActive || p.Plan == nil || p.Plan.Slug != "team-plan" || p.Plan.Amount == nil || *p.Plan.Amount != -5000 {
		t.Errorf("plan = %s, want team-plan active with the amount as sent", show(p))
	}

	body := []byte(`{"type":"paymentAttempt.updated","timestamp":1764000001000,"data":{
		"id":"cpayatt_2x9","payment_id":"cpa_2x9","status":"paid","paid_at":1764000000900,
		"totals":{"grand_total":{"amount":-300,"currency":"USD"},"credits":{"total":{"amount":-800}}},
		"payer":{"user_id":"user_2x9"},"updated_at":1764000000900}}`)
	a, ok := decodeBilling(t, body, "msg_a").(models.PaymentAttemptChange)
	if !ok {
		t.Fatal("not a PaymentAttemptChange")
	}
	if want := `{"grand_total":{"amount":-300,"currency":"USD"},"credits":{"total":{"amount":-800}}}`; string(a.Totals) != want {
		t.Errorf("totals = %s, want %s", a.Totals, want)
	}
}

// TestBilling_AnExpiredItemIsKeptNotRefused: Clerk's schema names an
// item status expired beside ended; a signed event with it is applied
// (read as ended), not refused, which would lose the item's state.
func TestBilling_AnExpiredItemIsKeptNotRefused(t *testing.T) {
	body := fixture(t, billingFixture("subscriptionItem.canceled.json"))
	expired := strings.Replace(string(body), `"status": "canceled"`, `"status": "expired"`, 1)
	if expired == string(body) {
		t.Fatal("the fixture has no item status to change")
	}
	item, ok := decodeBilling(t, []byte(expired), "msg_x").(models.SubscriptionItemChange)
	if !ok || item.Status != models.ItemExpired {
		t.Fatalf("an expired item = %+v, want it decoded, expired", item)
	}
	if p := models.PlanOf([]models.SubscriptionItem{item.SubscriptionItem}); p.Status != models.PlanPending {
		t.Errorf("plan of an expired item alone = %s, want pending, as of an ended one", show(p))
	}
}
