package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// Events is the events table: the inbox and the event log.
type Events struct{ s *Store }

// eventColumns are the columns of an event without its body, in
// scanEvent's order; bodyColumn follows them when the body is read.
const eventColumns = `id, event_id, type, event_type, user_id, object_id, source, signature, signature_valid,
	source_timestamp, received_at, processed_at, status, outcome, attempts, error, retry_at, erased_at,
	discarded_at, discard_reason, discarded_by`

const bodyColumn = `, raw_body`

func scanEvent(r scanner, withBody bool) (models.Event, error) {
	var (
		ev                                models.Event
		id, received                      int64
		eventID, userID, outcome, errText sql.NullString
		objectID                          sql.NullString
		valid                             sql.NullBool
		source, processed, retry, erased  sql.NullInt64
		discarded                         sql.NullInt64
		discardReason, discardedBy        sql.NullString
		status, eventType                 string
		body                              []byte
	)
	dest := []any{&id, &eventID, &ev.Type, &eventType, &userID, &objectID, &ev.Source, &ev.Signature, &valid,
		&source, &received, &processed, &status, &outcome, &ev.Attempts, &errText, &retry, &erased,
		&discarded, &discardReason, &discardedBy}
	if withBody {
		dest = append(dest, &body)
	}
	if err := r.Scan(dest...); err != nil {
		return models.Event{}, translate(err)
	}
	ev.ID, ev.EventID, ev.EventType, ev.UserID = strconv.FormatInt(id, 10), eventID.String, models.EventType(eventType), userID.String
	ev.ObjectID = objectID.String
	if valid.Valid {
		ev.SignatureValid = &valid.Bool
	}
	ev.SourceTimestamp, ev.ReceivedAt, ev.ProcessedAt = timePtr(source), fromMS(received), timePtr(processed)
	ev.Status, ev.Outcome, ev.Error = models.EventStatus(status), models.ReadOutcome(outcome.String), errText.String
	ev.RetryAt, ev.ErasedAt, ev.RawBody = timePtr(retry), timePtr(erased), body
	if discarded.Valid {
		ev.Discarded = &models.Discard{At: fromMS(discarded.Int64), Reason: discardReason.String, By: discardedBy.String}
	}
	return ev, nil
}

// Record stores ev as a new stored event, or returns the event stored
// under its eventId (without its body) with created=false: the unique
// event_id index recognises a retry.
func (e *Events) Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error) {
	err = e.s.write(ctx, func(t *wtx) error {
		stored, created, err = recordTx(t, ev)
		return err
	})
	if err != nil {
		return models.Event{}, false, fmt.Errorf("store event %q: %w", ev.EventID, err)
	}
	return stored, created, nil
}

// recordTx is Record within the transaction t.
func recordTx(t *wtx, ev models.Event) (stored models.Event, created bool, err error) {
	ev.ID, ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts, ev.Error, ev.RetryAt = "", models.StatusStored, "", nil, 0, "", nil
	res, err := t.exec(`INSERT INTO events (event_id, type, kind, event_type, user_id, object_id, raw_body, source, signature,
		signature_valid, source_timestamp, received_at, status, attempts)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) ON CONFLICT (event_id) DO NOTHING`,
		text(ev.EventID), ev.Type, text(string(ev.Kind())), string(ev.EventType), text(ev.UserID), text(ev.ObjectID), ev.RawBody,
		ev.Source, ev.Signature, nullBool(ev.SignatureValid), msPtr(ev.SourceTimestamp), ms(ev.ReceivedAt), string(ev.Status))
	if err != nil {
		return models.Event{}, false, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		id, err := res.LastInsertId()
		ev.ID = strconv.FormatInt(id, 10)
		return ev, true, err
	}
	stored, err = scanEvent(t.row(`SELECT `+eventColumns+` FROM events WHERE event_id = ?`, ev.EventID), false)
	return stored, false, err
}

