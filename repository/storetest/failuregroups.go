package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the failed events grouped by reason, for the console.

// testFailureGroups stores failed events whose errors differ by their ids
// and emails only (three whose email is taken, one of them given up; two
// invalid ones, given up), and events that did not fail.
func testFailureGroups(t *testing.T, s repository.Store) {
	ctx := context.Background()
	retry := t0.Add(time.Hour)
	for i, f := range []struct {
		err   string
		retry *time.Time
	}{
		{"cannot be applied yet: apply event msg_a to user user_1: the user's email is held by another active user", &retry},
		{`invalid: data.email_addresses[0].email_address "jane@example.com" is not an email`, nil},
		{"cannot be applied yet: apply event msg_b to user user_2: the user's email is held by another active user", &retry},
		{`invalid: data.email_addresses[1].email_address "bob@example.org" is not an email`, nil},
		{"cannot be applied yet: apply event msg_c to user user_3: the user's email is held by another active user", nil},
	} {
		ev := newEvent(fmt.Sprintf("msg_fail_%d", i), fmt.Sprintf("user_%d", i), `{}`)
		ev.ReceivedAt = t0.Add(time.Duration(i) * time.Second)
		stored := record(t, s, ev)
		if err := s.Events().MarkFailed(ctx, stored.ID, f.err, f.retry); err != nil {
			t.Fatal(err)
		}
	}
	done := newEvent("msg_done", "user_9", `{}`)
	done.ReceivedAt = t0.Add(time.Minute)
	if err := s.Events().MarkProcessed(ctx, record(t, s, done).ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	stored := newEvent("msg_stored", "user_9", `{}`)
	stored.ReceivedAt = t0.Add(time.Minute)
	record(t, s, stored)

	got, err := s.Events().FailureGroups(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Complete || got.Scanned != 5 || len(got.Groups) != 2 {
		t.Fatalf("FailureGroups(100) = %+v; want the 5 failed events read, in 2 groups", got)
	}
	email, invalid := got.Groups[0], got.Groups[1]
	if email.Reason != "email_taken" || email.Count != 3 || email.GaveUp != 1 || email.LatestEventID != "msg_fail_4" ||
		!email.LatestAt.Equal(t0.Add(4*time.Second)) || !strings.Contains(email.LatestError, "msg_c") {
		t.Errorf("first group = %+v; want email_taken ×3, 1 given up, the latest msg_fail_4 with its error", email)
	}
	if invalid.Count != 2 || invalid.GaveUp != 2 || invalid.LatestEventID != "msg_fail_3" || !strings.HasPrefix(invalid.Reason, "invalid: ") {
		t.Errorf("second group = %+v; want the invalid ones ×2, both given up, the latest msg_fail_3", invalid)
	}
	for _, g := range got.Groups {
		if strings.ContainsAny(g.Reason, "@0123456789") || strings.Contains(g.Reason, "user_") || strings.Contains(g.Reason, "msg_") {
			t.Errorf("reason %q keeps an id, an email or a number", g.Reason)
		}
	}

	// The bound: the newest failed events first, and no more.
	for _, tc := range []struct {
		scan, scanned int
		complete      bool
		latest        []string
	}{
		{1, 1, false, []string{"msg_fail_4"}},
		{0, 1, false, []string{"msg_fail_4"}}, // at least one
		{2, 2, false, []string{"msg_fail_4", "msg_fail_3"}},
		{5, 5, true, []string{"msg_fail_4", "msg_fail_3"}},
	} {
		got, err := s.Events().FailureGroups(ctx, tc.scan)
		if err != nil {
			t.Fatal(err)
		}
		var latest []string
		for _, g := range got.Groups {
			latest = append(latest, g.LatestEventID)
		}
		if got.Scanned != tc.scanned || got.Complete != tc.complete || strings.Join(latest, " ") != strings.Join(tc.latest, " ") {
			t.Errorf("FailureGroups(%d) = %+v; want %d read (complete %v), groups of %v", tc.scan, got, tc.scanned, tc.complete, tc.latest)
		}
	}
}

func testFailureGroupsEmpty(t *testing.T, s repository.Store) {
	got, err := s.Events().FailureGroups(context.Background(), models.MaxFailureScan+1)
	if err != nil || !got.Complete || got.Scanned != 0 || got.Groups == nil || len(got.Groups) != 0 {
		t.Errorf("FailureGroups of a new store = %+v, %v; want complete, no group (an empty list)", got, err)
	}
}
