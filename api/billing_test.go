package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// The payer of the billing fixtures (models/testdata/billing).
const billingUser = "user_34D368EufHwugfYh4yyGNEheM0S"

// billingBody is the billing fixture file as an event of type typ, with
// fn's changes to its data.
func billingBody(t *testing.T, file, typ string, fn func(d map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, "billing/"+file), &env); err != nil {
		t.Fatal(err)
	}
	if typ != "" {
		env["type"] = typ
	}
	if fn != nil {
		fn(env["data"].(map[string]any))
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// billingOf reads the billing of path (a user's or an organization's).
func (h *harness) billingOf(path string) (int, map[string]any) {
	h.t.Helper()
	r := h.get(path, testAPIKey)
	if r.Code != http.StatusOK {
		return r.Code, nil
	}
	return r.Code, r.JSON(h.t)
}

func planOf(b map[string]any) map[string]any {
	p, _ := b["plan"].(map[string]any)
	return p
}

func slugOf(b map[string]any) string {
	p := planOf(b)
	if p == nil {
		return ""
	}
	bp, _ := p["plan"].(map[string]any)
	s, _ := bp["slug"].(string)
	return s
}

func TestBilling_APlanChangeReadsAsTheNewPlanInEitherOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"1", "2"}, {"2", "1"}} {
		t.Run(order[0]+order[1], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
			files := map[string]string{"1": "plan-change.1.subscriptionItem.ended.json", "2": "plan-change.2.subscriptionItem.active.json"}
			for i, o := range order {
				h.mustDeliver(newID(), billingBody(t, files[o], "", nil))
				code, b := h.billingOf("/v1/users/" + billingUser + "/billing")
				if code != http.StatusOK {
					t.Fatalf("billing: %d", code)
				}
				// Between the two: the new plan if it came first, the old
				// one, pending, if the old item's end came first.
				want, status := "team-plan", "active"
				if i == 0 && o == "1" {
					want, status = "pro-plan", "pending"
				}
				if slugOf(b) != want || planOf(b)["status"] != status {
					t.Errorf("after %v: plan %v; want %s %s", order[:i+1], planOf(b), want, status)
				}
				if i == 1 && len(b["items"].([]any)) != 2 {
					t.Errorf("items = %v, want both", b["items"])
				}
			}
		})
	}
}

func TestBilling_AKnownPayerWithoutBillingHasANullPlanAndAnUnknownOneIsNotFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_nobilling", UpdatedAt: t0}))
	code, b := h.billingOf("/v1/users/user_nobilling/billing")
	if code != http.StatusOK || b["plan"] != nil || len(b["items"].([]any)) != 0 || b["payer"].(map[string]any)["inCopy"] != true {
		t.Errorf("billing of a user without = %d %v; want a null plan, no items", code, b)
	}
	if code, _ := h.billingOf("/v1/users/user_unknown/billing"); code != http.StatusNotFound {
		t.Errorf("billing of an unknown user: %d, want 404", code)
	}
	if code, _ := h.billingOf("/v1/organizations/org_unknown/billing"); code != http.StatusNotFound {
		t.Errorf("billing of an unknown organization: %d, want 404", code)
	}
}

// TestBilling_APayerKnownOnlyByItsBillingAnswersItsPlanMarkedAsSuch: a
// payer whose subscription item came before its user.created (or
// organization.created) has its plan read, with payer.inCopy false, until
// the copy holds it.
func TestBilling_APayerKnownOnlyByItsBillingAnswersItsPlanMarkedAsSuch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const org = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", nil))
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", func(d map[string]any) {
		d["id"] = "csub_item_3AorgTeamPlanItem0000000000"
		d["payer"].(map[string]any)["user_id"] = ""
		d["payer"].(map[string]any)["organization_id"] = org
	}))
	for _, path := range []string{"/v1/users/" + billingUser + "/billing", "/v1/organizations/" + org + "/billing"} {
		code, b := h.billingOf(path)
		if code != http.StatusOK || slugOf(b) != "team-plan" || planOf(b)["status"] != "active" || len(b["items"].([]any)) != 1 {
			t.Fatalf("%s of a payer known only by its billing = %d %v; want its plan", path, code, b)
		}
		if in, ok := b["payer"].(map[string]any)["inCopy"].(bool); !ok || in {
			t.Errorf("%s: payer %v, want inCopy false", path, b["payer"])
		}
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
	h.mustDeliver(newID(), fixture(t, "openapi.organization.created.json"))
	for _, path := range []string{"/v1/users/" + billingUser + "/billing", "/v1/organizations/" + org + "/billing"} {
		code, b := h.billingOf(path)
		if code != http.StatusOK || slugOf(b) != "team-plan" || b["payer"].(map[string]any)["inCopy"] != true {
			t.Errorf("%s once the payer is in the copy = %d %v; want its plan, inCopy true", path, code, b)
		}
	}
}

