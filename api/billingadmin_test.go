package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// attemptBody is a paymentAttempt event of attempt id, payment payment and
// payer (a user's or an organization's id), at Clerk time at.
func attemptBody(typ, id, payment, payer string, at int64) []byte {
	user, org := payer, ""
	if payer[:4] == "org_" {
		user, org = "", payer
	}
	return []byte(fmt.Sprintf(`{"type":%q,"timestamp":%d,"data":{"id":%q,"payment_id":%q,"status":"paid",`+
		`"payer":{"user_id":%q,"organization_id":%q},"totals":{"grand_total":{"amount":2000}},"subscription_items":[{"id":"csub_item_1"}],"updated_at":%d}}`,
		typ, at, id, payment, user, org, at))
}

// attemptIDs pages through path with limit 2 and returns the ids listed,
// in order.
func (h *harness) attemptIDs(path string) []string {
	h.t.Helper()
	return h.pageIDs("/v1/billing/payment-attempts", path)
}

// pageIDs pages through path, a list route base with or without a
// query, with limit 2 and returns the ids listed, in order.
func (h *harness) pageIDs(base, path string) []string {
	h.t.Helper()
	var ids []string
	cursor := ""
	for range 20 {
		sep := "?"
		if len(path) > len(base) {
			sep = "&"
		}
		url := path + sep + "limit=2"
		if cursor != "" {
			url += "&cursor=" + cursor
		}
		r := h.get(url, testAdminKey)
		if r.Code != http.StatusOK {
			h.t.Fatalf("%s: %s", url, r)
		}
		b := r.JSON(h.t)
		for _, a := range b["data"].([]any) {
			ids = append(ids, a.(map[string]any)["id"].(string))
		}
		next, _ := b["nextCursor"].(string)
		if next == "" {
			return ids
		}
		cursor = next
	}
	h.t.Fatalf("%s: more than 20 pages", path)
	return nil
}

func TestBillingAdmin_PaymentAttemptsPageNewestFirstByPaymentPayerOrAll(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	const org = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	for i, a := range []struct{ id, payment, payer string }{
		{"pa_1", "cpa_A", billingUser}, {"pa_2", "cpa_A", billingUser}, {"pa_3", "cpa_B", billingUser},
		{"pa_4", "cpa_C", org}, {"pa_5", "cpa_A", org},
	} {
		h.mustDeliver(newID(), attemptBody("paymentAttempt.created", a.id, a.payment, a.payer, at+int64(i)))
	}
	// A newer state of pa_1 moves it first.
	h.mustDeliver(newID(), attemptBody("paymentAttempt.updated", "pa_1", "cpa_A", billingUser, at+10))
	for path, want := range map[string]string{
		"/v1/billing/payment-attempts":                                                       "[pa_1 pa_5 pa_4 pa_3 pa_2]",
		"/v1/billing/payment-attempts?paymentId=cpa_A":                                       "[pa_1 pa_5 pa_2]",
		"/v1/billing/payment-attempts?payerKind=user&payerId=" + billingUser:                 "[pa_1 pa_3 pa_2]",
		"/v1/billing/payment-attempts?payerKind=organization&payerId=" + org:                 "[pa_5 pa_4]",
		"/v1/billing/payment-attempts?paymentId=cpa_A&payerKind=organization&payerId=" + org: "[pa_5]",
		"/v1/billing/payment-attempts?paymentId=cpa_Z":                                       "[]",
		"/v1/billing/payment-attempts?payerKind=user&payerId=user_nobody":                    "[]",
	} {
		if got := fmt.Sprint(h.attemptIDs(path)); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	r := h.get("/v1/billing/payment-attempts?paymentId=cpa_B", testAdminKey).JSON(t)
	a := r["data"].([]any)[0].(map[string]any)
	if a["paymentId"] != "cpa_B" || a["status"] != "paid" || a["payer"].(map[string]any)["id"] != billingUser ||
		fmt.Sprint(a["totals"]) != "map[grand_total:map[amount:2000]]" || fmt.Sprint(a["subscriptionItemIds"]) != "[csub_item_1]" ||
		a["sourceUpdatedAt"] == nil || r["nextCursor"] != nil {
		t.Errorf("attempt = %v, nextCursor %v", a, r["nextCursor"])
	}
}

func TestBillingAdmin_PaymentAttemptsRefuseWhatIsNotBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for path, want := range map[string]int{
		"/v1/billing/payment-attempts?limit=0":                                       http.StatusBadRequest,
		"/v1/billing/payment-attempts?limit=201":                                     http.StatusBadRequest,
		"/v1/billing/payment-attempts?limit=200":                                     http.StatusOK,
		"/v1/billing/payment-attempts?paymentId=pay_1":                               http.StatusBadRequest,
		"/v1/billing/payment-attempts?payerId=" + billingUser:                        http.StatusBadRequest,
		"/v1/billing/payment-attempts?payerKind=user":                                http.StatusBadRequest,
		"/v1/billing/payment-attempts?payerKind=team&payerId=" + billingUser:         http.StatusBadRequest,
		"/v1/billing/payment-attempts?payerKind=organization&payerId=" + billingUser: http.StatusBadRequest,
		"/v1/billing/payment-attempts?cursor=nonsense":                               http.StatusBadRequest,
		"/v1/billing/payment-attempts?status=paid":                                   http.StatusBadRequest,
	} {
		if r := h.get(path, testAdminKey); r.Code != want {
			t.Errorf("%s = %s, want %d", path, r, want)
		}
	}
	if r := h.get("/v1/billing/payment-attempts", testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("with an API key = %s, want 403", r)
	}
	if r := h.get("/v1/billing/payment-attempts", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("with no key = %s, want 401", r)
	}
}