// Discard marks the failed event whose id or eventId is id discarded, in
// one transaction that reads it and writes it, unless it is not failed or
// a sweep or replay holds it (see repository.Events.Discard). A discarded
// event of a user or membership whose events were all erased is erased at
// once, as a given-up one is.
func (e *Events) Discard(ctx context.Context, id string, d models.Discard) (models.Event, error) {
	var ev models.Event
	err := e.s.write(ctx, func(t *wtx) error {
		var err error
		if ev, err = eventTx(t, id); err != nil {
			return err
		}
		n, _ := strconv.ParseInt(ev.ID, 10, 64)
		changed, err := t.execN(`UPDATE events SET status = 'discarded', processed_at = ?, discarded_at = ?,
			discard_reason = ?, discarded_by = ?, retry_at = NULL, claimed_until = NULL
			WHERE id = ? AND status = 'failed' AND (claimed_until IS NULL OR claimed_until <= ?)`,
			ms(d.At), ms(d.At), d.Reason, d.By, n, ms(d.At))
		if err != nil {
			return err
		}
		if changed == 0 {
			return models.DiscardConflict(ev, d.At)
		}
		if err := e.s.eraseIfErased(t, n, d.At); err != nil {
			return err
		}
		ev, err = eventTx(t, ev.ID)
		return err
	})
	if err != nil {
		return models.Event{}, fmt.Errorf("discard event %q: %w", id, err)
	}
	return ev, nil
}

// eventTx reads the event whose id or eventId is id in the transaction t,
// body included.
func eventTx(t *wtx, id string) (models.Event, error) {
	ev, err := models.Event{}, error(models.ErrNotFound)
	if n, perr := strconv.ParseInt(id, 10, 64); perr == nil {
		ev, err = scanEvent(t.row(qEventByID, n), true)
	}
	if err == models.ErrNotFound {
		ev, err = scanEvent(t.row(qEventByEventID, id), true)
	}
	return ev, err
}

// Get returns the event whose id or eventId is id, body included, or an
// error wrapping models.ErrNotFound.
func (e *Events) Get(ctx context.Context, id string) (models.Event, error) {
	ev, err := models.Event{}, error(models.ErrNotFound)
	if n, perr := strconv.ParseInt(id, 10, 64); perr == nil {
		ev, err = scanEvent(e.s.r.QueryRowContext(ctx, qEventByID, n), true)
	}
	if err == models.ErrNotFound {
		ev, err = scanEvent(e.s.r.QueryRowContext(ctx, qEventByEventID, id), true)
	}
	if err != nil {
		return models.Event{}, fmt.Errorf("event %q: %w", id, err)
	}
	return ev, nil
}

// List returns one page of the event log, newest first (received_at, then
// id), without bodies. Each combination of filters is read from the index
// that holds it in the log's order (see logRanges): one range, or one per
// (kind, event type) pair of the kinds table a filter leaves open, each
// bounded by the time range, the cursor ("<ms>_<id>") and the page, merged
// here. A malformed cursor wraps models.ErrInvalid.
func (e *Events) List(ctx context.Context, f models.EventFilter) (models.EventPage, error) {
	ranges, err := logRanges(f)
	if err != nil {
		return models.EventPage{}, err
	}
	evs := []models.Event{}
	for _, r := range ranges {
		got, err := e.query(ctx, r.sql, false, r.args...)
		if err != nil {
			return models.EventPage{}, fmt.Errorf("list events: %w", err)
		}
		evs = append(evs, got...)
	}
	if len(ranges) > 1 {
		slices.SortFunc(evs, newestFirst)
	}
	page := models.EventPage{Events: evs[:min(len(evs), f.Limit)]}
	if len(evs) > f.Limit {
		last := page.Events[f.Limit-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.ReceivedAt.UnixMilli(), last.ID)
	}
	return page, nil
}

// newestFirst is the order of the event log: received_at, then id, both
// descending.
func newestFirst(a, b models.Event) int {
	if c := b.ReceivedAt.Compare(a.ReceivedAt); c != 0 {
		return c
	}
	x, _ := strconv.ParseInt(a.ID, 10, 64)
	y, _ := strconv.ParseInt(b.ID, 10, 64)
	return cmp.Compare(y, x)
}

// logRange is one query of an event log page: the index it reads, the
// statement and its arguments.
type logRange struct {
	index, sql string
	args       []any
}