func TestBilling_ADeletedPayersPlanReadsAsEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", nil))
	h.mustDeliver(newID(), userBody(t, "user.deleted", clerkUser{ID: billingUser, UpdatedAt: t0 + 1}))
	code, b := h.billingOf("/v1/users/" + billingUser + "/billing")
	if code != http.StatusOK || planOf(b)["status"] != "ended" || slugOf(b) != "team-plan" {
		t.Errorf("billing of a deleted user = %d %v; want its last plan, ended", code, b)
	}
}

func TestBilling_APendingPlanReadsAsEndedAfterTheGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		grace  time.Duration
		status string
	}{{time.Hour, "pending"}, {time.Nanosecond, "ended"}} {
		h := newHarness(t, func(o *harnessOptions) { o.grace = tc.grace })
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
		h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "", nil))
		_, b := h.billingOf("/v1/users/" + billingUser + "/billing")
		if planOf(b)["status"] != tc.status || slugOf(b) != "pro-plan" {
			t.Errorf("grace %v: plan %v; want pro-plan %s", tc.grace, planOf(b), tc.status)
		}
	}
}

func TestBilling_AnOrganizationsPlanIsItsItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "openapi.organization.created.json"))
	const org = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", func(d map[string]any) {
		d["payer"].(map[string]any)["user_id"] = ""
		d["payer"].(map[string]any)["organization_id"] = org
	}))
	code, b := h.billingOf("/v1/organizations/" + org + "/billing")
	if code != http.StatusOK || slugOf(b) != "team-plan" || b["payer"].(map[string]any)["kind"] != "organization" {
		t.Errorf("organization's billing = %d %v", code, b)
	}
	if _, u := h.billingOf("/v1/users/" + billingUser + "/billing"); u != nil && u["plan"] != nil {
		t.Errorf("the user has the organization's plan: %v", u)
	}
}

// TestBilling_EveryCatalogTypeIsStoredAndApplied sends every billing type
// Clerk documents, and the older past_due names, signed through the router:
// each is stored and processed.
func TestBilling_EveryCatalogTypeIsStoredAndApplied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	item := func(typ, status string) []byte {
		at++
		return billingBody(t, "plan-change.2.subscriptionItem.active.json", typ, func(d map[string]any) {
			d["status"], d["updated_at"] = status, at
		})
	}
	sub := func(typ string) []byte {
		at++
		return billingBody(t, "upstream.subscription.created.json", typ, func(d map[string]any) { d["updated_at"] = at })
	}
	attempt := func(typ, status string) []byte {
		at++
		return []byte(fmt.Sprintf(`{"type":%q,"timestamp":%d,"data":{"id":"pa_1","payment_id":"cpa_1","status":%q,`+
			`"payer":{"user_id":%q,"organization_id":""},"updated_at":%d}}`, typ, at, status, billingUser, at))
	}
	bodies := map[string][]byte{
		models.TypeSubscriptionCreated: sub(models.TypeSubscriptionCreated), models.TypeSubscriptionUpdated: sub(models.TypeSubscriptionUpdated),
		models.TypeSubscriptionActive: sub(models.TypeSubscriptionActive), models.TypeSubscriptionPastDue: sub(models.TypeSubscriptionPastDue),
		models.TypeSubscriptionPastDueLegacy:       sub(models.TypeSubscriptionPastDueLegacy),
		models.TypeSubscriptionItemCreated:         item(models.TypeSubscriptionItemCreated, "incomplete"),
		models.TypeSubscriptionItemUpdated:         item(models.TypeSubscriptionItemUpdated, "active"),
		models.TypeSubscriptionItemActive:          item(models.TypeSubscriptionItemActive, "active"),
		models.TypeSubscriptionItemCanceled:        item(models.TypeSubscriptionItemCanceled, "canceled"),
		models.TypeSubscriptionItemUpcoming:        item(models.TypeSubscriptionItemUpcoming, "upcoming"),
		models.TypeSubscriptionItemEnded:           item(models.TypeSubscriptionItemEnded, "ended"),
		models.TypeSubscriptionItemAbandoned:       item(models.TypeSubscriptionItemAbandoned, "abandoned"),
		models.TypeSubscriptionItemIncomplete:      item(models.TypeSubscriptionItemIncomplete, "incomplete"),
		models.TypeSubscriptionItemPastDue:         item(models.TypeSubscriptionItemPastDue, "past_due"),
		models.TypeSubscriptionItemPastDueLegacy:   item(models.TypeSubscriptionItemPastDueLegacy, "past_due"),
		models.TypeSubscriptionItemFreeTrialEnding: item(models.TypeSubscriptionItemFreeTrialEnding, "active"),
		models.TypePaymentAttemptCreated:           attempt(models.TypePaymentAttemptCreated, "pending"),
		models.TypePaymentAttemptUpdated:           attempt(models.TypePaymentAttemptUpdated, "paid"),
	}
	for _, k := range []models.Kind{models.KindSubscription, models.KindSubscriptionItem, models.KindPaymentAttempt} {
		for _, typ := range models.TypesOf(k) {
			body, ok := bodies[typ]
			if !ok {
				t.Errorf("%s: no body in the test", typ)
				continue
			}
			r := h.mustDeliver(newID(), body)
			if r["status"] != "processed" || r["outcome"] != "applied" {
				t.Errorf("%s: %v; want processed, applied", typ, r)
			}
		}
	}
}

