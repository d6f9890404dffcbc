package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises of what the stores keep for the operator's console: the
// activity counts of its charts, the failed events grouped by reason, and
// the summaries of reconcile runs.

// testActivityAddsUp checks that every count lands in its minute and in
// its hour, that the hours are the sums of their minutes, and that a range
// reads only the buckets that start in it.
func testActivityAddsUp(t *testing.T, s repository.Store) {
	ctx := context.Background()
	h0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, a := range []struct {
		at   time.Time
		kind string
		n    int64
	}{
		{h0.Add(30 * time.Second), models.ActivityReceived, 3},
		{h0.Add(59 * time.Second), models.ActivityReceived, 2},
		{h0.Add(59 * time.Second), models.ActivityApplied, 4},
		{h0.Add(61 * time.Second), models.ActivityFailed, 1},
		{h0.Add(59*time.Minute + 59*time.Second), models.ActivityReceived, 7},
		{h0.Add(time.Hour), models.ActivityReceived, 11},
		{h0.Add(time.Hour), models.ActivityStale, 0}, // nothing to add
	} {
		if err := s.Activity().Add(ctx, a.at, a.kind, a.n); err != nil {
			t.Fatalf("Add(%v, %s, %d): %v", a.at, a.kind, a.n, err)
		}
	}
	minutes, err := s.Activity().Buckets(ctx, models.ActivityMinute, h0, h0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []models.ActivityBucket{
		{Start: h0, Counts: map[string]int64{"received": 5, "applied": 4}},
		{Start: h0.Add(time.Minute), Counts: map[string]int64{"failed": 1}},
		{Start: h0.Add(59 * time.Minute), Counts: map[string]int64{"received": 7}},
		{Start: h0.Add(time.Hour), Counts: map[string]int64{"received": 11}},
	}
	checkBuckets(t, "minutes", minutes, want)
	hours, err := s.Activity().Buckets(ctx, models.ActivityHour, h0, h0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "hours", hours, []models.ActivityBucket{
		{Start: h0, Counts: map[string]int64{"received": 12, "applied": 4, "failed": 1}},
		{Start: h0.Add(time.Hour), Counts: map[string]int64{"received": 11}},
	})
	mid, err := s.Activity().Buckets(ctx, models.ActivityMinute, h0.Add(time.Minute), h0.Add(59*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "minutes of [10:01, 10:59)", mid, want[1:2])
}

func checkBuckets(t *testing.T, what string, got, want []models.ActivityBucket) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || got[i].Start.Location() != time.UTC || !maps.Equal(got[i].Counts, want[i].Counts) {
			t.Errorf("%s[%d] = %v %v, want %v %v (UTC)", what, i, got[i].Start, got[i].Counts, want[i].Start, want[i].Counts)
		}
	}
}