// logRanges returns the queries of an event log page of f. Every index of
// the log ends in (received_at, id), its order; the index is the one whose
// leading columns f names:
//
//   - objectId: events_object, and userId: events_user; an object's or a
//     user's events are few, so other filters are checked on the rows;
//   - status with kind or event type: events_status_type (status, kind,
//     event_type);
//   - status alone: events_status;
//   - kind or event type: events_type (kind, event_type);
//   - none: events_log.
//
// Where f names the kind but not the event type, or the event type but
// not the kind, the index's order holds only within each value of the
// other: one range is read per (kind, event type) pair of the kinds table
// that the filter selects (typePairs: the short types of the kind's rows,
// or the kinds that have the event type), and the ranges are merged.
func logRanges(f models.EventFilter) ([]logRange, error) {
	var (
		where []string
		args  []any
	)
	eq := func(col, v string) {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	var index string
	switch {
	case f.ObjectID != "" || f.UserID != "":
		index = "events_user"
		if f.ObjectID != "" {
			index = "events_object"
		}
		eq("object_id", f.ObjectID)
		eq("user_id", f.UserID)
		eq("status", string(f.Status))
		eq("kind", string(f.Kind))
		eq("event_type", string(f.EventType))
	case f.Status != "" && f.Kind == "" && f.EventType == "":
		index = "events_status"
		eq("status", string(f.Status))
	case f.Status != "":
		index = "events_status_type"
		eq("status", string(f.Status))
	case f.Kind != "" || f.EventType != "":
		index = "events_type"
	default:
		index = "events_log"
	}
	if !f.Since.IsZero() {
		where, args = append(where, "received_at >= ?"), append(args, ms(f.Since))
	}
	if !f.Until.IsZero() {
		where, args = append(where, "received_at < ?"), append(args, ms(f.Until))
	}
	if f.After != "" {
		at, id, err := parseEventCursor(f.After)
		if err != nil {
			return nil, err
		}
		where, args = append(where, "(received_at, id) < (?, ?)"), append(args, at, id)
	}
	one := func(where []string, args []any) logRange {
		q := `SELECT ` + eventColumns + ` FROM events INDEXED BY ` + index
		if len(where) > 0 {
			q += ` WHERE ` + strings.Join(where, " AND ")
		}
		q += ` ORDER BY received_at DESC, id DESC LIMIT ?`
		return logRange{index, q, append(slices.Clip(args), f.Limit+1)}
	}
	if index != "events_type" && index != "events_status_type" {
		return []logRange{one(where, args)}, nil
	}
	var ranges []logRange
	for _, p := range typePairs(f.Kind, f.EventType) {
		ranges = append(ranges, one(append([]string{"kind = ?", "event_type = ?"}, where...),
			append([]any{string(p.kind), string(p.eventType)}, args...)))
	}
	return ranges, nil
}

// kindType is one (kind, event type) pair of the kinds table.
type kindType struct {
	kind      models.Kind
	eventType models.EventType
}

// typePairs returns the (kind, event type) pairs the kinds table has that
// a filter of kind and eventType ("" for any) selects, each once: the
// short types of the kind's rows (models.SpecOf), or the kinds that have
// the event type. None for a kind or an event type the table does not
// have: no event is stored with it.
func typePairs(kind models.Kind, eventType models.EventType) []kindType {
	kinds := models.Kinds
	if kind != "" {
		kinds = []models.Kind{kind}
	}
	var pairs []kindType
	for _, k := range kinds {
		spec, ok := models.SpecOf(k)
		if !ok {
			continue
		}
		for _, t := range spec.Types {
			p := kindType{k, t.Change}
			if (eventType == "" || t.Change == eventType) && !slices.Contains(pairs, p) {
				pairs = append(pairs, p)
			}
		}
	}
	return pairs
}

func parseEventCursor(c string) (int64, int64, error) {
	a, b, ok := strings.Cut(c, "_")
	at, err1 := strconv.ParseInt(a, 10, 64)
	id, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, models.ErrBadCursor()
	}
	return at, id, nil
}

func (e *Events) query(ctx context.Context, q string, withBody bool, args ...any) ([]models.Event, error) {
	return readAll(ctx, e.s.r, q, func(r scanner) (models.Event, error) { return scanEvent(r, withBody) }, args...)
}

