package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
)

// errorOf returns the code and message of an error answer.
func errorOf(t *testing.T, r response) (code, msg string) {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("answer %s is not an error body", r)
	}
	code, _ = e["code"].(string)
	msg, _ = e["message"].(string)
	return code, msg
}

func metricsLines(t *testing.T, h *harness) int {
	t.Helper()
	r := h.get("/metrics", "")
	if r.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %s", r)
	}
	return bytes.Count(r.Body, []byte("\n"))
}

func TestMetrics_LabelsStayBoundedWhateverClientsSend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.get("/healthz", "")
	h.get("/nope", "")
	before := metricsLines(t, h)
	client := &http.Client{}
	for i := range 2000 {
		method := fmt.Sprintf("M%d", i)
		if i%2 == 0 {
			method = http.MethodGet
		}
		req, err := http.NewRequest(method, fmt.Sprintf("%s/made/up/%d?x=%d", h.url, i, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	after := metricsLines(t, h)
	// At most a few new series (method "other", the codes 404 and 405),
	// each a histogram of a dozen lines.
	if after-before > 60 {
		t.Errorf("2,000 requests with made-up methods and paths grew /metrics from %d to %d lines", before, after)
	}
	body := string(h.get("/metrics", "").Body)
	if strings.Contains(body, `method="M1"`) || strings.Contains(body, "/made/up") {
		t.Error("a client's method or path became a metric label")
	}
}

func TestRequestID_KeptOnlyWhenShortAndSafe(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	generated := regexp.MustCompile(`^[0-9a-f]{32}$`)
	tests := []struct {
		name, sent string
		kept       bool
	}{
		{"short and safe", "req-1.A_b", true},
		{"64 characters", strings.Repeat("a", 64), true},
		{"65 characters", strings.Repeat("a", 65), false},
		{"100 KB", strings.Repeat("a", 100_000), false},
		{"a space", "a b", false},
		{"markup", "<script>", false},
		{"a quote", `a"b`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, h.url+"/healthz", nil)
			req.Header.Set("X-Request-Id", tc.sent)
			r := h.do(req)
			got := r.Header.Get("X-Request-Id")
			switch {
			case tc.kept && got != tc.sent:
				t.Errorf("X-Request-Id = %q, want the client's %q", got, tc.sent)
			case !tc.kept && !generated.MatchString(got):
				t.Errorf("X-Request-Id = %.80q, want a generated one", got)
			}
		})
	}
	for _, l := range logs.lines(t) {
		if id, _ := l["request_id"].(string); len(id) > 64 {
			t.Errorf("a log line carries a request id of %d characters", len(id))
		}
	}
}

func TestWebhook_LongSvixIDIsRefusedBeforeStoring(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	body := userBody(t, "user.created", clerkUser{ID: "user_longid", UpdatedAt: t0})
	for _, hdr := range []string{"svix", "webhook"} {
		id := "msg_" + strings.Repeat("x", 100_000)
		sig := sign(t, testSecret, id, time.Now(), body)
		if hdr == "webhook" {
			sig = http.Header{"Webhook-Id": sig["Svix-Id"], "Webhook-Timestamp": sig["Svix-Timestamp"], "Webhook-Signature": sig["Svix-Signature"]}
		}
		r := h.post(body, sig)
		if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || !strings.Contains(msg, hdr+"-id") && !strings.Contains(msg, "svix-id") {
			t.Errorf("%s-id of 100,000 characters = %s (%s), want 400 naming it", hdr, r, code)
		}
	}
	if n := h.countEvents(); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
	if strings.Contains(logs.buf.String(), strings.Repeat("x", 200)) {
		t.Error("the long id reached the log")
	}
	// An id of Svix's usual length still works, and so does one of 128.
	h.mustDeliver("msg_"+strings.Repeat("y", 124), body)
}

func TestWebhook_BodyOver256KiBIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := userBody(t, "user.created", clerkUser{ID: "user_big", UpdatedAt: t0, Meta: map[string]any{"pad": strings.Repeat("x", 300_000)}})
	r := h.deliver(newID(), body)
	if code, _ := errorOf(t, r); r.Code != http.StatusRequestEntityTooLarge || code != "payload_too_large" {
		t.Errorf("a 300 KB body = %s, want 413 payload_too_large", r)
	}
	if n := h.countEvents(); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
}