// testActivityConcurrentAdds adds to one bucket from many goroutines, as
// several instances flushing at once do.
func testActivityConcurrentAdds(t *testing.T, s repository.Store) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	const writers, adds = 8, 10
	var wg stdsync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range adds {
				if err := s.Activity().Add(ctx, at, models.ActivityReceived, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, size := range []time.Duration{models.ActivityMinute, models.ActivityHour} {
		got, err := s.Activity().Buckets(ctx, size, at, at.Add(size))
		if err != nil {
			t.Fatal(err)
		}
		checkBuckets(t, size.String()+" buckets", got, []models.ActivityBucket{{Start: at, Counts: map[string]int64{"received": writers * adds}}})
	}
}

func testActivityRetention(t *testing.T, s repository.Store) {
	ctx := context.Background()
	old := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	later := old.Add(models.ActivityMinuteRetention + time.Hour)
	for _, at := range []time.Time{old, later} {
		if err := s.Activity().Add(ctx, at, models.ActivityReceived, 1); err != nil {
			t.Fatal(err)
		}
	}
	minutes, err := s.Activity().Buckets(ctx, models.ActivityMinute, old, later.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "minutes", minutes, []models.ActivityBucket{{Start: later, Counts: map[string]int64{"received": 1}}})
	hours, err := s.Activity().Buckets(ctx, models.ActivityHour, old, later.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "hours (kept "+models.ActivityHourRetention.String()+")", hours, []models.ActivityBucket{
		{Start: old, Counts: map[string]int64{"received": 1}},
		{Start: later, Counts: map[string]int64{"received": 1}},
	})
	if err := s.Activity().Add(ctx, old.Add(models.ActivityHourRetention+2*time.Hour), models.ActivityReceived, 1); err != nil {
		t.Fatal(err)
	}
	hours, err = s.Activity().Buckets(ctx, models.ActivityHour, old, old.Add(time.Hour))
	if err != nil || len(hours) != 0 {
		t.Errorf("hour buckets past %s = %+v, %v; want none", models.ActivityHourRetention, hours, err)
	}
}

func testActivityRefusesWhatIsNotAName(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, kind := range []string{"", "a.b", "$inc", "Received", "x y", "n.received", strings.Repeat("a", 33)} {
		if err := s.Activity().Add(ctx, t0, kind, 1); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("Add(%q) = %v, want ErrInvalid", kind, err)
		}
	}
	for _, size := range []time.Duration{time.Second, 15 * time.Minute, 24 * time.Hour} {
		if _, err := s.Activity().Buckets(ctx, size, t0, t0.Add(time.Hour)); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("Buckets(%s) = %v, want ErrInvalid", size, err)
		}
	}
}

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

