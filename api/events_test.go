package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

func (h *harness) postAs(path, key string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return h.do(req)
}

func TestEvents_AreForAdminKeysOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID()
	h.mustDeliver(id, fixture(t, "user.created.multi-email.json"))
	for _, path := range []string{"/v1/events", "/v1/events/stats", "/v1/events/" + id} {
		if r := h.get(path, testAPIKey); r.Code != http.StatusForbidden {
			t.Errorf("GET %s with an API key = %s, want 403 (payloads hold private metadata)", path, r)
		}
		if r := h.get(path, ""); r.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without a key = %s, want 401", path, r)
		}
		if r := h.get(path, testAdminKey); r.Code != http.StatusOK {
			t.Errorf("GET %s with an admin key = %s, want 200", path, r)
		}
	}
	if r := h.postAs("/v1/events/"+id+"/replay", testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("replay with an API key = %s, want 403", r)
	}
}

func TestEvents_ListFiltersAndPagesNewestFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	start := time.Now().UTC()
	var ids []string
	for i := range 7 {
		id := newID()
		ids = append(ids, id)
		h.mustDeliver(id, userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_e%d", i%3), UpdatedAt: t0 + int64(i)}))
		time.Sleep(2 * time.Millisecond) // distinct receivedAt, to check the order
	}
	h.mustDeliver(newID(), deleteBody(t, "user_e0", t0+100))
	h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)) // stored as failed

	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		q := url.Values{"limit": {"3"}, "eventType": {"created"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		r := h.get("/v1/events?"+q.Encode(), testAdminKey)
		if r.Code != http.StatusOK || pages > 5 {
			t.Fatalf("page %d: %s", pages, r)
		}
		body := r.JSON(t)
		for _, e := range body["data"].([]any) {
			e := e.(map[string]any)
			if _, ok := e["payload"]; ok {
				t.Errorf("the list shows payloads: %v", e)
			}
			seen = append(seen, e["eventId"].(string))
		}
		next, _ := body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != len(ids) {
		t.Fatalf("listed %d created events, want %d", len(seen), len(ids))
	}
	for i := range ids {
		if seen[i] != ids[len(ids)-1-i] {
			t.Errorf("event %d listed is %s, want %s (newest first)", i, seen[i], ids[len(ids)-1-i])
		}
	}

	count := func(query string) int {
		r := h.get("/v1/events?limit=200&"+query, testAdminKey)
		if r.Code != http.StatusOK {
			t.Fatalf("GET /v1/events?%s: %s", query, r)
		}
		return len(r.JSON(t)["data"].([]any))
	}
	for query, want := range map[string]int{
		"":                  9,
		"status=failed":     1,
		"status=processed":  8,
		"eventType=deleted": 1,
		"userId=user_e0":    4,
		"userId=user_bad":   1,
		"since=" + url.QueryEscape(start.Add(-time.Minute).Format(time.RFC3339)): 9,
		"until=" + url.QueryEscape(start.Add(-time.Minute).Format(time.RFC3339)): 0,
	} {
		if got := count(query); got != want {
			t.Errorf("GET /v1/events?%s lists %d events, want %d", query, got, want)
		}
	}
	for _, bad := range []string{"status=done", "eventType=sessions", "since=yesterday", "cursor=x", "limit=0"} {
		if r := h.get("/v1/events?"+bad, testAdminKey); r.Code != http.StatusBadRequest {
			t.Errorf("GET /v1/events?%s = %s, want 400", bad, r)
		}
	}
}

func TestEvents_GetShowsThePayloadAsReceived(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID()
	body := fixture(t, "user.created.multi-email.json")
	h.mustDeliver(id, body)
	byEventID := h.get("/v1/events/"+id, testAdminKey).JSON(t)
	byID := h.get("/v1/events/"+byEventID["id"].(string), testAdminKey).JSON(t)
	for _, ev := range []map[string]any{byEventID, byID} {
		if ev["eventId"] != id || ev["status"] != "processed" || ev["outcome"] != "applied" || ev["attempts"] != 1.0 ||
			ev["signatureValid"] != true || ev["signature"] == "" || ev["type"] != "user.created" || ev["userId"] != "user_2SS3GNsVEHibIcFNY6OA4j9lef2" {
			t.Errorf("event = %v", ev)
		}
		got, _ := json.Marshal(ev["payload"])
		var want bytes.Buffer
		_ = json.Compact(&want, body)
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal(want.Bytes(), &b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("payload = %s\nwant %s", got, want.Bytes())
		}
	}
	if r := h.get("/v1/events/msg_unknown", testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("unknown event = %s, want 404", r)
	}
}

func TestEvents_StatsCountPerStatusAndOutcome(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_s1", UpdatedAt: t0 + 10}))
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_s1", UpdatedAt: t0}))
	h.mustDeliver(newID(), deleteBody(t, "user_s1", t0+20))
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_s1", UpdatedAt: t0 + 30}))
	h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`))
	got := h.get("/v1/events/stats", testAdminKey).JSON(t)
	if _, err := time.Parse(time.RFC3339, fmt.Sprint(got["asOf"])); err != nil {
		t.Errorf("stats asOf = %v, want an RFC 3339 time", got["asOf"])
	}
	delete(got, "asOf")
	want := map[string]any{
		"status":  map[string]any{"stored": 0.0, "processed": 4.0, "failed": 1.0, "discarded": 0.0},
		"outcome": map[string]any{"applied": 2.0, "stale": 1.0, "deleted": 1.0, "ignored": 0.0, "activity": 0.0},
		"gaveUp":  1.0,
		"kind": map[string]any{
			"user":         map[string]any{"stored": 0.0, "failed": 1.0, "gaveUp": 1.0},
			"organization": map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
			"membership":   map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
			"invitation":   map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
			// Clerk Billing's kinds, with no events here.
			"subscription":      map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
			"subscription_item": map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
			"payment_attempt":   map[string]any{"stored": 0.0, "failed": 0.0, "gaveUp": 0.0},
		},
		"stale": false,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stats = %v\nwant    %v", got, want)
	}
}

func TestReplay_ProcessesAFailedEventThroughTheWebhookPath(t *testing.T) {
	t.Parallel()
	h, flaky := newFlakyHarness(t)
	flaky.err = fmt.Errorf("test: %w", models.ErrRetryLater)
	flaky.fail.Store(true)
	blocked := newID()
	if r := h.deliver(blocked, userBody(t, "user.created", clerkUser{ID: "user_2", UpdatedAt: t0 + 2, Email: "e@example.com"})); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("blocked create = %s", r)
	}
	// Still blocked: the replay runs, the event fails again.
	r := h.postAs("/v1/events/"+blocked+"/replay", testAdminKey)
	if res := r.JSON(t); r.Code != http.StatusOK || res["status"] != "failed" || res["error"] == nil {
		t.Errorf("replay while blocked = %s, want 200 with status failed and the error", r)
	}
	flaky.fail.Store(false)
	r = h.postAs("/v1/events/"+blocked+"/replay", testAdminKey)
	if res := r.JSON(t); r.Code != http.StatusOK || res["status"] != "processed" || res["outcome"] != "applied" {
		t.Errorf("replay = %s, want processed/applied", r)
	}
	if u := h.user("user_2"); u["email"] != "e@example.com" {
		t.Errorf("user_2 = %v", u)
	}
	before := h.get("/v1/events/"+blocked, testAdminKey).JSON(t)
	r = h.postAs("/v1/events/"+blocked+"/replay", testAdminKey)
	if r.Code != http.StatusConflict {
		t.Errorf("replay of a processed event = %s, want 409", r)
	}
	if after := h.get("/v1/events/"+blocked, testAdminKey).JSON(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused replay changed the event:\n%v\n%v", before, after)
	}
	if r := h.postAs("/v1/events/msg_nope/replay", testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("replay of an unknown event = %s, want 404", r)
	}
}

// TestReplay_AnEventASweepHoldsIsNotProcessedTwice: the route claims the
// event as the sweep does, so that two instances never process it at once.
func TestReplay_AnEventASweepHoldsIsNotProcessedTwice(t *testing.T) {
	t.Parallel()
	h, flaky := newFlakyHarness(t)
	flaky.err = fmt.Errorf("test: %w", models.ErrRetryLater)
	flaky.fail.Store(true)
	id := newID()
	if r := h.deliver(id, userBody(t, "user.created", clerkUser{ID: "user_held", UpdatedAt: t0})); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("delivery = %s", r)
	}
	flaky.fail.Store(false)
	ev, err := h.store.Events().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := h.store.Events().Claim(context.Background(), ev.ID, ev.Attempts, time.Now(), time.Hour); !ok || err != nil {
		t.Fatalf("a sweep's claim = %v, %v", ok, err)
	}
	if r := h.postAs("/v1/events/"+id+"/replay", testAdminKey); r.Code != http.StatusConflict {
		t.Errorf("replay of an event a sweep holds = %s, want 409", r)
	}
	if got := h.event(id); got["status"] != "failed" || got["attempts"] != int32(1) {
		t.Errorf("event = %v, want it left failed after 1 attempt", got)
	}
}
