package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/sqlite"
)

// TestOpen_RunsRecordedBeforeTheKindsColumnStillRead makes a file at the
// schema before migrations/005_reconcile_kinds.sql, with a run an earlier
// version recorded, and opens it: the run reads with its users' counts,
// and no counts (not zeros) of organizations and memberships.
func TestOpen_RunsRecordedBeforeTheKindsColumnStillRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	names, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	i := slices.Index(names, filepath.Join("migrations", "005_reconcile_kinds.sql"))
	if i < 0 {
		t.Fatalf("no migrations/005_reconcile_kinds.sql among %v", names)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names[:i] {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	started := time.Date(2026, 2, 1, 6, 0, 0, 0, time.UTC)
	for _, q := range []string{
		"PRAGMA application_id = 1970501998", // usersync's (0x7573796e)
		fmt.Sprintf("PRAGMA user_version = %d", i),
		fmt.Sprintf(`INSERT INTO reconcile_runs (kind, triggered_by, started_at, duration_ms, success, error, clerk_users, local_users,
			applied, stale, unchanged, deleted, failed, refused, to_delete) VALUES ('reconcile', 'schedule', %d, 2500, 0,
			'11 users are absent from Clerk, more than allowed: nothing deleted', 20, 31, 1, 2, 17, 0, 0, 1, 11)`, started.UnixMilli()),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	runs, err := s.Runs().Last(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("read %d runs, want the one recorded", len(runs))
	}
	r := runs[0]
	want := models.ReconcileCounts{Clerk: 20, Local: 31, Applied: 1, Stale: 2, Unchanged: 17, Refused: true, ToDelete: 11}
	if r.Users == nil || *r.Users != want || r.Organizations != nil || r.Memberships != nil || !r.Refused() ||
		!r.StartedAt.Equal(started) || r.Duration != 2500*time.Millisecond || r.Success || r.Kind != "reconcile" || r.Trigger != "schedule" {
		t.Errorf("the earlier run reads %+v (users %+v, organizations %+v, memberships %+v); want users %+v and no other kind",
			r, r.Users, r.Organizations, r.Memberships, want)
	}
	// And a run recorded now sits beside it.
	now := models.ReconcileSummary{Kind: "backfill", Trigger: "command", StartedAt: started.Add(time.Hour), Success: true,
		Organizations: &models.ReconcileCounts{Clerk: 2, Local: -1, Applied: 2}}
	if _, err := s.Runs().Record(ctx, now); err != nil {
		t.Fatal(err)
	}
	if runs, err = s.Runs().Last(ctx, 10); err != nil || len(runs) != 2 || runs[0].Users != nil || runs[0].Organizations == nil ||
		runs[0].Organizations.Applied != 2 || runs[1].Users == nil {
		t.Errorf("after a new run: %+v, %v; want it (organizations only) before the earlier one", runs, err)
	}
}