func testReconcileRuns(t *testing.T, s repository.Store) {
	ctx := context.Background()
	if runs, err := s.Runs().Last(ctx, 10); err != nil || len(runs) != 0 {
		t.Fatalf("Last on a new store = %+v, %v; want none", runs, err)
	}
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	total := models.KeptReconcileRuns + 3
	ids := map[string]bool{}
	for i := range total {
		r := models.ReconcileSummary{
			Kind: "reconcile", Trigger: "schedule", StartedAt: start.Add(time.Duration(i) * time.Hour),
			Duration: 1500 * time.Millisecond, Success: i%2 == 0,
			Users: &models.ReconcileCounts{Clerk: 100 + i, Local: -1, Applied: i, Deleted: 1},
		}
		if i == total-1 {
			r.Kind, r.Trigger, r.Success = "backfill", "command", false
			r.Users.Refused, r.Users.ToDelete = true, 12
			r.Error = strings.Repeat("x", models.MaxRunError+10)
		}
		got, err := s.Runs().Record(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID == "" || ids[got.ID] {
			t.Fatalf("Record gave run %d the id %q, empty or given before", i, got.ID)
		}
		ids[got.ID] = true
	}
	runs, err := s.Runs().Last(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != models.KeptReconcileRuns {
		t.Fatalf("kept %d runs, want %d", len(runs), models.KeptReconcileRuns)
	}
	for i := 1; i < len(runs); i++ {
		if !runs[i].StartedAt.Before(runs[i-1].StartedAt) {
			t.Fatalf("run %d started %v, not before run %d (%v): want the latest first", i, runs[i].StartedAt, i-1, runs[i-1].StartedAt)
		}
	}
	newest, oldest := runs[0], runs[len(runs)-1]
	want := models.ReconcileSummary{
		ID: newest.ID, Kind: "backfill", Trigger: "command", StartedAt: start.Add(time.Duration(total-1) * time.Hour),
		Duration: 1500 * time.Millisecond, Error: strings.Repeat("x", models.MaxRunError),
		Users: &models.ReconcileCounts{Clerk: 100 + total - 1, Local: -1, Applied: total - 1, Deleted: 1, Refused: true, ToDelete: 12},
	}
	checkRun(t, "newest", newest, want)
	if !oldest.StartedAt.Equal(start.Add(3 * time.Hour)) {
		t.Errorf("oldest kept started %v, want %v", oldest.StartedAt, start.Add(3*time.Hour))
	}
	two, err := s.Runs().Last(ctx, 2)
	if err != nil || len(two) != 2 || two[0].ID != newest.ID || two[1].ID != runs[1].ID {
		t.Errorf("Last(2) = %+v, %v; want the two latest", two, err)
	}
	if one, err := s.Runs().Last(ctx, 0); err != nil || len(one) != 1 {
		t.Errorf("Last(0) = %+v, %v; want one", one, err)
	}
}

// checkRun compares a run read back with the one recorded: its start in
// UTC, every count of every kind, and nil for each kind the run did not
// read.
func checkRun(t *testing.T, name string, got, want models.ReconcileSummary) {
	t.Helper()
	same := got
	if got.StartedAt.Equal(want.StartedAt) && got.StartedAt.Location() == time.UTC {
		same.StartedAt = want.StartedAt // compared here; DeepEqual would compare their encodings
	}
	if !reflect.DeepEqual(same, want) {
		t.Errorf("%s = %s\nwant %s (UTC)", name, runString(got), runString(want))
	}
}

func runString(r models.ReconcileSummary) string {
	counts := func(c *models.ReconcileCounts) string {
		if c == nil {
			return "nil"
		}
		return fmt.Sprintf("%+v", *c)
	}
	return fmt.Sprintf("{ID:%s Kind:%s Trigger:%s StartedAt:%v Duration:%v Success:%v Error:%q Users:%s Organizations:%s Memberships:%s}",
		r.ID, r.Kind, r.Trigger, r.StartedAt, r.Duration, r.Success, r.Error, counts(r.Users), counts(r.Organizations), counts(r.Memberships))
}

// testReconcileRunKinds checks that a summary's counts of each kind come
// back as recorded, and that a kind a run did not read (not asked for, or
// turned off in the Clerk instance) comes back as none, not as zeros.
func testReconcileRunKinds(t *testing.T, s repository.Store) {
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	runs := []models.ReconcileSummary{
		{
			Kind: "reconcile", Trigger: "schedule", StartedAt: start, Duration: 2 * time.Second, Success: true,
			Users:         &models.ReconcileCounts{Clerk: 1234, Local: 1236, Applied: 5, Stale: 1, Unchanged: 1228, Deleted: 2},
			Organizations: &models.ReconcileCounts{Clerk: 12, Local: 13, Unchanged: 12, Deleted: 1},
			Memberships:   &models.ReconcileCounts{Clerk: 40, Local: 41, Applied: 1, Stale: 2, Unchanged: 37, Deleted: 1, Failed: 3},
		},
		{
			Kind: "reconcile", Trigger: "command", StartedAt: start.Add(time.Hour), Success: false,
			Error:         "organizations absent from Clerk, more than allowed: nothing deleted",
			Users:         &models.ReconcileCounts{Clerk: 3, Local: 3, Unchanged: 3},
			Organizations: &models.ReconcileCounts{Clerk: 1, Local: 4, Unchanged: 1, Refused: true, ToDelete: 3},
		},
		{
			Kind: "backfill", Trigger: "command", StartedAt: start.Add(2 * time.Hour), Success: true,
			Memberships: &models.ReconcileCounts{Clerk: 7, Local: -1, Applied: 7},
		},
		{Kind: "reconcile", Trigger: "command", StartedAt: start.Add(3 * time.Hour), Error: "reconcile stopped before any listing"},
	}
	for _, r := range runs {
		if _, err := s.Runs().Record(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Runs().Last(ctx, len(runs))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(runs) {
		t.Fatalf("Last(%d) = %d runs", len(runs), len(got))
	}
	for i, r := range runs {
		g := got[len(runs)-1-i]
		r.ID = g.ID
		checkRun(t, fmt.Sprintf("run %d", i), g, r)
		if g.Refused() != (i == 1) {
			t.Errorf("run %d: Refused() = %v, want %v", i, g.Refused(), i == 1)
		}
	}
}