// Stats counts events per status and per outcome. Processed events are not
// counted: the outcome counters move in the transactions that make an
// event processed or delete it. Stored and failed events are counted in
// the status index; those failed for good are the failed ones less those
// with a retry time (the retry index).
func (e *Events) Stats(ctx context.Context) (models.EventStats, error) {
	st := models.NewEventStats()
	var c0 int64
	type count struct {
		status models.EventStatus
		kind   models.Kind
		n      int64
	}
	scan := func(r scanner) (c count, err error) {
		var kind sql.NullString
		err = r.Scan(&c.status, &kind, &c.n)
		c.kind = models.Kind(kind.String)
		return c, err
	}
	counts, err := readAll(ctx, e.s.r, qStats, scan)
	if err != nil {
		return models.EventStats{}, fmt.Errorf("count events: %w", err)
	}
	retrying, err := readAll(ctx, e.s.r, qStatsRetrying, scan)
	if err != nil {
		return models.EventStats{}, fmt.Errorf("count events: %w", err)
	}
	toRetry := map[models.Kind]int64{}
	for _, c := range retrying {
		toRetry[c.kind] = c.n
	}
	for _, c := range counts {
		if c.status == models.StatusFailed {
			st.AddUnprocessed(c.status, c.kind, true, toRetry[c.kind])
			c.n -= toRetry[c.kind]
		}
		st.AddUnprocessed(c.status, c.kind, false, c.n)
	}
	if err := e.s.r.QueryRowContext(ctx, qStatsDiscarded).Scan(&c0); err != nil {
		return models.EventStats{}, fmt.Errorf("count discarded events: %w", translate(err))
	}
	st.ByStatus[models.StatusDiscarded] = c0
	rows, err := e.s.r.QueryContext(ctx, `SELECT name, n FROM counters WHERE name >= 'outcome:' AND name < 'outcome;'`)
	if err != nil {
		return models.EventStats{}, fmt.Errorf("read counters: %w", translate(err))
	}
	defer rows.Close()
	st.ByStatus[models.StatusProcessed] = 0
	for _, o := range models.Outcomes {
		st.ByOutcome[o] = 0
	}
	for rows.Next() {
		var (
			name string
			n    int64
		)
		if err := rows.Scan(&name, &n); err != nil {
			return models.EventStats{}, translate(err)
		}
		// An earlier version's outcome:deleted_user counts deleted events.
		o := models.ReadOutcome(strings.TrimPrefix(name, "outcome:"))
		st.ByOutcome[o] += max(n, 0)
		st.ByStatus[models.StatusProcessed] += max(n, 0)
	}
	return st, translate(rows.Err())
}

func outcomeCounter(o models.Outcome) string { return "outcome:" + string(o) }

func addCounter(t *wtx, name string, n int64) error {
	_, err := t.exec(`INSERT INTO counters (name, n) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET n = n + excluded.n`, name, n)
	return err
}

// Due returns up to limit events for the recovery sweep, bodies included:
// stored ones received before stuckBefore (the status index, oldest
// first) and failed ones whose retry time has come (the retry index,
// which holds only failed events with attempts left), in Clerk's order.
func (e *Events) Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error) {
	stuck, err := e.query(ctx, qDueStored, true, ms(stuckBefore), limit)
	if err != nil {
		return nil, fmt.Errorf("find stuck events: %w", err)
	}
	retry, err := e.query(ctx, qDueFailed, true, ms(now), limit)
	if err != nil {
		return nil, fmt.Errorf("find events to retry: %w", err)
	}
	evs := append(stuck, retry...)
	slices.SortStableFunc(evs, models.CompareClerkOrder)
	return evs[:min(len(evs), limit)], nil
}

