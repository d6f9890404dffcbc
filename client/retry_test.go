package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/client"
)

// answering serves each request the next of answers (the last one once
// they run out), and counts them.
func answering(t *testing.T, answers ...func(w http.ResponseWriter)) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(answers)-1)
		answers[i](w)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// refusal answers status with the API's error body, and Retry-After
// retry unless it is "".
func refusal(status int, code, retry string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":"` + code + `","message":"try later","requestId":"req_1"}}`))
	}
}

func okUser(w http.ResponseWriter) {
	_, _ = w.Write([]byte(`{"userId":"user_1","createdAt":"2026-11-01T00:00:00.000Z","updatedAt":"2026-11-01T00:00:00.000Z"}`))
}

// TestClient_RetriesA429Or503AfterItsRetryAfter: a 503 and a 429 are sent
// again, each after the wait its Retry-After asks for.
func TestClient_RetriesA429Or503AfterItsRetryAfter(t *testing.T) {
	t.Parallel()
	srv, n := answering(t, refusal(503, client.CodeOverloaded, "1"), refusal(429, client.CodeTooManyRequests, "0"), okUser)
	start := time.Now()
	u, err := client.New(srv.URL, "k", client.Options{}).User(context.Background(), "user_1")
	if err != nil || u.UserID != "user_1" || n.Load() != 3 {
		t.Fatalf("User = %+v, %v after %d requests; want the user on the third", u, err, n.Load())
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("answered after %v, before the 1 s the 503 asked for", d)
	}
}

// TestClient_GivesUpWhenRetriesRunOutOrTheWaitIsTooLong: the last 503 is
// returned, with its code, request id and Retry-After; so is at once a
// 503 that asks for a wait beyond MaxWait; another status is never sent
// again.
func TestClient_GivesUpWhenRetriesRunOutOrTheWaitIsTooLong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what     string
		answer   func(w http.ResponseWriter)
		requests int64
		status   int
		retry    time.Duration
	}{
		{"retries run out", refusal(503, client.CodeUnavailable, "0"), 3, 503, 0},
		{"a wait too long", refusal(503, client.CodeOverloaded, "120"), 1, 503, 2 * time.Minute},
		{"a 500", refusal(500, client.CodeInternal, ""), 1, 500, 0},
	} {
		srv, n := answering(t, tc.answer)
		_, err := client.New(srv.URL, "k", client.Options{Retries: 2, MaxWait: time.Minute}).User(context.Background(), "user_1")
		var e *client.Error
		if !errors.As(err, &e) || e.Status != tc.status || e.RequestID != "req_1" || e.RetryAfter != tc.retry || n.Load() != tc.requests {
			t.Errorf("%s: %#v after %d requests; want a %d, retry after %v, after %d", tc.what, err, n.Load(), tc.status, tc.retry, tc.requests)
		}
	}
}
