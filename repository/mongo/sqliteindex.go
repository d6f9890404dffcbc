package mongo

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"

	_ "modernc.org/sqlite" // the driver FerretDB itself uses
)

// The embedded engine filters in SQL only a filter of exactly {_id: v},
// as WHERE _ferretdb_sjson->'$._id' = ?, and its own _id index is on
// another expression (_ferretdb_sjson->"_id"), so SQLite scans the table
// for it. An index on exactly FerretDB's WHERE expression turns every
// lookup and write by _id into an index search, at any size.
// FerretDB does not know this index (listIndexes does not show it); it
// goes with the table, so Prepare ensures it at every start. The test
// TestEmbedded_LookupsByIDUseTheIndex fails if a FerretDB upgrade changes
// the WHERE expression.

// idPathExpr is FerretDB's WHERE expression for _id (its metadata.IDColumn).
const idPathExpr = `_ferretdb_sjson->'$._id'`

// idIndexSuffix names the index: "<table>_usersync__id". FerretDB names
// its own "<table>_<index name>", and no index of usersync is named so.
const idIndexSuffix = "_usersync__id"

// SQLiteFile is the data file of database db of the embedded engine in dir.
func SQLiteFile(dir, db string) string { return filepath.Join(dir, db+".sqlite") }

// openSQLite opens the data file of database db in dir next to the engine,
// waiting (as FerretDB does) while the engine writes.
func openSQLite(dir, db string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: SQLiteFile(dir, db)}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	u.RawQuery = q.Encode()
	return sql.Open("sqlite", u.String())
}

// ensureSQLiteIDIndexes creates the _id expression index on every table
// of the embedded engine's database that conn opened that lacks it.
func ensureSQLiteIDIndexes(ctx context.Context, conn *sql.DB) error {
	rows, err := conn.QueryContext(ctx, `SELECT table_name FROM _ferretdb_collections`)
	if err != nil {
		return fmt.Errorf("list embedded tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return fmt.Errorf("list embedded tables: %w", err)
		}
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list embedded tables: %w", err)
	}
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (%s)`, t+idIndexSuffix, t, idPathExpr)
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("index _id of embedded table %s: %w", t, err)
		}
	}
	return nil
}
