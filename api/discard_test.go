package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	stdatomic "sync/atomic"
	"testing"

	"github.com/usersync/usersync/models"
)

// switchedUsers fails every Apply while fail is set, as a database that
// refuses a user's writes would.
type switchedUsers struct {
	fail *stdatomic.Bool
}

func (u *switchedUsers) before(context.Context, models.Change) error {
	if u.fail.Load() {
		return models.ErrUnavailable
	}
	return nil
}

func (h *harness) discard(id, key, body string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/events/"+id+"/discard", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return h.do(req)
}

// TestDiscard_AFailedEventIsKeptAsDiscardedAndNeverApplied: an admin gives
// up on a failed event with a reason; it stays in the log as discarded,
// with when, why and which admin key; the failed counts and the alerts'
// gauges clear; a later Svix retry of its svix-id is a 2xx duplicate that
// applies nothing; replay and a second discard are conflicts.
func TestDiscard_AFailedEventIsKeptAsDiscardedAndNeverApplied(t *testing.T) {
	t.Parallel()
	var fail stdatomic.Bool
	h := newHarness(t, func(o *harnessOptions) {
		o.beforeApply = (&switchedUsers{fail: &fail}).before
	})
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_poison", UpdatedAt: t0, Email: "poison@example.com"})
	fail.Store(true)
	if r := h.deliver(id, body); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("a delivery whose write fails = %s, want 503", r)
	}

	for _, tc := range []struct {
		name, key, body string
		code            int
		msg             string
	}{
		{"an API key", testAPIKey, `{"reason":"x"}`, http.StatusForbidden, "admin key"},
		{"no key", "", `{"reason":"x"}`, http.StatusUnauthorized, ""},
		{"no reason", testAdminKey, `{}`, http.StatusBadRequest, "reason is required"},
		{"a blank reason", testAdminKey, `{"reason":"   "}`, http.StatusBadRequest, "reason is required"},
		{"a reason too long", testAdminKey, `{"reason":"` + strings.Repeat("x", models.MaxDiscardReason+1) + `"}`, http.StatusBadRequest, "at most 1000 bytes"},
		{"an unknown field", testAdminKey, `{"reason":"x","force":true}`, http.StatusBadRequest, "must be a JSON object"},
		{"not JSON", testAdminKey, `reason=x`, http.StatusBadRequest, "must be a JSON object"},
		{"a body too large", testAdminKey, `{"reason":"` + strings.Repeat("x", 5000) + `"}`, http.StatusBadRequest, "larger than"},
	} {
		r := h.discard(id, tc.key, tc.body)
		if r.Code != tc.code || !strings.Contains(string(r.Body), tc.msg) {
			t.Errorf("%s: discard = %s, want %d saying %q", tc.name, r, tc.code, tc.msg)
		}
	}
	if ev := h.event(id); ev["status"] != "failed" {
		t.Fatalf("a refused discard changed the event: %v", ev)
	}
	fail.Store(false)
	processed := newID()
	h.mustDeliver(processed, userBody(t, "user.created", clerkUser{ID: "user_fine", UpdatedAt: t0}))

	r := h.discard(id, testAdminKey, `{"reason":"  the user was removed by hand; nothing to apply  "}`)
	if r.Code != http.StatusOK {
		t.Fatalf("discard = %s, want 200", r)
	}
	sum := sha256.Sum256([]byte(testAdminKey))
	wantBy := "key sha256:" + hex.EncodeToString(sum[:])[:12]
	got := r.JSON(t)
	if got["status"] != "discarded" || got["discardReason"] != "the user was removed by hand; nothing to apply" ||
		got["discardedBy"] != wantBy || got["discardedAt"] == nil || got["retryAt"] != nil {
		t.Errorf("discard answered %v; want discarded, the reason trimmed, by %q, with a time and no retry", got, wantBy)
	}
	if full := h.get("/v1/events/"+id, testAdminKey).JSON(t); full["status"] != "discarded" || full["discardedBy"] != wantBy {
		t.Errorf("GET the event = %v", full)
	}
	if list := h.get("/v1/events?status=discarded", testAdminKey).JSON(t)["data"].([]any); len(list) != 1 {
		t.Errorf("the log of discarded events = %v, want the one", list)
	}

	// The counts and the alerts' gauges clear.
	st := h.get("/v1/events/stats", testAdminKey).JSON(t)
	status := st["status"].(map[string]any)
	if status["failed"] != 0.0 || status["discarded"] != 1.0 || st["gaveUp"] != 0.0 {
		t.Errorf("stats = %v; want 0 failed, 1 discarded, 0 given up", st)
	}
	metrics := string(h.get("/metrics", "").Body)
	for _, want := range []string{`usersync_events{status="failed"} 0`, `usersync_events{status="discarded"} 1`,
		"usersync_events_backlog 0", "usersync_events_gave_up 0"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}

	// Svix retries it once the database is back: a duplicate, never applied.
	r = h.deliver(id, body)
	if r.Code != http.StatusOK || r.JSON(t)["status"] != "discarded" || r.JSON(t)["duplicate"] != true {
		t.Errorf("a Svix retry of a discarded event = %s, want 200, a discarded duplicate", r)
	}
	if u := h.user("user_poison"); u != nil {
		t.Errorf("a retry of a discarded event applied it: %v", u)
	}
	if ev := h.event(id); ev["status"] != "discarded" || ev["attempts"] != int32(1) {
		t.Errorf("after the retry the event is %v, want discarded after its 1 attempt", ev)
	}

	// Replay refuses it; a second discard, and a processed event's, too.
	if r := h.postAs("/v1/events/"+id+"/replay", testAdminKey); r.Code != http.StatusConflict || !strings.Contains(string(r.Body), "discarded") {
		t.Errorf("replay of a discarded event = %s, want 409 saying it was discarded", r)
	}
	if r := h.discard(id, testAdminKey, `{"reason":"again"}`); r.Code != http.StatusConflict || !strings.Contains(string(r.Body), "discarded already") {
		t.Errorf("a second discard = %s, want 409", r)
	}
	if r := h.discard(processed, testAdminKey, `{"reason":"x"}`); r.Code != http.StatusConflict || !strings.Contains(string(r.Body), "only a failed event") {
		t.Errorf("discard of a processed event = %s, want 409", r)
	}
	if r := h.discard("msg_unknown", testAdminKey, `{"reason":"x"}`); r.Code != http.StatusNotFound {
		t.Errorf("discard of an unknown event = %s, want 404", r)
	}
	if u := h.user("user_poison"); u != nil {
		t.Errorf("the discarded event was applied: %v", u)
	}
}
