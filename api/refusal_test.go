package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
)

// refusalLines returns the "webhook refused" log lines.
func refusalLines(t *testing.T, logs *logBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == "webhook refused" {
			out = append(out, l)
		}
	}
	return out
}

func TestWebhook_EveryRefusalLogsOneLineWithItsReasonAndIsCounted(t *testing.T) {
	t.Parallel()
	// marker is in every body: payload data must not reach a log line.
	const marker = "zq_marker_zq"
	user := func(edit func(d map[string]any)) []byte {
		var env map[string]any
		if err := json.Unmarshal(userBody(t, "user.created", clerkUser{ID: "user_ref", UpdatedAt: t0, First: marker}), &env); err != nil {
			t.Fatal(err)
		}
		edit(env["data"].(map[string]any))
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := user(func(map[string]any) {})
	tests := []struct {
		name   string
		limits api.Limits
		send   func(t *testing.T, h *harness) int // returns the status
		status int
		reason string
		attrs  map[string]any // besides reason and request_id
	}{
		{"no headers", api.Limits{}, func(t *testing.T, h *harness) int { return h.post(plain, http.Header{}).Code },
			400, "missing_header", nil},
		{"a long svix-id", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.post(plain, sign(t, testSecret, "msg_"+strings.Repeat("i", 200), time.Now(), plain)).Code
		}, 400, "invalid_header", map[string]any{"field": "svix-id"}},
		{"a timestamp that is not seconds", api.Limits{}, func(t *testing.T, h *harness) int {
			hdr := sign(t, testSecret, newID(), time.Now(), plain)
			hdr.Set("svix-timestamp", "soon")
			return h.post(plain, hdr).Code
		}, 400, "invalid_header", map[string]any{"field": "svix-timestamp"}},
		{"a timestamp 10 minutes old", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.post(plain, sign(t, testSecret, newID(), time.Now().Add(-10*time.Minute), plain)).Code
		}, 401, "timestamp", nil},
		{"another secret", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.post(plain, sign(t, otherSecret, newID(), time.Now(), plain)).Code
		}, 401, "signature", nil},
		{"a body over 256 KiB", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), user(func(d map[string]any) { d["private_metadata"] = strings.Repeat("x", 300_000) })).Code
		}, 413, "too_large", nil},
		{"bodies in flight over the budget", api.Limits{SmallBodyBytes: 100}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), plain).Code
		}, 503, "overloaded", nil},
		{"a body that does not arrive", api.Limits{BodyWait: 100 * time.Millisecond}, func(t *testing.T, h *harness) int {
			return startSlowSender(t, h, "", 2048, 1024).answer(t)
		}, 408, "body_timeout", nil},
		{"not UTF-8", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), []byte("{\"type\":\"user.created\",\"data\":{\"first_name\":\""+marker+"\xff\"}}")).Code
		}, 400, "not_utf8", nil},
		{"a key twice in the envelope", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), []byte(`{"type":"user.created","type":"x","data":{"first_name":"`+marker+`"}}`)).Code
		}, 400, "duplicate_key", nil},
		{"a key twice in the data", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), []byte(`{"type":"user.created","data":{"id":"user_ref","updated_at":1,"`+marker+`":1,"`+marker+`":2}}`)).Code
		}, 400, "duplicate_key", nil},
		{"not a JSON object", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), []byte(`["`+marker+`"]`)).Code
		}, 400, "invalid_payload", map[string]any{"field": "body"}},
		{"no type", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), []byte(`{"data":{"first_name":"`+marker+`"}}`)).Code
		}, 400, "invalid_payload", map[string]any{"field": "type"}},
		{"metadata over 64 KiB", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), user(func(d map[string]any) {
				d["public_metadata"] = map[string]any{marker: strings.Repeat("x", 70_000)}
			})).Code
		}, 400, "invalid_payload", map[string]any{"field": "data.public_metadata"}},
		{"metadata nested too deep", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), user(func(d map[string]any) {
				d["public_metadata"] = json.RawMessage(`{"` + marker + `":` + string(nest(120)) + `}`)
			})).Code
		}, 400, "invalid_payload", map[string]any{"field": "data.public_metadata"}},
		{"an email too long", api.Limits{}, func(t *testing.T, h *harness) int {
			return h.deliver(newID(), user(func(d map[string]any) {
				d["email_addresses"] = []any{map[string]any{"id": "e1", "email_address": strings.Repeat(marker, 50) + "@example.org"}}
			})).Code
		}, 400, "invalid_payload", map[string]any{"field": "data.email_addresses[].email_address"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			h := newHarness(t, func(o *harnessOptions) {
				o.logger = slog.New(slog.NewJSONHandler(&logs, nil))
				o.limits = tc.limits
			})
			if got := tc.send(t, h); got != tc.status {
				t.Errorf("status = %d, want %d", got, tc.status)
			}
			waitForMetric(t, h, fmt.Sprintf(`usersync_webhook_refused_total{reason=%q}`, tc.reason), 1)
			lines := refusalLines(t, &logs)
			if len(lines) != 1 {
				t.Fatalf("%d webhook refused lines, want 1:\n%s", len(lines), logs.buf.String())
			}
			l := lines[0]
			if l["reason"] != tc.reason || l["request_id"] == "" || l["level"] != "WARN" {
				t.Errorf("line = %v, want a warning with reason %s and the request id", l, tc.reason)
			}
			for k, v := range tc.attrs {
				if l[k] != v {
					t.Errorf("line %s = %v, want %v", k, l[k], v)
				}
			}
			if strings.Contains(logs.buf.String(), marker) {
				t.Errorf("payload data reached the log:\n%s", logs.buf.String())
			}
		})
	}
}

