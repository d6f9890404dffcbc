package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// Earlier versions kept the embedded data in FerretDB 1.24's SQLite files,
// under <data dir>/db/<database>.sqlite: one table per collection, listed
// in _ferretdb_collections, each document one JSON text (FerretDB's
// "sjson": ObjectIDs as hex, dates as Unix milliseconds, a "$s" key with
// the types), metadata keys escaped by usersync ("." as %2E, a leading "$"
// as %24, "%" as %25, NUL as %00).
//
// Reads: a data dir of the versions before 1fd81c2 (2026-11-25, "api
// tests run on the store the suite chooses"), whose embedded engine was
// FerretDB 1.24: users and events only (those versions kept nothing
// else), outcome counters recounted from the events.
// Remove: in the first release after no data dir of those versions is
// left; with it go importEarlier and its call in cmd/usersync, the tests
// and testdata/ferretdb-1.24. What stays in its place refuses a data dir
// that holds db/<database>.sqlite and names the rebuild from Clerk
// (docs/operations.md), so that such data is never passed over in silence.

// ImportReport says what ImportEarlier did.
type ImportReport struct {
	Imported      bool
	Users, Events int
	From, KeptAs  string
}

// importMark is the counter that records, in the import's transaction,
// that the earlier data is in the store: a crash after the commit and
// before the old files are set aside does not import them twice.
const importMark = "import:ferretdb-1.24"

// ImportEarlier imports, once, the users and events of an earlier
// version's embedded data in dataDir (for the database name database) into
// the store in dataDir, in one transaction, then renames the old files'
// directory to db.imported-<time>: they are kept, never deleted. With no
// such files it does nothing. A file it cannot read is an error that says
// how to start over from Clerk instead.
func ImportEarlier(ctx context.Context, dataDir, database string) (ImportReport, error) {
	oldDir := filepath.Join(dataDir, "db")
	old := filepath.Join(oldDir, database+".sqlite")
	rep := ImportReport{From: old}
	if _, err := os.Stat(old); errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	} else if err != nil {
		return rep, err
	}
	s, err := Open(ctx, dataDir, Options{})
	if err != nil {
		return rep, err
	}
	defer s.Close(ctx)
	var marked int
	_ = s.r.QueryRowContext(ctx, `SELECT count(*) FROM counters WHERE name = ?`, importMark).Scan(&marked)
	if marked == 0 {
		if err := s.importFerretDB(ctx, old, &rep); err != nil {
			return rep, fmt.Errorf("import the data of an earlier version from %s: %w "+
				"(to start over instead, move %s away and rebuild the users from Clerk with `usersync reconcile`)", old, err, oldDir)
		}
		rep.Imported = true
	}
	rep.KeptAs = fmt.Sprintf("%s.imported-%s", oldDir, time.Now().UTC().Format("20060102T150405Z"))
	if err := os.Rename(oldDir, rep.KeptAs); err != nil {
		return rep, fmt.Errorf("set the imported files aside: %w", err)
	}
	return rep, nil
}

func (s *Store) importFerretDB(ctx context.Context, path string, rep *ImportReport) error {
	old, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer old.Close()
	tables := map[string]string{}
	rows, err := old.QueryContext(ctx, `SELECT name, table_name FROM _ferretdb_collections`)
	if err != nil {
		return fmt.Errorf("not the files of usersync's earlier embedded engine: %w", err)
	}
	for rows.Next() {
		var name, table string
		if err := rows.Scan(&name, &table); err != nil {
			rows.Close()
			return err
		}
		tables[name] = table
	}
	rows.Close()
	return s.write(ctx, func(t *wtx) error {
		counts := map[models.Outcome]int64{}
		if err := eachDoc(ctx, old, tables["users"], func(doc map[string]json.RawMessage) error {
			rep.Users++
			return importUser(t, doc)
		}); err != nil {
			return fmt.Errorf("users: %w", err)
		}
		if err := eachDoc(ctx, old, tables["user_events"], func(doc map[string]json.RawMessage) error {
			rep.Events++
			o, err := importEvent(t, doc)
			if o != "" {
				counts[o]++
			}
			return err
		}); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		for o, n := range counts {
			if err := addCounter(t, outcomeCounter(o), n); err != nil {
				return err
			}
		}
		return addCounter(t, importMark, 1)
	})
}

// eachDoc calls fn with every document of a FerretDB table (none when the
// collection did not exist).
func eachDoc(ctx context.Context, db *sql.DB, table string, fn func(map[string]json.RawMessage) error) error {
	if table == "" {
		return nil
	}
	// The table name comes from FerretDB's own catalog, quoted as an identifier.
	rows, err := db.QueryContext(ctx, `SELECT _ferretdb_sjson FROM "`+strings.ReplaceAll(table, `"`, `""`)+`"`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return err
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(text), &doc); err != nil {
			return fmt.Errorf("a document is not JSON: %w", err)
		}
		if err := fn(doc); err != nil {
			return err
		}
	}
	return rows.Err()
}