// blockingUsers holds every Apply until release is closed, telling entered
// first: the database seems slower than the traffic.
type blockingUsers struct {
	entered chan string
	release chan struct{}
}

func newBlockingUsers() *blockingUsers {
	return &blockingUsers{entered: make(chan string, 100), release: make(chan struct{})}
}

func (b *blockingUsers) before(_ context.Context, ch models.Change) error {
	userID, _ := ch.IDs()
	b.entered <- userID
	<-b.release
	return nil
}

// hold delivers n events in the background, each held in Apply, and
// returns a channel that gets each answer's status code.
func (b *blockingUsers) hold(t *testing.T, h *harness, n int, body func(i int) []byte) <-chan int {
	t.Helper()
	codes := make(chan int, n)
	for i := range n {
		b := body(i)
		hdr := sign(t, testSecret, newID(), time.Now(), b)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/clerk", bytes.NewReader(b))
			req.Header = hdr
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range n {
		select {
		case <-b.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("held deliveries never reached the store")
		}
	}
	return codes
}

// deliverWithin delivers body and fails the test if no answer comes within
// 30 s (a server that queues instead of refusing would hold it for ever
// here: the store is blocked).
func deliverWithin(t *testing.T, h *harness, id string, body []byte) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/clerk", bytes.NewReader(body))
	req.Header = sign(t, testSecret, id, time.Now(), body)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("delivery while the store is blocked: %v", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return response{Code: resp.StatusCode, Body: buf.Bytes(), Header: resp.Header}
}

func TestWebhook_OverloadIsAQuick503WithRetryAfter(t *testing.T) {
	t.Parallel()
	blocked := newBlockingUsers()
	h := newHarness(t, func(o *harnessOptions) {
		o.beforeApply = blocked.before
		o.limits = api.Limits{Ingests: 2, IngestWait: 50 * time.Millisecond}
	})
	codes := blocked.hold(t, h, 2, func(i int) []byte {
		return userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_held%d", i), UpdatedAt: t0})
	})

	id, body := newID(), userBody(t, "user.created", clerkUser{ID: "user_third", UpdatedAt: t0})
	r := deliverWithin(t, h, id, body)
	if code, _ := errorOf(t, r); r.Code != http.StatusServiceUnavailable || code != "overloaded" || r.Header.Get("Retry-After") == "" {
		t.Errorf("delivery while 2 of 2 ingests are busy = %s, Retry-After %q; want 503 overloaded with Retry-After", r, r.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(h.get("/metrics", "").Body), `usersync_webhook_requests_total{result="overloaded"} 1`) {
		t.Error("the overloaded delivery is not counted")
	}

	close(blocked.release)
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("held delivery = %d, want 200", c)
		}
	}
	h.mustDeliver(id, body) // Svix's retry
	for _, u := range []string{"user_held0", "user_held1", "user_third"} {
		if h.user(u) == nil {
			t.Errorf("user %s is missing", u)
		}
	}
}

func TestWebhook_BodiesInFlightAreBounded(t *testing.T) {
	t.Parallel()
	blocked := newBlockingUsers()
	body := func(i int) []byte {
		return userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_body%d", i), UpdatedAt: t0,
			Meta: map[string]any{"pad": strings.Repeat("x", 60_000)}})
	}
	size := int64(len(body(0)))
	h := newHarness(t, func(o *harnessOptions) {
		o.beforeApply = blocked.before
		o.limits = api.Limits{SmallBodyBytes: 2*size + 1000} // each is under SmallBody
	})
	codes := blocked.hold(t, h, 2, body)

	third := body(2)
	id := newID()
	r := deliverWithin(t, h, id, third)
	if code, _ := errorOf(t, r); r.Code != http.StatusServiceUnavailable || code != "overloaded" || r.Header.Get("Retry-After") == "" {
		t.Errorf("a third body while two are held = %s, want 503 overloaded with Retry-After", r)
	}
	close(blocked.release)
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("held delivery = %d, want 200", c)
		}
	}
	h.mustDeliver(id, third)
}

// nest returns a JSON object nested n levels.
func nest(n int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1))
}

