package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	stdsync "sync"
	"testing"
	"time"
)

// logBuffer collects JSON log lines safely.
type logBuffer struct {
	mu  stdsync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogs_CarryTheRequestIDAndNeverPayloadsEmailsOrSecrets(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	id := newID()
	body := fixture(t, "user.created.multi-email.json")
	r := h.deliver(id, body)
	reqID := r.Header.Get("X-Request-Id")
	if r.Code != http.StatusOK || reqID == "" {
		t.Fatalf("delivery = %s, X-Request-Id %q", r, reqID)
	}
	h.get("/v1/users?email=alex@example.com", testAPIKey)

	var eventLines int
	for _, l := range logs.lines(t) {
		if l["request_id"] == nil || l["request_id"] == "" {
			t.Errorf("log line without request_id: %v", l)
		}
		if l["msg"] == "event" {
			eventLines++
			if l["request_id"] != reqID || l["event_id"] != id || l["user_id"] != "user_2SS3GNsVEHibIcFNY6OA4j9lef2" {
				t.Errorf("event line = %v, want request_id %s, event_id %s and the user id", l, reqID, id)
			}
		}
	}
	if eventLines != 1 {
		t.Errorf("%d event lines, want 1", eventLines)
	}
	all := logs.buf.String()
	for _, secret := range []string{"alex@example.com", "alex.old@example.net", "cus_TEST", "Alex", testSecret, testAPIKey, "email_addresses"} {
		if strings.Contains(all, secret) {
			t.Errorf("the log shows %q:\n%s", secret, all)
		}
	}
}

func TestMetrics_CountWebhooksEventsAndRequests(t *testing.T) {
	t.Parallel()
	h, metrics := newMetricsHarness(t)
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_m", UpdatedAt: t0})
	h.mustDeliver(id, body)
	h.mustDeliver(id, body)
	h.mustDeliver(newID(), []byte(`{"type":"role.created","object":"event","data":{"id":"role_1","object":"role"}}`))
	h.post(body, sign(t, otherSecret, newID(), time.Now(), body))
	h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`))

	if err := metrics.RefreshStats(context.Background()); err != nil { // serve does it every 15 s
		t.Fatal(err)
	}
	r := h.get("/metrics", "")
	if r.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %s", r)
	}
	for _, want := range []string{
		`usersync_webhook_requests_total{result="processed"} 1`,
		`usersync_webhook_requests_total{result="duplicate"} 1`,
		`usersync_webhook_requests_total{result="ignored"} 1`,
		`usersync_webhook_requests_total{result="rejected"} 1`,
		`usersync_webhook_requests_total{result="failed"} 1`,
		`usersync_event_processing_duration_seconds_count 3`,
		`usersync_events{status="processed"} 1`,
		`usersync_events{status="failed"} 1`,
		`usersync_http_request_duration_seconds_count{code="401",method="POST",route="/webhooks/clerk"} 1`,
		`usersync_engine_errors_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
