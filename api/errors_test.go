package api_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/usersync/usersync/models"
)

// failingUsers answers every Apply with err, as a store would.
type failingUsers struct {
	err error
}

func (f *failingUsers) before(context.Context, models.Change) error { return f.err }

const emailTakenMessage = "the user's email is held by another active user; a later delivery may apply the event"

func TestErrors_AnEmailConflictIsAnsweredInUsersyncsOwnWords(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) {
		o.logger = slog.New(slog.NewJSONHandler(&logs, nil))
		o.beforeApply = (&failingUsers{err: fmt.Errorf("email taken@example.com: %w", models.ErrEmailTaken)}).before
	})
	r := h.deliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_2", UpdatedAt: t0 + 1, Email: "taken@example.com"}))
	if code, msg := errorOf(t, r); r.Code != http.StatusServiceUnavailable || code != "retry_later" || msg != emailTakenMessage {
		t.Errorf("a taken email = %s, want 503 retry_later saying %q", r, emailTakenMessage)
	}
	if strings.Contains(logs.buf.String(), "taken@example.com") {
		t.Errorf("the log shows the email:\n%s", logs.buf.String())
	}
}

func TestErrors_AStoresOwnTextNeverReachesTheBodyNorAnEmailTheLog(t *testing.T) {
	t.Parallel()
	// What MongoDB's driver says of a unique email, and what other layers
	// may say: an error body must show none of it.
	const driver = `E11000 duplicate key error collection: usersync.users index: email_1 dup key: { email: "secret@example.org" }`
	tests := []struct {
		name           string
		err            error
		status         int
		code, wantMsg  string
		emailInTheLogs bool
	}{
		{"a duplicate email", fmt.Errorf("%w: %w", models.ErrEmailTaken, errors.New(driver)),
			http.StatusServiceUnavailable, "retry_later", emailTakenMessage, false},
		{"an invalid value deep down", fmt.Errorf("%w: %s", models.ErrInvalid, driver),
			http.StatusBadRequest, "invalid_request", "invalid request", true},
		{"anything else", errors.New(driver),
			http.StatusInternalServerError, "internal", "internal error; see the server log for this request id", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			h := newHarness(t, func(o *harnessOptions) {
				o.logger = slog.New(slog.NewJSONHandler(&logs, nil))
				o.beforeApply = (&failingUsers{err: tc.err}).before
			})
			r := h.deliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_x", UpdatedAt: t0, Email: "secret@example.org"}))
			code, msg := errorOf(t, r)
			if r.Code != tc.status || code != tc.code || msg != tc.wantMsg {
				t.Errorf("delivery = %s, want %d %s saying %q", r, tc.status, tc.code, tc.wantMsg)
			}
			if strings.Contains(string(r.Body), "secret@example.org") || strings.Contains(string(r.Body), "E11000") {
				t.Errorf("the body shows the store's text: %s", r)
			}
			// Only an error usersync does not know may be logged as it is.
			if !tc.emailInTheLogs && strings.Contains(logs.buf.String(), "secret@example.org") {
				t.Errorf("the log shows the email:\n%s", logs.buf.String())
			}
		})
	}
}

func TestErrors_BodiesAreNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.get("/v1/users", "")
	if r.Code != http.StatusUnauthorized || !strings.Contains(string(r.Body), `Bearer <key>`) {
		t.Errorf("GET /v1/users without a key = %s, want 401 saying Bearer <key> as it is", r)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}