func TestWebhook_WhatUsersMustNotStoreIs400AndStoredAsFailed(t *testing.T) {
	t.Parallel()
	withData := func(edit func(d map[string]any)) []byte {
		var env map[string]any
		if err := json.Unmarshal(userBody(t, "user.updated", clerkUser{ID: "user_cap", UpdatedAt: t0}), &env); err != nil {
			t.Fatal(err)
		}
		edit(env["data"].(map[string]any))
		b, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		body    []byte
		wantMsg string
	}{
		{"metadata nested 150 levels", withData(func(d map[string]any) { d["public_metadata"] = nest(150) }), "deeper than 100 levels"},
		{"metadata over 64 KiB", withData(func(d map[string]any) { d["public_metadata"] = map[string]any{"pad": strings.Repeat("x", 70_000)} }), "at most 65536"},
		{"an email of 606 characters", withData(func(d map[string]any) {
			d["email_addresses"] = []any{map[string]any{"id": "e1", "email_address": strings.Repeat("a", 594) + "@example.org"}}
			d["primary_email_address_id"] = "e1"
		}), "email_address must be at most 512"},
		{"a phone of 65 characters", withData(func(d map[string]any) {
			d["phone_numbers"] = []any{map[string]any{"id": "p1", "phone_number": strings.Repeat("1", 65)}}
		}), "phone_number must be at most 64"},
		{"updated_at in the year 3000", withData(func(d map[string]any) { d["updated_at"] = int64(32503680000000) }), "more than a day ahead"},
		{"1e400 in metadata", withData(func(d map[string]any) { d["public_metadata"] = json.RawMessage(`{"n":1e400}`) }), "beyond the range"},
		{"updated_at twice in data", []byte(`{"type":"user.updated","data":{"id":"user_cap","updated_at":1760000000000,"updated_at":1}}`), "ambiguous JSON"},
		{"a delete in the year 3000", deleteBody(t, "user_cap", 32503680000000), "more than a day ahead"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := newID()
			r := h.deliver(id, tc.body)
			if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("delivery = %s, want 400 invalid_request mentioning %q", r, tc.wantMsg)
			}
			if ev := h.event(id); ev["status"] != "failed" || !strings.Contains(fmt.Sprint(ev["error"]), tc.wantMsg) {
				t.Errorf("stored event = status %v, error %v; want failed with the reason", ev["status"], ev["error"])
			}
			if n := h.countUsers(); n != 0 {
				t.Errorf("%d users stored, want 0", n)
			}
		})
	}
}

func TestWebhook_AmbiguousOrNonUTF8BodiesAreRefusedBeforeStoring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, wantMsg string
	}{
		{"type twice", `{"type":"session.created","type":"user.created","data":{"id":"user_amb","updated_at":1760000000000}}`, "ambiguous JSON"},
		{"not UTF-8", "{\"type\":\"user.created\",\"data\":{\"id\":\"user_utf\",\"updated_at\":1760000000000,\"first_name\":\"\xff\"}}", "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			r := h.deliver(newID(), []byte(tc.body))
			if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("delivery = %s, want 400 mentioning %q", r, tc.wantMsg)
			}
			if n := h.countEvents(); n != 0 {
				t.Errorf("%d events stored, want 0", n)
			}
		})
	}
}