// DeleteProcessedBefore deletes up to limit events processed before
// cutoff (the processed index, oldest first) and takes them off the
// outcome counters, in one transaction. Discarded events are finished
// too, since processed_at (when they were discarded), and are deleted
// alike, off no counter. Stored and failed events have no processed_at:
// they are never deleted.
func (e *Events) DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	deleted := 0
	err := e.s.write(ctx, func(t *wtx) error {
		deleted = 0
		rows, err := t.query(qRetention, ms(cutoff), limit)
		if err != nil {
			return err
		}
		byOutcome := map[string][]int64{} // "": discarded events, which no counter counts
		for rows.Next() {
			var (
				id      int64
				outcome sql.NullString
			)
			if err := rows.Scan(&id, &outcome); err != nil {
				rows.Close()
				return translate(err)
			}
			// As stored: the counter that counted the event loses it.
			byOutcome[outcome.String] = append(byOutcome[outcome.String], id)
		}
		rows.Close()
		for outcome, ids := range byOutcome {
			for _, id := range ids {
				if _, err := t.exec(`DELETE FROM events WHERE id = ?`, id); err != nil {
					return err
				}
			}
			deleted += len(ids)
			if outcome == "" {
				continue
			}
			if err := addCounter(t, outcomeCounter(models.Outcome(outcome)), -int64(len(ids))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete old events: %w", err)
	}
	return deleted, nil
}

func eventID(id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("event %q: %w", id, models.ErrNotFound)
	}
	return n, nil
}

// MarkProcessed records a successful attempt, unless the event is
// processed already: the first outcome stays, and only the write that made
// the event processed counts it, in the same transaction. An event that
// found its user deleted and already erased is erased at once.
func (e *Events) MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error {
	n, err := eventID(id)
	if err != nil {
		return err
	}
	err = e.s.write(ctx, func(t *wtx) error {
		_, err := markProcessedTx(e.s, t, n, outcome, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark event %q processed: %w", id, err)
	}
	return nil
}

// markProcessedTx is MarkProcessed within the transaction t; changed is
// false when the event was processed already.
func markProcessedTx(s *Store, t *wtx, id int64, outcome models.Outcome, now time.Time) (changed bool, err error) {
	n, err := t.execN(`UPDATE events SET status = 'processed', outcome = ?, processed_at = ?,
		error = NULL, retry_at = NULL, claimed_until = NULL, attempts = attempts + 1
		WHERE id = ? AND status NOT IN ('processed', 'discarded')`, string(outcome), ms(now), id)
	if err != nil || n == 0 {
		return false, err
	}
	if err := addCounter(t, outcomeCounter(outcome), 1); err != nil {
		return true, err
	}
	if outcome == models.OutcomeDeleted || outcome == models.OutcomeStale {
		// A user's event, or a membership event of a deleted member; or
		// a stale state of an invitation erased already (a newer state
		// that applies holds an email again, and is due on its own).
		return true, s.eraseIfErased(t, id, now)
	}
	return true, nil
}

// MarkFailed records a failed attempt with its error and when the sweep
// retries it (nil: never), unless the event is processed: processed is
// final. An event given up for a user already erased is erased at once.
func (e *Events) MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error {
	n, err := eventID(id)
	if err != nil {
		return err
	}
	err = e.s.write(ctx, func(t *wtx) error {
		changed, err := t.execN(`UPDATE events SET status = 'failed', error = ?, retry_at = ?, claimed_until = NULL,
			attempts = attempts + 1 WHERE id = ? AND status NOT IN ('processed', 'discarded')`, cause, msPtr(retryAt), n)
		if err != nil || changed == 0 || retryAt != nil {
			return err
		}
		return e.s.eraseIfErased(t, n, time.Now())
	})
	if err != nil {
		return fmt.Errorf("mark event %q failed: %w", id, err)
	}
	return nil
}

// Claim leases the event to one sweep until now+lease: it reports false
// when the event is processed, has had another attempt than the caller
// read (attempts), or is leased to another sweep until after now. The
// condition and the write are one statement.
func (e *Events) Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error) {
	n, err := eventID(id)
	if err != nil {
		return false, err
	}
	var ok bool
	err = e.s.write(ctx, func(t *wtx) error {
		changed, err := t.execN(`UPDATE events SET claimed_until = ? WHERE id = ? AND status NOT IN ('processed', 'discarded')
			AND attempts = ? AND (claimed_until IS NULL OR claimed_until <= ?)`, ms(now.Add(lease)), n, attempts, ms(now))
		ok = changed == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("claim event %q: %w", id, err)
	}
	return ok, nil
}

// FailureGroups reads at most scan (1 to models.MaxFailureScan) failed
// events, newest first, through the status index (only the columns a
// group needs), and groups them by reason.
func (e *Events) FailureGroups(ctx context.Context, scan int) (models.FailureGroups, error) {
	scan = min(max(scan, 1), models.MaxFailureScan)
	rows, err := e.s.r.QueryContext(ctx, qFailed, scan+1)
	if err != nil {
		return models.FailureGroups{}, fmt.Errorf("read failed events: %w", translate(err))
	}
	defer rows.Close()
	var failed []models.Event
	for rows.Next() {
		var (
			id, received     int64
			eventID, errText sql.NullString
			retry            sql.NullInt64
		)
		if err := rows.Scan(&id, &eventID, &received, &errText, &retry); err != nil {
			return models.FailureGroups{}, fmt.Errorf("read failed events: %w", translate(err))
		}
		failed = append(failed, models.Event{
			ID: strconv.FormatInt(id, 10), EventID: eventID.String, ReceivedAt: fromMS(received),
			Status: models.StatusFailed, Error: errText.String, RetryAt: timePtr(retry),
		})
	}
	if err := rows.Err(); err != nil {
		return models.FailureGroups{}, fmt.Errorf("read failed events: %w", translate(err))
	}
	complete := len(failed) <= scan
	return models.GroupFailures(failed[:min(len(failed), scan)], complete), nil
}
