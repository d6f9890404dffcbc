package mongo_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/repotest"
)

// searchTimes are the times of seedSearchMix: the sweep's stuckBefore
// and now and retention's cutoff, each with a fraction of a millisecond
// that BSON does not keep.
var (
	searchBase   = t0.Truncate(time.Millisecond)
	searchStuck  = searchBase.Add(90*time.Minute + 700*time.Microsecond)
	searchNow    = searchBase.Add(100*time.Minute + 300*time.Microsecond)
	searchCutoff = searchBase.Add(50*time.Minute + 900*time.Microsecond)
)

// seedSearchMix stores a mix of stored, failed (due, not yet due, given
// up) and processed events, with times on both sides of, and equal to,
// the times of searchTimes, some seeded and some written by the store.
func seedSearchMix(t *testing.T, s *repository.Store) {
	t.Helper()
	ctx := context.Background()
	var evs []models.Event
	n := 0
	add := func(status models.EventStatus, received time.Time, mod func(*models.Event)) {
		n++
		ev := newEvent(fmt.Sprintf("msg_mix_%02d", n), fmt.Sprintf(`{"n":%d}`, n))
		ev.Status, ev.ReceivedAt = status, received
		if n%3 != 0 { // some without a source timestamp, which come first
			st := searchBase.Add(time.Duration(97*n%61) * time.Minute)
			ev.SourceTimestamp = &st
		}
		if mod != nil {
			mod(&ev)
		}
		evs = append(evs, ev)
	}
	at := func(d time.Duration) *time.Time { v := searchBase.Add(d); return &v }
	// Stored: every 10 minutes up to stuckBefore's millisecond (not stuck),
	// one a millisecond before it, one within its millisecond, and two
	// received at the same time.
	for i := range 10 {
		add(models.StatusStored, searchBase.Add(time.Duration(i)*10*time.Minute+time.Second), nil)
	}
	add(models.StatusStored, searchStuck.Truncate(time.Millisecond), nil)
	add(models.StatusStored, searchStuck.Truncate(time.Millisecond).Add(-time.Millisecond), nil)
	add(models.StatusStored, searchStuck.Truncate(time.Millisecond).Add(200*time.Microsecond), nil)
	add(models.StatusStored, searchBase.Add(33*time.Minute), nil)
	add(models.StatusStored, searchBase.Add(33*time.Minute), nil)
	// Failed with a retry: every 7 minutes up to now's millisecond (due),
	// one a millisecond after it (not due).
	for k := range 6 {
		retry := searchNow.Truncate(time.Millisecond).Add(-time.Duration(k) * 7 * time.Minute)
		add(models.StatusFailed, searchBase.Add(time.Duration(k)*11*time.Minute+2*time.Second), func(ev *models.Event) {
			ev.RetryAt, ev.Attempts, ev.Error = &retry, 1, "boom"
		})
	}
	add(models.StatusFailed, searchBase.Add(3*time.Second), func(ev *models.Event) {
		ev.RetryAt, ev.Attempts = at(100*time.Minute+time.Millisecond), 1
	})
	// Given up: failed without a retry.
	for k := range 3 {
		add(models.StatusFailed, searchBase.Add(time.Duration(k)*time.Minute+4*time.Second), func(ev *models.Event) {
			ev.Attempts, ev.Error = 5, "gave up"
		})
	}
	// Processed every 10 minutes, in the order processed, one within the
	// cutoff's millisecond.
	outcomes := []models.Outcome{models.OutcomeApplied, models.OutcomeStale, models.OutcomeDeletedUser}
	for j := range 10 {
		processed := at(time.Duration(j) * 10 * time.Minute)
		if j == 5 {
			processed = at(searchCutoff.Truncate(time.Millisecond).Sub(searchBase) + 100*time.Microsecond)
		}
		add(models.StatusProcessed, searchBase.Add(time.Duration(j)*time.Minute), func(ev *models.Event) {
			ev.ProcessedAt, ev.Outcome, ev.Attempts = processed, outcomes[j%3], 1
		})
	}
	if err := s.SeedEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	// And as the store writes them: stored, failed with and without a
	// retry, processed.
	var ids []string
	for i := range 4 {
		ev := newEvent(fmt.Sprintf("msg_live_%d", i), `{}`)
		ev.ReceivedAt = searchBase.Add(time.Duration(i)*20*time.Minute + 6*time.Second)
		rec, _, err := s.Events().Record(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	retry := searchBase.Add(70 * time.Minute)
	for _, err := range []error{
		s.Events().MarkFailed(ctx, ids[1], "boom", &retry),
		s.Events().MarkFailed(ctx, ids[2], "boom", nil),
		s.Events().MarkProcessed(ctx, ids[3], models.OutcomeApplied, searchBase.Add(99*time.Minute)), // the last processed
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// newSQLStore is a store on the embedded engine at uri, whose events are
// searched in SQL, seeded with seedSearchMix.
func newSQLStore(t *testing.T, uri string) *repository.Store {
	t.Helper()
	s := repotest.NewStoreAt(t, uri, repository.Options{})
	if !repository.SearchesInSQL(s) {
		t.Fatal("the store on the embedded engine does not search events in SQL")
	}
	seedSearchMix(t, s)
	return s
}

// TestEventSearch_SQLFindsTheSameDueEventsAsTheDriver compares the
// sweep's batches found in SQL with those found through the driver, at
// times equal to the events' and with limits that cut the lists.
func TestEventSearch_SQLFindsTheSameDueEventsAsTheDriver(t *testing.T) {
	ctx := context.Background()
	s := newSQLStore(t, embeddedURI(t))
	driver := repository.WithDriverSearchForTest(s)
	for _, c := range []struct {
		name            string
		stuckBefore, at time.Time
	}{
		{"at the seeded times", searchStuck, searchNow},
		{"exactly on the millisecond", searchStuck.Truncate(time.Millisecond), searchNow.Truncate(time.Millisecond)},
		{"before every event", searchBase.Add(-time.Hour), searchBase.Add(-time.Hour)},
		{"after every event", searchBase.Add(24 * time.Hour), searchBase.Add(24 * time.Hour)},
		{"halfway", searchBase.Add(45 * time.Minute), searchBase.Add(80 * time.Minute)},
	} {
		for _, limit := range []int{1, 2, 3, 5, 8, 13, 100} {
			want, err := driver.Due(ctx, c.stuckBefore, c.at, limit)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Events().Due(ctx, c.stuckBefore, c.at, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, limit %d: Due in SQL = %v; through the driver %v", c.name, limit, eventIDs(got), eventIDs(want))
			}
			if c.name == "at the seeded times" && limit == 100 && len(want) != 20 {
				t.Errorf("%s: %d events due, want 13 stored and 7 failed: %v", c.name, len(want), eventIDs(want))
			}
		}
	}
}

// embeddedURI is the shared embedded engine's URI; the test is skipped
// on MongoDB.
func embeddedURI(t *testing.T) string {
	t.Helper()
	if repotest.UsesMongoDB() {
		t.Skip("searches in SQL are the embedded engine's")
	}
	return repotest.URI(t)
}

func eventIDs(evs []models.Event) []string {
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.EventID)
	}
	return ids
}

// TestEventSearch_SQLFindsTheSameOldEventsAsTheDriver compares
// retention's search in SQL with the driver's, and then what retention
// deletes and counts.
func TestEventSearch_SQLFindsTheSameOldEventsAsTheDriver(t *testing.T) {
	ctx := context.Background()
	s := newSQLStore(t, embeddedURI(t))
	driver := repository.WithDriverSearchForTest(s)
	for _, cutoff := range []time.Time{
		searchCutoff, searchCutoff.Truncate(time.Millisecond), searchBase.Add(-time.Hour),
		searchBase.Add(24 * time.Hour), searchBase.Add(25 * time.Minute),
	} {
		// The processed events were stored in the order processed, the
		// order in which the driver finds them (it has no sort) and SQL
		// returns them, so that a limit cuts the same list.
		for _, limit := range []int{1, 2, 4, 100} {
			want, err := repository.ProcessedBeforeForTest(ctx, driver, cutoff, limit)
			if err != nil {
				t.Fatal(err)
			}
			got, err := repository.ProcessedBeforeForTest(ctx, s.Events().(*repository.Events), cutoff, limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cutoff %s, limit %d: found in SQL %v; through the driver %v", cutoff.Format(time.RFC3339Nano), limit, got, want)
			}
		}
	}
	before, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Events().DeleteProcessedBefore(ctx, searchCutoff, 100)
	if err != nil || n != 5 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want the 5 processed before the cutoff", n, err)
	}
	after, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := before.ByStatus[models.StatusProcessed] - after.ByStatus[models.StatusProcessed]; got != 5 {
		t.Errorf("processed count fell by %d, want 5", got)
	}
	if left, _ := repository.ProcessedBeforeForTest(ctx, s.Events().(*repository.Events), searchCutoff, 100); len(left) != 0 {
		t.Errorf("after retention, still found %v", left)
	}
}

// TestEventSearch_SQLCountsTheSameAsTheDriver compares Stats.
func TestEventSearch_SQLCountsTheSameAsTheDriver(t *testing.T) {
	ctx := context.Background()
	s := newSQLStore(t, embeddedURI(t))
	want, err := repository.WithDriverSearchForTest(s).Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stats in SQL = %+v; through the driver %+v", got, want)
	}
	if want.ByStatus[models.StatusStored] != 16 || want.ByStatus[models.StatusFailed] != 12 || want.GaveUp != 4 {
		t.Errorf("Stats = %+v; want 16 stored, 12 failed, 4 given up", want)
	}
}

