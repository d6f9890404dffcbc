package models

import (
	"strings"
	"testing"
)

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"empty", "", "unknown"},
		{"email taken", "cannot be applied yet: apply event msg_2x to user user_9: the user's email is held by another active user: E11000 duplicate key", "email_taken"},
		{"unavailable", "ping: database unavailable: server selection timeout", "unavailable"},
		{"invalid field", "invalid: data.email_addresses[0].email_address must be an email", "invalid: data.email_addresses[].email_address must be an email"},
		{"invalid type", `invalid: "session.created" is not a user event`, `invalid: "…" is not a user event`},
		{"invalid time", "invalid: data.updated_at must be a positive Unix time in milliseconds", "invalid: data.updated_at must be a positive Unix time in milliseconds"},
		{"conflict", "cannot be applied yet: apply event msg_1 to user user_2: concurrent writes to the user kept winning: conflict",
			"retry_later: apply event … to user …: concurrent writes to the user kept winning: conflict"},
		{"sentinel alone", "invalid", "invalid"},
		{"other", "something broke at 12:30 for jane@example.com", "error: something broke at … for …"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureReason(tc.msg); got != tc.want {
				t.Errorf("FailureReason(%q) = %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}

func TestFailureReason_SameReasonForDifferentIDsAndBounded(t *testing.T) {
	a := FailureReason(`invalid: data.id "user_a1" is too long: 300 bytes`)
	b := FailureReason(`invalid: data.id "user_b2 with spaces" is too long: 129 bytes`)
	if a != b {
		t.Errorf("reasons differ: %q and %q", a, b)
	}
	long := FailureReason("invalid: " + strings.Repeat("wordé ", 100))
	if len(long) > MaxReasonBytes || !strings.HasPrefix(long, "invalid: word") {
		t.Errorf("long reason = %q (%d bytes), want a prefix of at most %d bytes", long, len(long), MaxReasonBytes)
	}
}