func TestBillingAdmin_ASubscriptionReadsAsItsNewestState(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const sub = "csub_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	path := "/v1/billing/subscriptions/" + sub
	if r := h.get(path, testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("before any event = %s, want 404", r)
	}
	id := newID()
	h.mustDeliver(id, billingBody(t, "upstream.subscription.created.json", "", nil))
	h.mustDeliver(newID(), billingBody(t, "upstream.subscription.created.json", "subscription.pastDue", func(d map[string]any) {
		d["status"], d["updated_at"] = "past_due", d["updated_at"].(float64)-1 // older: stale
	}))
	r := h.get(path, testAdminKey)
	if r.Code != http.StatusOK {
		t.Fatalf("subscription = %s", r)
	}
	s := r.JSON(t)
	if s["id"] != sub || s["status"] != "active" || s["lastEventId"] != id || s["latestPaymentId"] != "cpa_2g7np7Hrk0SN6kj5EDMLDaKNL0S" ||
		s["payer"].(map[string]any)["kind"] != "user" || s["payer"].(map[string]any)["id"] != billingUser ||
		s["sourceUpdatedAt"] != time.UnixMilli(1716883200000).UTC().Format("2006-01-02T15:04:05.000Z07:00") {
		t.Errorf("subscription = %v; want the created event's state", s)
	}
	for p, want := range map[string]int{
		"/v1/billing/subscriptions/csub_item_1":         http.StatusBadRequest,
		"/v1/billing/subscriptions/sub_1":               http.StatusBadRequest,
		"/v1/billing/subscriptions/csub_unknown":        http.StatusNotFound,
		"/v1/billing/subscriptions/csub_" + longID(200): http.StatusBadRequest,
	} {
		if r := h.get(p, testAdminKey); r.Code != want {
			t.Errorf("%s = %s, want %d", p, r, want)
		}
	}
	if r := h.get(path, testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("with an API key = %s, want 403", r)
	}
}

func longID(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a'
	}
	return string(b)
}

// subscriptionBody is a subscription event of subscription id, payer (a
// user's or an organization's id) and status, at Clerk time at, without
// items.
func subscriptionBody(id, payer, status string, at int64) []byte {
	user, org := payer, ""
	if payer[:4] == "org_" {
		user, org = "", payer
	}
	return []byte(fmt.Sprintf(`{"type":"subscription.updated","timestamp":%d,"data":{"id":%q,"status":%q,`+
		`"payer":{"user_id":%q,"organization_id":%q},"items":[],"latest_payment_id":"cpa_1","updated_at":%d}}`,
		at, id, status, user, org, at))
}