// sjson reads the fields of one FerretDB document.
type sjson map[string]json.RawMessage

func (d sjson) null(k string) bool {
	v, ok := d[k]
	return !ok || string(v) == "null"
}

func (d sjson) str(k string) string {
	var s string
	_ = json.Unmarshal(d[k], &s)
	return s
}

// opt is a string field as stored: NULL when absent, null or "".
func (d sjson) opt(k string) any { return text(d.str(k)) }

func (d sjson) num(k string) int64 {
	var n float64
	_ = json.Unmarshal(d[k], &n)
	return int64(n)
}

// date is a date field (Unix ms), NULL when absent or null.
func (d sjson) date(k string) any {
	if d.null(k) {
		return nil
	}
	return d.num(k)
}

func (d sjson) boolean(k string) bool {
	var b bool
	_ = json.Unmarshal(d[k], &b)
	return b
}

// binary is a field that may be a string or binary data (base64 in sjson).
func (d sjson) binary(k string) []byte {
	if d.null(k) {
		return nil
	}
	var s string
	if err := json.Unmarshal(d[k], &s); err != nil {
		return nil
	}
	var schema struct {
		S struct {
			P map[string]struct {
				T string `json:"t"`
			} `json:"p"`
		} `json:"$s"`
	}
	_ = json.Unmarshal(d["$s"], &schema)
	if schema.S.P[k].T == "binData" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return b
		}
	}
	return []byte(s)
}

func importUser(t *wtx, doc sjson) error {
	userID := doc.str("userId")
	if userID == "" {
		return errors.New("a user without a userId")
	}
	meta := []byte("{}")
	if !doc.null("metadata") {
		var err error
		if meta, err = unescapeKeys(doc["metadata"]); err != nil {
			return fmt.Errorf("user %q metadata: %w", userID, err)
		}
	}
	eraseAfter := doc.date("eraseAfter")
	var erasedAt any
	if !doc.null("deletedAt") && eraseAfter == nil {
		// A tombstone with no events left to erase.
		erasedAt = doc.num("updatedAt")
	}
	email := doc.opt("email")
	if !doc.null("deletedAt") {
		email = nil
	}
	_, err := t.exec(`INSERT INTO users (user_id, email, display_name, metadata, created_at, updated_at, deleted_at,
		source_updated_at, last_event_id, first_name, last_name, username, image_url, phone_number, external_id,
		last_sign_in_at, banned, locked, erase_after, erased_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		userID, email, doc.str("displayName"), string(meta), doc.num("createdAt"), doc.num("updatedAt"),
		doc.date("deletedAt"), doc.num("sourceUpdatedAt"), doc.str("lastEventId"), doc.opt("firstName"),
		doc.opt("lastName"), doc.opt("username"), doc.opt("imageUrl"), doc.opt("phoneNumber"), doc.opt("externalId"),
		doc.date("lastSignInAt"), doc.boolean("banned"), doc.boolean("locked"), eraseAfter, erasedAt)
	return err
}

func importEvent(t *wtx, doc sjson) (models.Outcome, error) {
	status := doc.str("status")
	var valid any
	if !doc.null("signatureValid") {
		valid = doc.boolean("signatureValid")
	}
	_, err := t.exec(`INSERT INTO events (event_id, type, kind, event_type, user_id, raw_body, source, signature,
		signature_valid, source_timestamp, received_at, processed_at, status, outcome, attempts, error, retry_at,
		erased_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		doc.opt("eventId"), doc.str("type"), text(string(models.StoredKindOf(doc.str("type")))), doc.str("eventType"), doc.opt("userId"), doc.binary("rawBody"),
		doc.str("source"), doc.str("signature"), valid, doc.date("sourceTimestamp"), doc.num("receivedAt"),
		doc.date("processedAt"), status, doc.opt("outcome"), doc.num("attempts"), doc.opt("error"),
		doc.date("retryAt"), doc.date("erasedAt"))
	if status != string(models.StatusProcessed) {
		return "", err
	}
	return models.Outcome(doc.str("outcome")), err
}

var keyUnescaper = strings.NewReplacer("%25", "%", "%2E", ".", "%00", "\x00", "%24", "$")

// unescapeKeys rewrites a JSON value with every object key unescaped.
func unescapeKeys(raw []byte) ([]byte, error) { return models.RewriteJSON(raw, keyUnescaper.Replace) }