func TestWebhook_ATimestampRefusalLogsTheSkew(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	body := userBody(t, "user.created", clerkUser{ID: "user_skew", UpdatedAt: t0})
	h.post(body, sign(t, testSecret, newID(), time.Now().Add(-time.Hour), body))
	h.post(body, sign(t, testSecret, newID(), time.Now().Add(100*365*24*time.Hour), body))
	lines := refusalLines(t, &logs)
	if len(lines) != 2 {
		t.Fatalf("%d refusal lines, want 2", len(lines))
	}
	// An hour behind: about 3600 s (the test's own time is in it too).
	if s, _ := lines[0]["skew_seconds"].(float64); s < 3600 || s > 3700 {
		t.Errorf("skew_seconds = %v, want about 3600", lines[0]["skew_seconds"])
	}
	// A century ahead: bounded.
	if s, _ := lines[1]["skew_seconds"].(float64); s > -3e9 || s < -3.2e9 {
		t.Errorf("skew_seconds = %v, want about -3.15e9", lines[1]["skew_seconds"])
	}
}

func TestWebhook_IgnoredEventsAreCountedByClerksTypeOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	exposition := string(h.get("/metrics", "").Body)
	for _, typ := range []string{"role.created", "organizationDomain.created", "other"} {
		if v := metricValue(t, exposition, fmt.Sprintf(`usersync_webhook_ignored_total{type=%q}`, typ)); v != 0 {
			t.Errorf("%s ignored before any delivery = %v", typ, v)
		}
	}
	// A type usersync stores is never ignored: it has no series.
	for _, typ := range models.StoredTypes() {
		if strings.Contains(exposition, fmt.Sprintf(`usersync_webhook_ignored_total{type=%q}`, typ)) {
			t.Errorf("%s, a type usersync stores, has an ignored series", typ)
		}
	}
	h.mustDeliver(newID(), []byte(`{"type":"role.created","object":"event","data":{"id":"role_1","object":"role"}}`))
	for i := range 50 {
		h.mustDeliver(newID(), []byte(fmt.Sprintf(`{"type":"made.up.%d","data":{}}`, i)))
	}
	exposition = string(h.get("/metrics", "").Body)
	if v := metricValue(t, exposition, `usersync_webhook_ignored_total{type="role.created"}`); v != 1 {
		t.Errorf("role.created ignored = %v, want 1", v)
	}
	if v := metricValue(t, exposition, `usersync_webhook_ignored_total{type="other"}`); v != 50 {
		t.Errorf("other ignored = %v, want 50", v)
	}
	if strings.Contains(exposition, "made.up") {
		t.Error("a type Clerk does not document became a label")
	}
}
