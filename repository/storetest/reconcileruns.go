package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the summaries of reconcile runs kept for the console.

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
	return fmt.Sprintf("{ID:%s Kind:%s Trigger:%s StartedAt:%v Duration:%v Success:%v Error:%q Users:%s Organizations:%s Memberships:%s Invitations:%s SubscriptionItems:%s}",
		r.ID, r.Kind, r.Trigger, r.StartedAt, r.Duration, r.Success, r.Error, counts(r.Users), counts(r.Organizations), counts(r.Memberships),
		counts(r.Invitations), counts(r.SubscriptionItems))
}

// testReconcileRunKinds checks that a summary's counts of each kind come
// back as recorded, subscription items' too, and that a kind a run did
// not read (not asked for, or turned off in the Clerk instance) comes back
// as none, not as zeros: a run without subscription items' counts is
// stored as a run kept before they were counted was, and reads so.
func testReconcileRunKinds(t *testing.T, s repository.Store) {
	ctx := context.Background()
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	runs := []models.ReconcileSummary{
		{
			Kind: "reconcile", Trigger: "schedule", StartedAt: start, Duration: 2 * time.Second, Success: true,
			Users:             &models.ReconcileCounts{Clerk: 1234, Local: 1236, Applied: 5, Stale: 1, Unchanged: 1228, Deleted: 2},
			Organizations:     &models.ReconcileCounts{Clerk: 12, Local: 13, Unchanged: 12, Deleted: 1},
			Memberships:       &models.ReconcileCounts{Clerk: 40, Local: 41, Applied: 1, Stale: 2, Unchanged: 37, Deleted: 1, Failed: 3},
			Invitations:       &models.ReconcileCounts{Clerk: 6, Local: -1, Applied: 2, Stale: 1, Unchanged: 3},
			SubscriptionItems: &models.ReconcileCounts{Clerk: 9, Local: -1, Applied: 2, Stale: 1, Unchanged: 5, Failed: 1},
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
		{
			Kind: "backfill", Trigger: "command", StartedAt: start.Add(150 * time.Minute), Success: true,
			SubscriptionItems: &models.ReconcileCounts{Clerk: 3, Local: -1, Applied: 3},
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
