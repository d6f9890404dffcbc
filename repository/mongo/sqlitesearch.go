package mongo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// The embedded engine keeps each document as one JSON text in the one
// column _ferretdb_sjson of its collection's table (FerretDB 1.24
// internal/handler/sjson): a string as a JSON string, an ObjectID as its
// 24 hex digits (lowercase), a date as a JSON number of Unix
// milliseconds, a null as JSON null, and a field that is not set is not
// there. So SQLite can index and compare the fields the background work
// searches on with ->> (a JSON null or a missing field is SQL NULL, which
// no comparison matches), and a time compares as its Unix milliseconds,
// the precision BSON stores. sqliteSearch asks these questions in SQL on
// the table, through SQLite indexes on exactly the expressions its
// queries use, which Prepare makes next to the _id one (see
// sqliteindex.go); FerretDB does not know them, and they go with the
// table. TestEmbedded_EventSearchesUseTheIndexes fails if a query or an
// engine upgrade loses them.

// The expressions of the fields, as the indexes and the queries spell them.
const (
	sjID          = `_ferretdb_sjson->>'$._id'`
	sjStatus      = `_ferretdb_sjson->>'$.status'`
	sjReceivedAt  = `_ferretdb_sjson->>'$.receivedAt'`
	sjRetryAt     = `_ferretdb_sjson->>'$.retryAt'`
	sjProcessedAt = `_ferretdb_sjson->>'$.processedAt'`
	sjOutcome     = `_ferretdb_sjson->>'$.outcome'`
)

// eventSQLiteIndexes are the indexes of the events table, named
// "<table><suffix>" (see idIndexSuffix). Each ends in _id, so that the
// queries read only the index.
var eventSQLiteIndexes = []struct{ suffix, columns string }{
	// Stuck stored events, oldest first; the counts per status.
	{"_usersync_status", sjStatus + ", " + sjReceivedAt + ", " + sjID},
	// Failed events due, earliest first; given-up ones (retryAt NULL).
	{"_usersync_retryAt", sjRetryAt + ", " + sjStatus + ", " + sjID},
	// Processed events past retention, with their outcomes.
	{"_usersync_processedAt", sjProcessedAt + ", " + sjOutcome + ", " + sjID},
}

// The queries, on the events table; each one's arguments follow it.
func dueStoredSQL(table string) string {
	return fmt.Sprintf(`SELECT %[2]s FROM %[1]q WHERE %[3]s = ? AND %[4]s < ? ORDER BY %[4]s, %[2]s LIMIT ?`,
		table, sjID, sjStatus, sjReceivedAt) // status, stuckBefore (ms), limit
}

func dueFailedSQL(table string) string {
	return fmt.Sprintf(`SELECT %[2]s FROM %[1]q WHERE %[3]s <= ? ORDER BY %[3]s LIMIT ?`,
		table, sjID, sjRetryAt) // now (ms), limit
}

func processedBeforeSQL(table string) string {
	return fmt.Sprintf(`SELECT %[2]s, %[3]s FROM %[1]q WHERE %[4]s < ? ORDER BY %[4]s LIMIT ?`,
		table, sjID, sjOutcome, sjProcessedAt) // cutoff (ms), limit
}

func countStatusSQL(table string) string {
	return fmt.Sprintf(`SELECT count(*) FROM %q WHERE %s = ?`, table, sjStatus) // status
}

func countGaveUpSQL(table string) string {
	return fmt.Sprintf(`SELECT count(*) FROM %q WHERE %s IS NULL AND %s = ?`, table, sjRetryAt, sjStatus) // status failed
}

// ensureSQLiteEventIndexes creates the indexes of eventSQLiteIndexes on
// the events table of the engine's database that conn opened.
func ensureSQLiteEventIndexes(ctx context.Context, conn *sql.DB) error {
	table, ok, err := sqliteTable(ctx, conn, EventsCollection)
	if err != nil || !ok {
		return err
	}
	for _, ix := range eventSQLiteIndexes {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, table+ix.suffix, table, ix.columns)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("index %s of embedded table %s: %w", strings.TrimPrefix(ix.suffix, "_usersync_"), table, err)
		}
	}
	return nil
}

// sqliteTable returns the table of collection coll, and false if the
// collection does not exist.
func sqliteTable(ctx context.Context, conn *sql.DB, coll string) (string, bool, error) {
	var table string
	err := conn.QueryRowContext(ctx, `SELECT table_name FROM _ferretdb_collections WHERE name = ?`, coll).Scan(&table)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("find the table of %s: %w", coll, sqliteError(err))
	}
	return table, true, nil
}

