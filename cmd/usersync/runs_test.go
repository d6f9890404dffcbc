package main

import (
	"context"
	"testing"

	"github.com/usersync/usersync/models"
)

// TestRuns_ReconcileAndBackfillRecordWhatTheyDidButNotDryRuns checks the
// run summaries the console shows: each real run of reconcile and
// backfill is recorded with its counts, a refused one as failed, a dry run
// not at all.
func TestRuns_ReconcileAndBackfillRecordWhatTheyDidButNotDryRuns(t *testing.T) {
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
		if r.Kind != kind || r.Trigger != "command" || r.Success != success || r.ClerkUsers != clerkUsers || r.Deleted != deleted || r.StartedAt.IsZero() {
			t.Errorf("%s run = %+v; want %s by command, success %v, %d in Clerk, %d deleted", name, r, kind, success, clerkUsers, deleted)
		}
	}
	want("backfill", backfill, "backfill", true, 2, 0)
	if backfill.Applied != 2 || backfill.LocalUsers != -1 {
		t.Errorf("backfill run = %+v; want 2 applied, local users not read", backfill)
	}
	want("refused", refused, "reconcile", false, 2, 0)
	if !refused.Refused || refused.ToDelete != 2 || refused.Error == "" {
		t.Errorf("refused run = %+v; want refused, 2 to delete, with an error", refused)
	}
	want("last", last, "reconcile", true, 2, 2)
	if last.LocalUsers != 4 {
		t.Errorf("last run's local users = %d, want 4", last.LocalUsers)
	}
}
