package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// planFeedPage reads one page of the plans' change feed with key.
func (h *harness) planFeedPage(key, since, cursor string, limit int) (data []map[string]any, next string) {
	h.t.Helper()
	q := url.Values{"updatedSince": {since}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	r := h.get("/v1/billing/plans?"+q.Encode(), key)
	if r.Code != http.StatusOK {
		h.t.Fatalf("plans' feed page: %s", r)
	}
	body := r.JSON(h.t)
	next, ok := body["nextCursor"].(string)
	if !ok || next == "" {
		h.t.Fatalf("plans' feed page without nextCursor: %s", r)
	}
	for _, p := range body["data"].([]any) {
		data = append(data, p.(map[string]any))
	}
	return data, next
}

// payerOfFeed is the "kind/id" of a plans' feed item.
func payerOfFeed(p map[string]any) string {
	payer := p["payer"].(map[string]any)
	return payer["kind"].(string) + "/" + payer["id"].(string)
}

// deliverPlanOf delivers the team plan's active item for payer (a user's
// or an organization's id), as an item of its own, in status at Clerk
// time at.
func (h *harness) deliverPlanOf(t *testing.T, payer, status string, at int64) {
	t.Helper()
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", func(d map[string]any) {
		d["id"], d["status"], d["updated_at"] = "csub_item_"+strings.ReplaceAll(payer, "_", ""), status, at
		p := d["payer"].(map[string]any)
		p["user_id"], p["organization_id"] = "", ""
		if strings.HasPrefix(payer, "org_") {
			p["organization_id"] = payer
		} else {
			p["user_id"] = payer
		}
	}))
}

// TestBillingPlans_ChangeFeedPagesEachChangedPlanOnceOldestFirst: the
// plans' change feed, read with the API key a page at a time, lists each
// payer whose plan changed once, oldest change first, with its plan as
// its billing read shows it; caught up, it keeps its cursor; a plan
// change moves its payer after the cursor, alone.
func TestBillingPlans_ChangeFeedPagesEachChangedPlanOnceOldestFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = feedSettle })
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	at := time.Now().Add(-time.Hour).UnixMilli()
	payers := []string{"user_pf1", "org_pf2", "user_pf3", "user_pf4", "org_pf5"}
	for _, p := range payers {
		h.deliverPlanOf(t, p, "active", at)
	}
	settled()
	var (
		seen   []string
		cursor string
		last   string
	)
	for range 10 {
		data, next := h.planFeedPage(testAPIKey, since, cursor, 2)
		for _, p := range data {
			seen = append(seen, payerOfFeed(p))
			plan, _ := p["plan"].(map[string]any)
			if plan == nil || plan["status"] != "active" || plan["plan"].(map[string]any)["slug"] != "team-plan" || plan["updatedAt"] != p["updatedAt"] {
				t.Errorf("item %v; want the active team-plan, as its billing read shows it", p)
			}
			if u := p["updatedAt"].(string); u < last {
				t.Errorf("updatedAt %s after %s: not oldest first", u, last)
			} else {
				last = u
			}
		}
		cursor = next
		if len(data) < 2 {
			break
		}
	}
	want := []string{"user/user_pf1", "organization/org_pf2", "user/user_pf3", "user/user_pf4", "organization/org_pf5"}
	got := slices.Clone(seen)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("feed = %v; want each of %v once", seen, want)
	}
	if data, next := h.planFeedPage(testAPIKey, since, cursor, 2); len(data) != 0 || next != cursor {
		t.Errorf("caught up = %v, %q; want nothing and the same cursor %q", data, next, cursor)
	}
	h.deliverPlanOf(t, "user_pf3", "canceled", at+1)
	settled()
	data, _ := h.planFeedPage(testAPIKey, since, cursor, 10)
	if len(data) != 1 || payerOfFeed(data[0]) != "user/user_pf3" || data[0]["plan"].(map[string]any)["status"] != "canceled" {
		t.Errorf("poll after a plan change = %v; want user_pf3 alone, canceled", data)
	}
	if data, _ := h.planFeedPage(testAdminKey, since, "", 10); len(data) != 5 || payerOfFeed(data[4]) != "user/user_pf3" {
		t.Errorf("feed with the admin key = %v; want the 5 plans, user_pf3's last", data)
	}
}

// TestBillingPlans_ChangeFeedShowsAPendingPlanEndedAfterTheGrace: a plan
// left pending reads in the feed as its billing read shows it: pending
// within the grace, ended after it.
func TestBillingPlans_ChangeFeedShowsAPendingPlanEndedAfterTheGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		grace  time.Duration
		status string
	}{{time.Hour, "pending"}, {time.Nanosecond, "ended"}} {
		h := newHarness(t, func(o *harnessOptions) { o.settle, o.grace = feedSettle, tc.grace })
		since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
		h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "", nil))
		settled()
		data, _ := h.planFeedPage(testAPIKey, since, "", 10)
		if len(data) != 1 || payerOfFeed(data[0]) != "user/"+billingUser || data[0]["plan"].(map[string]any)["status"] != tc.status {
			t.Errorf("grace %v: feed = %v; want %s's plan %s", tc.grace, data, billingUser, tc.status)
		}
	}
}

// TestBillingPlans_ChangeFeedHoldsBackChangesYoungerThanTheSettleTime.
func TestBillingPlans_ChangeFeedHoldsBackChangesYoungerThanTheSettleTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = time.Hour })
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	h.deliverPlanOf(t, "user_young", "active", time.Now().UnixMilli())
	if data, _ := h.planFeedPage(testAPIKey, since, "", 10); len(data) != 0 {
		t.Errorf("the plans' feed served a change younger than its settle time: %v", data)
	}
}

// TestBillingPlans_ChangeFeedRejectsBadParametersNamingThem: each bad
// parameter is a 400 invalid_request whose message names it; no key, or
// a wrong one, is refused.
func TestBillingPlans_ChangeFeedRejectsBadParametersNamingThem(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct{ query, param string }{
		{"", "updatedSince"},
		{"updatedSince=yesterday", "updatedSince"},
		{"updatedSince=2026-01-02", "updatedSince"},
		{"updatedSince=" + strings.Repeat("9", 65), "updatedSince"},
		{"updatedSince=2026-01-02T03:04:05Z&limit=0", "limit"},
		{"updatedSince=2026-01-02T03:04:05Z&limit=201", "limit"},
		{"updatedSince=2026-01-02T03:04:05Z&limit=x", "limit"},
		{"updatedSince=2026-01-02T03:04:05Z&cursor=nonsense", "cursor"},
		{"updatedSince=2026-01-02T03:04:05Z&cursor=1_user", "cursor"},
		{"updatedSince=2026-01-02T03:04:05Z&cursor=" + strings.Repeat("1", 1025), "cursor"},
	} {
		r := h.get("/v1/billing/plans?"+tc.query, testAPIKey)
		e, _ := r.JSON(t)["error"].(map[string]any)
		if r.Code != http.StatusBadRequest || e["code"] != "invalid_request" || !strings.Contains(fmt.Sprint(e["message"]), tc.param) {
			t.Errorf("GET /v1/billing/plans?%s = %s, want 400 invalid_request naming %s", tc.query, r, tc.param)
		}
	}
	for _, key := range []string{"", "wrong-key"} {
		if r := h.get("/v1/billing/plans?updatedSince=2026-01-02T03:04:05Z", key); r.Code != http.StatusUnauthorized {
			t.Errorf("GET /v1/billing/plans with key %q = %s, want 401", key, r)
		}
	}
}