// TestEmbedded_EventSearchesUseTheIndexes asks SQLite how it runs each
// search of events in SQL, and fails unless it searches its index
// without a scan of the table or a sort, and unless the engine still
// stores a date as an integer of Unix milliseconds and a status as a
// string, which the queries compare. An engine upgrade or a query change
// that loses either brings back reading every event.
func TestEmbedded_EventSearchesUseTheIndexes(t *testing.T) {
	ctx := context.Background()
	if repotest.UsesMongoDB() {
		t.Skip("the embedded engine's SQLite files")
	}
	engine := repotest.StartEngine(t)
	s := newSQLStore(t, engine.URI())
	db, err := sql.Open("sqlite", "file:"+repository.SQLiteFile(engine.Dir(), s.Database().Name())+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var table string
	if err := db.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = ?`,
		repository.EventsCollection).Scan(&table); err != nil {
		t.Fatal(err)
	}

	var ms int64
	var types string
	err = db.QueryRowContext(ctx, `SELECT _ferretdb_sjson->>'$.receivedAt', json_type(_ferretdb_sjson, '$.receivedAt') || ' ' ||
		json_type(_ferretdb_sjson, '$.status') || ' ' || json_type(_ferretdb_sjson, '$._id') FROM "`+table+`"
		WHERE _ferretdb_sjson->>'$.eventId' = 'msg_live_0'`).Scan(&ms, &types)
	if err != nil {
		t.Fatal(err)
	}
	if want := searchBase.Add(6 * time.Second).UnixMilli(); ms != want || types != "integer text text" {
		t.Errorf("receivedAt, and types of receivedAt, status, _id = %d, %q; want %d, \"integer text text\"", ms, types, want)
	}

	for _, q := range repository.SQLiteEventQueries(table, searchNow) {
		plan := explainPlan(t, db, "EXPLAIN QUERY PLAN "+q.SQL, q.Args...)
		if !strings.Contains(plan, "SEARCH") || !strings.Contains(plan, "INDEX "+q.Index+" ") ||
			strings.Contains(plan, "SCAN") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan %q; want SEARCH … USING INDEX %s, no SCAN, no TEMP B-TREE", q.Name, plan, q.Index)
		}
	}
}