// sqliteSearch asks the embedded engine's SQLite file directly. Its
// errors wrap models.ErrUnavailable when the engine is stopped, the
// file stays locked or the operation times out, as the driver's would.
type sqliteSearch struct {
	conn    *sql.DB
	uri     string        // the engine's: its files are read only while it runs
	timeout time.Duration // of an operation whose context has no deadline
}

// query runs the query that q builds for the events table with args and
// calls scan for every row. Without an events table there are no rows.
func (s sqliteSearch) query(ctx context.Context, q func(table string) string, args []any, scan func(*sql.Rows) error) error {
	if _, running := embeddedDir(s.uri); !running {
		return fmt.Errorf("%w: the embedded engine is stopped", models.ErrUnavailable)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	table, ok, err := sqliteTable(ctx, s.conn, EventsCollection)
	if err != nil || !ok {
		return err
	}
	rows, err := s.conn.QueryContext(ctx, q(table), args...)
	if err != nil {
		return sqliteError(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return sqliteError(err)
		}
	}
	return sqliteError(rows.Err())
}

// sqliteError wraps models.ErrUnavailable into the errors a retry may
// heal: a timeout, and a file another connection keeps locked.
func sqliteError(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "SQLITE_BUSY") ||
		strings.Contains(err.Error(), "database is locked") {
		return fmt.Errorf("%w: %w", models.ErrUnavailable, err)
	}
	return err
}

// ids runs a query whose rows are an _id and returns them.
func (s sqliteSearch) ids(ctx context.Context, q func(string) string, args ...any) ([]bson.ObjectID, error) {
	var ids []bson.ObjectID
	err := s.query(ctx, q, args, func(rows *sql.Rows) error {
		var hex string
		if err := rows.Scan(&hex); err != nil {
			return err
		}
		id, err := bson.ObjectIDFromHex(hex)
		if err != nil {
			return fmt.Errorf("event _id %q: %w", hex, err)
		}
		ids = append(ids, id)
		return nil
	})
	return ids, err
}

// read reads the events ids by _id, in order, keeping those that still
// match: one may have changed, or gone, since the search.
func (s sqliteSearch) read(ctx context.Context, e *Events, ids []bson.ObjectID, match func(eventDoc) bool) ([]eventDoc, error) {
	docs := make([]eventDoc, 0, len(ids))
	for _, id := range ids {
		var d eventDoc
		err := findByID(ctx, e.coll, id, &d, nil)
		if errors.Is(err, models.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if match(d) {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

func (s sqliteSearch) dueStored(ctx context.Context, e *Events, stuckBefore time.Time, limit int) ([]eventDoc, error) {
	before := stuckBefore.UnixMilli()
	ids, err := s.ids(ctx, dueStoredSQL, string(models.StatusStored), before, limit)
	if err != nil {
		return nil, err
	}
	return s.read(ctx, e, ids, func(d eventDoc) bool {
		return d.Status == string(models.StatusStored) && d.ReceivedAt.UnixMilli() < before
	})
}

func (s sqliteSearch) dueFailed(ctx context.Context, e *Events, now time.Time, limit int) ([]eventDoc, error) {
	at := now.UnixMilli()
	ids, err := s.ids(ctx, dueFailedSQL, at, limit)
	if err != nil {
		return nil, err
	}
	return s.read(ctx, e, ids, func(d eventDoc) bool {
		return d.RetryAt != nil && d.RetryAt.UnixMilli() <= at
	})
}

func (s sqliteSearch) processedBefore(ctx context.Context, _ *Events, cutoff time.Time, limit int) ([]eventDoc, error) {
	var docs []eventDoc
	err := s.query(ctx, processedBeforeSQL, []any{cutoff.UnixMilli(), limit}, func(rows *sql.Rows) error {
		var hex string
		var outcome sql.NullString
		if err := rows.Scan(&hex, &outcome); err != nil {
			return err
		}
		id, err := bson.ObjectIDFromHex(hex)
		if err != nil {
			return fmt.Errorf("event _id %q: %w", hex, err)
		}
		docs = append(docs, eventDoc{ID: id, Outcome: outcome.String})
		return nil
	})
	return docs, err
}

func (s sqliteSearch) count(ctx context.Context, _ *Events, k eventCount) (int64, error) {
	q, status := countStatusSQL, models.StatusStored
	switch k {
	case countFailed:
		status = models.StatusFailed
	case countGaveUp:
		q, status = countGaveUpSQL, models.StatusFailed
	}
	var n int64
	err := s.query(ctx, q, []any{string(status)}, func(rows *sql.Rows) error { return rows.Scan(&n) })
	return n, err
}