func TestBillingAdmin_SubscriptionsPageNewestFirstByPayerStatusOrAll(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	at := time.Now().Add(-time.Hour).UnixMilli()
	const org = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	for i, s := range []struct{ id, payer, status string }{
		{"csub_1", billingUser, "active"}, {"csub_2", billingUser, "past_due"}, {"csub_3", org, "active"},
		{"csub_4", org, "ended"}, {"csub_5", billingUser, "active"},
	} {
		h.mustDeliver(newID(), subscriptionBody(s.id, s.payer, s.status, at+int64(i)))
	}
	// A newer state of csub_1 moves it first, in its new status.
	h.mustDeliver(newID(), subscriptionBody("csub_1", billingUser, "past_due", at+10))
	const list = "/v1/billing/subscriptions"
	for path, want := range map[string]string{
		list: "[csub_1 csub_5 csub_4 csub_3 csub_2]",
		list + "?payerKind=user&payerId=" + billingUser:                 "[csub_1 csub_5 csub_2]",
		list + "?payerKind=organization&payerId=" + org:                 "[csub_4 csub_3]",
		list + "?status=active":                                         "[csub_5 csub_3]",
		list + "?status=past_due":                                       "[csub_1 csub_2]",
		list + "?status=past_due&payerKind=user&payerId=" + billingUser: "[csub_1 csub_2]",
		list + "?status=active&payerKind=organization&payerId=" + org:   "[csub_3]",
		list + "?status=canceled":                                       "[]",
		list + "?payerKind=user&payerId=user_nobody":                    "[]",
	} {
		if got := fmt.Sprint(h.pageIDs(list, path)); got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	r := h.get(list+"?payerKind=organization&payerId="+org+"&limit=1", testAdminKey).JSON(t)
	s := r["data"].([]any)[0].(map[string]any)
	if s["id"] != "csub_4" || s["status"] != "ended" || s["payer"].(map[string]any)["kind"] != "organization" ||
		s["payer"].(map[string]any)["id"] != org || s["latestPaymentId"] != "cpa_1" ||
		s["sourceUpdatedAt"] != time.UnixMilli(at+3).UTC().Format("2006-01-02T15:04:05.000Z07:00") || r["nextCursor"] == nil {
		t.Errorf("subscription = %v, nextCursor %v", s, r["nextCursor"])
	}
}

func TestBillingAdmin_SubscriptionsRefuseWhatIsNotBoundedNamingTheParameter(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const list = "/v1/billing/subscriptions"
	for path, param := range map[string]string{
		list + "?limit=0":                                       "limit",
		list + "?limit=201":                                     "limit",
		list + "?limit=many":                                    "limit",
		list + "?payerId=" + billingUser:                        "payerKind",
		list + "?payerKind=user":                                "payerId",
		list + "?payerKind=team&payerId=" + billingUser:         "payerKind",
		list + "?payerKind=organization&payerId=" + billingUser: "payerId",
		list + "?cursor=nonsense":                               "cursor",
		list + "?status=Active":                                 "status",
		list + "?status=past-due":                               "status",
		list + "?status=" + strings.Repeat("a", 33):             "status",
	} {
		r := h.get(path, testAdminKey)
		if r.Code != http.StatusBadRequest {
			t.Errorf("%s = %s, want 400", path, r)
			continue
		}
		if msg, _ := r.JSON(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, param) {
			t.Errorf("%s: message %q names no %s", path, msg, param)
		}
	}
	for _, path := range []string{list + "?limit=200", list + "?status=" + strings.Repeat("a", 32), list + "?status=past_due"} {
		if r := h.get(path, testAdminKey); r.Code != http.StatusOK {
			t.Errorf("%s = %s, want 200", path, r)
		}
	}
	if r := h.get(list, testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("with an API key = %s, want 403", r)
	}
	if r := h.get(list, ""); r.Code != http.StatusUnauthorized {
		t.Errorf("with no key = %s, want 401", r)
	}
}
