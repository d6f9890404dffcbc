package mongo_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/repotest"
)

// TestEmbedded_LookupsByIDUseTheIndex asks SQLite how it runs FerretDB's
// own WHERE clause for a filter of exactly {_id: v} on every table of
// usersync's database, and fails unless it searches an index. A FerretDB
// upgrade that changes the clause brings back a scan of the whole table
// for every webhook; this test is how that is noticed.
func TestEmbedded_LookupsByIDUseTheIndex(t *testing.T) {
	if repotest.UsesMongoDB() {
		t.Skip("the embedded engine's SQLite files")
	}
	ctx := context.Background()
	engine := repotest.StartEngine(t)
	s := repotest.NewStoreAt(t, engine.URI(), repository.Options{})
	// Data in every collection, so FerretDB has written its tables.
	if _, err := s.Users().Apply(ctx, change("user_1", "msg_1", time.Second, "a@example.com"), time.Now()); err != nil {
		t.Fatal(err)
	}
	ev, _, err := s.Events().Record(ctx, newEvent("msg_1", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, time.Now()); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+repository.SQLiteFile(engine.Dir(), s.Database().Name())+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := map[string]string{}
	rows, err := db.QueryContext(ctx, `SELECT name, table_name FROM _ferretdb_collections`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, table string
		if err := rows.Scan(&name, &table); err != nil {
			t.Fatal(err)
		}
		tables[name] = table
	}
	rows.Close()
	for _, coll := range []string{repository.UsersCollection, repository.EventsCollection, repository.CountersCollection} {
		table, ok := tables[coll]
		if !ok {
			t.Errorf("no table for collection %s in %v", coll, tables)
			continue
		}
		// FerretDB 1.24's query for a filter of exactly {_id: v}
		// (internal/backends/sqlite: metadata.IDColumn).
		q := `EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM "` + table + `" WHERE _ferretdb_sjson->'$._id' = ?`
		plan := explainPlan(t, db, q, ev.ID)
		if !strings.Contains(plan, "SEARCH") || !strings.Contains(plan, "USING INDEX") {
			t.Errorf("%s: lookup by _id: plan %q, want SEARCH … USING INDEX", coll, plan)
		}
	}
}

func explainPlan(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "; ")
}
