package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/usersync/usersync/models"
)

// TestRuns_ReconcileAndBackfillRecordWhatTheyDidButNotDryRuns checks the
// run summaries the console shows: each real run of reconcile and
// backfill is recorded with its counts, a refused one as failed, a dry run
// not at all.
func TestRuns_ReconcileAndBackfillRecordWhatTheyDidButNotDryRuns(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	for i := 2; i < 4; i++ {
		e.created(t, i) // local users Clerk does not have
	}
	e.mustBackfill(t)
	e.mustReconcile(t, "-dry-run")
	if _, err := e.reconcile(t, "-max-deletes", "1"); err == nil {
		t.Fatal("reconcile with 2 users to delete and -max-deletes 1 succeeded")
	}
	e.mustReconcile(t)

	runs, err := e.store.Runs().Last(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("recorded %d runs, want 3 (backfill, refused, reconcile; no dry run): %+v", len(runs), runs)
	}
	last, refused, backfill := runs[0], runs[1], runs[2]
	want := func(name string, r models.ReconcileSummary, kind string, success bool, clerkUsers, deleted int) {
		t.Helper()
		if r.Kind != kind || r.Trigger != "command" || r.Success != success || r.Users == nil || r.Users.Clerk != clerkUsers ||
			r.Users.Deleted != deleted || r.StartedAt.IsZero() {
			t.Errorf("%s run = %+v (users %+v); want %s by command, success %v, %d in Clerk, %d deleted", name, r, r.Users, kind, success, clerkUsers, deleted)
		}
	}
	want("backfill", backfill, "backfill", true, 2, 0)
	if backfill.Users.Applied != 2 || backfill.Users.Local != -1 {
		t.Errorf("backfill run's users = %+v; want 2 applied, local users not read", backfill.Users)
	}
	want("refused", refused, "reconcile", false, 2, 0)
	if !refused.Refused() || refused.Users.ToDelete != 2 || refused.Error == "" {
		t.Errorf("refused run = %+v (users %+v); want refused, 2 to delete, with an error", refused, refused.Users)
	}
	want("last", last, "reconcile", true, 2, 2)
	if last.Users.Local != 4 {
		t.Errorf("last run's local users = %d, want 4", last.Users.Local)
	}
}

// TestRuns_ARunRecordsTheCountsOfEachKindItReadAndNoneOfTheOthers checks
// the summaries of runs of every kind, of one kind (-kinds), and of an
// instance with organizations turned off: each kind read has its counts,
// as the run's summary line prints them; a kind not read has none, not
// zeros.
func TestRuns_ARunRecordsTheCountsOfEachKindItReadAndNoneOfTheOthers(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	e.clerkHas(t, []int{0}, []membership{{0, 0, 0}})
	e.created(t, 0)
	e.created(t, 2) // deleted in Clerk
	e.orgCreated(t, 0)
	e.orgCreated(t, 1) // deleted in Clerk
	out := e.mustReconcile(t)
	wantLine(t, out, "reconcile: done: users in Clerk 2, local users 2, applied 1, stale 0, deleted 1, unchanged 1, failed 0")
	wantLine(t, out, "reconcile: done: organizations in Clerk 1, local organizations 2, applied 0, stale 0, deleted 1, unchanged 1, failed 0")
	wantLine(t, out, "reconcile: done: memberships in Clerk 1, local memberships 0, applied 1, stale 0, deleted 0, unchanged 0, failed 0")
	e.mustBackfill(t, "-kinds", "organizations")
	e.clerk.TurnOrganizationsOff()
	e.mustReconcile(t)

	runs, err := e.store.Runs().Last(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("recorded %d runs, want 3", len(runs))
	}
	counts := func(c *models.ReconcileCounts) string {
		if c == nil {
			return "none"
		}
		return fmt.Sprintf("%+v", *c)
	}
	for _, tc := range []struct {
		name               string
		run                models.ReconcileSummary
		users, orgs, mship *models.ReconcileCounts
	}{
		{"every kind", runs[2],
			&models.ReconcileCounts{Clerk: 2, Local: 2, Applied: 1, Unchanged: 1, Deleted: 1},
			&models.ReconcileCounts{Clerk: 1, Local: 2, Unchanged: 1, Deleted: 1},
			&models.ReconcileCounts{Clerk: 1, Local: 0, Applied: 1}},
		{"backfill -kinds organizations", runs[1], nil, &models.ReconcileCounts{Clerk: 1, Local: -1, Unchanged: 1}, nil},
		{"organizations turned off", runs[0], &models.ReconcileCounts{Clerk: 2, Local: 2, Unchanged: 2}, nil, nil},
	} {
		r := tc.run
		if !r.Success || counts(r.Users) != counts(tc.users) || counts(r.Organizations) != counts(tc.orgs) || counts(r.Memberships) != counts(tc.mship) {
			t.Errorf("%s: success %v, users %s, organizations %s, memberships %s\nwant success, users %s, organizations %s, memberships %s",
				tc.name, r.Success, counts(r.Users), counts(r.Organizations), counts(r.Memberships), counts(tc.users), counts(tc.orgs), counts(tc.mship))
		}
	}
}