func TestWebhook_NumbersRoundTripAsDocumented(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	meta := json.RawMessage(`{"negZero":-0,"tiny":1e-400,"big":1e300,"int":9007199254740993,"huge":123456789012345678901234567890}`)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_num", UpdatedAt: t0, Meta: meta}))
	r := h.get("/v1/users/user_num", testAPIKey)
	var u struct {
		Metadata json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	want := `{"negZero":0,"tiny":0,"big":1e+300,"int":9007199254740993,"huge":1.2345678901234568e+29}`
	if string(u.Metadata) != want {
		t.Errorf("metadata = %s, want %s", u.Metadata, want)
	}
}

func TestWebhook_TrailingSlashIsTheSameEndpoint(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := userBody(t, "user.created", clerkUser{ID: "user_slash", UpdatedAt: t0})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/webhooks/clerk/", bytes.NewReader(body))
	req.Header = sign(t, testSecret, newID(), time.Now(), body)
	if r := h.do(req); r.Code != http.StatusOK || r.JSON(t)["status"] != "processed" {
		t.Fatalf("POST /webhooks/clerk/ = %s, want 200 processed", r)
	}
	if h.user("user_slash") == nil {
		t.Error("the user was not stored")
	}
	// A forged request there is refused like anywhere.
	req, _ = http.NewRequest(http.MethodPost, h.url+"/webhooks/clerk/", bytes.NewReader(body))
	req.Header = sign(t, otherSecret, newID(), time.Now(), body)
	if r := h.do(req); r.Code != http.StatusUnauthorized {
		t.Errorf("forged POST /webhooks/clerk/ = %s, want 401", r)
	}
}

func TestAPI_PathParametersAreDecoded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Clerk's ids are letters and digits, and the webhook takes no other;
	// a user stored with another id (by an earlier usersync) is read by it.
	if _, err := h.store.Users().Apply(context.Background(), models.UserChange{UserID: "user_a/b{c}", EventID: "msg_slash",
		SourceTime: time.UnixMilli(t0).UTC(), DisplayName: "user_a/b{c}", Metadata: json.RawMessage(`{}`), New: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/users/user_a%2Fb%7Bc%7D", "/v1/users/user_a%2fb%7bc%7d"} {
		if r := h.get(path, testAPIKey); r.Code != http.StatusOK || r.JSON(t)["userId"] != "user_a/b{c}" {
			t.Errorf("GET %s = %s, want the user user_a/b{c}", path, r)
		}
	}
	id := newID()
	h.mustDeliver(id, userBody(t, "user.updated", clerkUser{ID: "user_ab", UpdatedAt: t0 + 1}))
	if r := h.get("/v1/events/"+strings.ReplaceAll(id, "_", "%5F"), testAdminKey); r.Code != http.StatusOK {
		t.Errorf("GET /v1/events/<escaped id> = %s, want 200", r)
	}
}

func TestAPI_ErrorsNameTheParameterAndEchoOnlyBoundedEscapedValues(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tests := []struct {
		name, path, wantMsg string
		wantCode            int
	}{
		{"limit not a number", "/v1/users?limit=abc", "limit must be a whole number from 1 to 200", 400},
		{"limit too large", "/v1/users?limit=1000", "limit must be a whole number from 1 to 200", 400},
		{"event limit not a number", "/v1/events?limit=1e3", "limit must be a whole number from 1 to 200", 400},
		{"includeDeleted not a bool", "/v1/users?includeDeleted=yes", "includeDeleted must be true or false", 400},
		{"unknown parameter", "/v1/users?include_deleted=true", `unknown query parameter "include_deleted"`, 400},
		{"unknown parameter on one user", "/v1/users/user_1?foo=1", `unknown query parameter "foo"`, 400},
		{"unknown parameter on events", "/v1/events?type=user.created", `unknown query parameter "type"`, 400},
		{"any parameter on stats", "/v1/events/stats?x=1", `unknown query parameter "x" (this endpoint takes no query parameters)`, 400},
		{"bad eventType", "/v1/events?eventType=sessions", "eventType must be one of", 400},
		{"unknown user with control characters", "/v1/users/user_%0A%7Bx%7D", `user "user_\n{x}": not found`, 404},
		{"unknown event", "/v1/events/" + strings.Repeat("e", 200), `event "` + strings.Repeat("e", 64) + `"...`, 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(tc.path, testAdminKey)
			_, msg := errorOf(t, r)
			if r.Code != tc.wantCode || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("GET %s = %s, want %d mentioning %q", tc.path, r, tc.wantCode, tc.wantMsg)
			}
			if strings.Contains(msg, "strconv") || strings.Contains(msg, "\n") {
				t.Errorf("message %q shows internals or raw client text", msg)
			}
		})
	}
}

func TestEvents_EventTypeFilterTakesClerkTypes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_et", UpdatedAt: t0}))
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_et", UpdatedAt: t0 + 1}))
	for _, v := range []string{"created", "user.created"} {
		r := h.get("/v1/events?eventType="+v, testAdminKey)
		data, _ := r.JSON(t)["data"].([]any)
		if r.Code != http.StatusOK || len(data) != 1 || data[0].(map[string]any)["type"] != "user.created" {
			t.Errorf("eventType=%s = %s, want the one user.created event", v, r)
		}
	}
}