// TestBilling_AnUnknownBillingTypeIsStoredAndProcessedAsIgnored sends a
// billing type usersync does not know, signed through the router: it is
// stored, processed at once with the outcome ignored, of its prefix's kind
// and short type other, applies nothing, and is counted under bounded
// labels only.
func TestBilling_AnUnknownBillingTypeIsStoredAndProcessedAsIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
	id := newID()
	body := billingBody(t, "plan-change.2.subscriptionItem.active.json", "subscriptionItem.somethingNew", nil)
	r := h.mustDeliver(id, body)
	if r["status"] != "processed" || r["outcome"] != "ignored" || r["duplicate"] != false {
		t.Errorf("delivery = %v; want processed, ignored", r)
	}
	if again := h.mustDeliver(id, body); again["duplicate"] != true || again["outcome"] != "ignored" {
		t.Errorf("second delivery = %v; want a duplicate, ignored", again)
	}
	// A body that is no billing object at all is ignored the same way.
	if r := h.mustDeliver(newID(), []byte(`{"type":"paymentAttempt.refunded","data":"not an object"}`)); r["outcome"] != "ignored" {
		t.Errorf("paymentAttempt.refunded = %v; want ignored", r)
	}
	if code, b := h.billingOf("/v1/users/" + billingUser + "/billing"); code != http.StatusOK || b["plan"] != nil || len(b["items"].([]any)) != 0 {
		t.Errorf("billing after an ignored item event = %d %v; want nothing applied", code, b)
	}
	evs := h.get("/v1/events?userId="+billingUser+"&limit=10", testAdminKey).JSON(t)["data"].([]any)
	var found bool
	for _, e := range evs {
		e := e.(map[string]any)
		if e["eventId"] != id {
			continue
		}
		found = true
		if e["status"] != "processed" || e["outcome"] != "ignored" || e["eventType"] != "other" ||
			e["type"] != "subscriptionItem.somethingNew" || e["objectId"] == nil || e["processedAt"] == nil {
			t.Errorf("stored event = %v; want processed, ignored, eventType other, its object", e)
		}
	}
	if !found {
		t.Errorf("the ignored event is not among the user's: %v", evs)
	}
	st := h.get("/v1/events/stats", testAdminKey).JSON(t)
	if o := st["outcome"].(map[string]any); o["ignored"] != float64(2) {
		t.Errorf("stats outcome = %v; want ignored 2", o)
	}
	if s := st["status"].(map[string]any); s["stored"] != float64(0) || s["failed"] != float64(0) {
		t.Errorf("stats status = %v; want none stored or failed", s)
	}
	m := string(h.get("/metrics", "").Body)
	for series, want := range map[string]float64{
		`usersync_webhook_events_total{kind="subscription_item",result="processed"}`: 1,
		`usersync_webhook_events_total{kind="subscription_item",result="duplicate"}`: 1,
		`usersync_webhook_events_total{kind="payment_attempt",result="processed"}`:   1,
		`usersync_webhook_ignored_total{type="other"}`:                               0,
	} {
		if v := metricValue(t, m, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
}

// TestBilling_AnUnknownBillingTypeIsStoredOnlyWhenItIsShort: a type is
// kept in the event log (and its indexes) only when it has the length of
// a Clerk type; a longer one is acknowledged and counted as ignored, and
// stored nowhere.
func TestBilling_AnUnknownBillingTypeIsStoredOnlyWhenItIsShort(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	long := "subscriptionItem." + strings.Repeat("a", 5000)
	body := billingBody(t, "plan-change.2.subscriptionItem.active.json", long, nil)
	r := h.mustDeliver(newID(), body)
	if r["status"] != "ignored" {
		t.Errorf("a %d-byte billing type = %v; want ignored, not stored", len(long), r)
	}
	st := h.get("/v1/events/stats", testAdminKey).JSON(t)
	if s := st["status"].(map[string]any); s["processed"] != float64(0) || s["stored"] != float64(0) {
		t.Errorf("stats = %v; want nothing stored", st)
	}
}
