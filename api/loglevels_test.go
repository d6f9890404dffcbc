package api_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// levels counts the log lines of each level.
func levels(t *testing.T, logs *logBuffer) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, l := range logs.lines(t) {
		n[l["level"].(string)]++
	}
	return n
}

func TestLogs_ExpectedConditionsAreNotErrors(t *testing.T) {
	t.Parallel()
	t.Run("an email still held by another user", func(t *testing.T) {
		var logs logBuffer
		h := newHarness(t, func(o *harnessOptions) {
			o.logger = slog.New(slog.NewJSONHandler(&logs, nil))
			// As the MongoDB store answers when other users kept claiming the email.
			o.beforeApply = (&failingUsers{err: fmt.Errorf("other users kept claiming the email: %w", models.ErrEmailTaken)}).before
		})
		if r := h.deliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_2", UpdatedAt: t0 + 1, Email: "held@example.com"})); r.Code != http.StatusServiceUnavailable {
			t.Fatalf("delivery = %s, want 503", r)
		}
		if n := levels(t, &logs); n["ERROR"] != 0 || n["WARN"] == 0 {
			t.Errorf("log levels %v, want warnings and no error:\n%s", n, logs.buf.String())
		}
	})
	t.Run("the sync route without Clerk's key", func(t *testing.T) {
		var logs logBuffer
		h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
		if r := h.syncUser("user_x", testAPIKey); r.Code != http.StatusNotImplemented {
			t.Fatalf("sync = %s, want 501", r)
		}
		if n := levels(t, &logs); n["ERROR"] != 0 {
			t.Errorf("log levels %v, want no error:\n%s", n, logs.buf.String())
		}
	})
}

func TestLogs_ARequestTheClientAbandonedIsNotA500(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	abandoned := &applyUntilCancelled{entered: make(chan struct{}, 1)}
	h := newHarness(t, func(o *harnessOptions) {
		o.logger = slog.New(slog.NewJSONHandler(&logs, nil))
		o.beforeApply = abandoned.before
	})
	body := userBody(t, "user.created", clerkUser{ID: "user_gone", UpdatedAt: t0})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/webhooks/clerk", bytes.NewReader(body))
	req.Header = sign(t, testSecret, newID(), time.Now(), body)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-abandoned.entered
	cancel() // Svix's 15 s
	<-done
	waitForMetric(t, h, `usersync_http_request_duration_seconds_count{code="499",method="POST",route="/webhooks/clerk"}`, 1)
	var status float64
	for _, l := range logs.lines(t) {
		if l["msg"] == "request" && l["path"] == "/webhooks/clerk" {
			status, _ = l["status"].(float64)
		}
	}
	if n := levels(t, &logs); status != 499 || n["ERROR"] != 0 {
		t.Errorf("request logged with status %v, levels %v; want 499 and no error:\n%s", status, n, logs.buf.String())
	}
}

// applyUntilCancelled holds each apply until its request's context ends,
// however long the server takes to see that its client went away, and
// then applies with that context.
type applyUntilCancelled struct {
	entered chan struct{}
}

func (a *applyUntilCancelled) before(ctx context.Context, _ models.Change) error {
	select {
	case a.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil
}
