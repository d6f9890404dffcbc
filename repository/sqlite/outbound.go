package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Outbound is the tables of outbound webhooks (schema 10): endpoints,
// outbox, deliveries and delivery_attempts.
type Outbound struct {
	s *Store
	// recording: Deliver and Reapply write an outbox row for each change
	// that applied.
	recording atomic.Bool
}

var _ repository.Outbound = (*Outbound)(nil)

// Outbound returns the tables of outbound webhooks.
func (s *Store) Outbound() repository.Outbound { return s.outbound }

// SetRecording says whether the changes that apply are recorded in the
// outbox.
func (o *Outbound) SetRecording(on bool) { o.recording.Store(on) }

// record writes the outbox row of ch, the change of ev, which had outcome
// in t (models.OutboxOf), when recording is on.
func (o *Outbound) record(t *wtx, ev models.Event, ch models.Change, outcome models.Outcome, now time.Time) error {
	if !o.recording.Load() {
		return nil
	}
	p, ok := models.OutboxOf(ev, ch, outcome, now)
	if !ok {
		return nil
	}
	_, err := t.exec(`INSERT INTO outbox (kind, object_id, user_id, source_time, event_id, deleted, change, origin, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, string(p.Kind), p.ObjectID, p.UserID, ms(p.Version.SourceTime),
		p.Version.EventID, p.Version.Deleted, string(p.Change), p.Origin, ms(p.At))
	return err
}

const endpointColumns = `id, url, description, event_types, enabled, disabled, secret, previous_secret, previous_until,
	from_config, failing_since, created_at, updated_at, revision, needs_resync, resync, legacy_url`

func scanEndpoint(sc interface{ Scan(...any) error }) (models.Endpoint, error) {
	var (
		e                   models.Endpoint
		types               string
		until, failing      sql.NullInt64
		created, updated    int64
		enabled, fromConfig bool
		resync              sql.NullString
	)
	err := sc.Scan(&e.ID, &e.URL, &e.Description, &types, &enabled, &e.Disabled, &e.Secret, &e.PreviousSecret, &until,
		&fromConfig, &failing, &created, &updated, &e.Revision, &e.NeedsResync, &resync, &e.LegacyURL)
	if err != nil {
		return e, translate(err)
	}
	if resync.Valid {
		e.Resync = &models.Resync{}
		if err := json.Unmarshal([]byte(resync.String), e.Resync); err != nil {
			return e, fmt.Errorf("endpoint %s: its resync: %w", e.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(types), &e.EventTypes); err != nil {
		return e, fmt.Errorf("endpoint %s: its event types: %w", e.ID, err)
	}
	e.Enabled, e.FromConfig, e.PreviousUntil, e.FailingSince = enabled, fromConfig, timePtr(until), timePtr(failing)
	e.CreatedAt, e.UpdatedAt = fromMS(created), fromMS(updated)
	return e, nil
}

// Endpoints returns every endpoint, by id.
func (o *Outbound) Endpoints(ctx context.Context) ([]models.Endpoint, error) {
	rows, err := o.s.r.QueryContext(ctx, `SELECT `+endpointColumns+` FROM endpoints ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", translate(err))
	}
	defer rows.Close()
	out := []models.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("read endpoints: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read endpoints: %w", translate(err))
	}
	return out, nil
}

// Endpoint returns one endpoint.
func (o *Outbound) Endpoint(ctx context.Context, id string) (models.Endpoint, error) {
	e, err := scanEndpoint(o.s.r.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
	if err != nil {
		return e, fmt.Errorf("read endpoint %s: %w", models.Quote(id), err)
	}
	return e, nil
}

// CreateEndpoint inserts e at revision 1; one from the API only while
// fewer than models.MaxEndpoints are stored, counted in the same
// transaction (the one writer makes creates take turns).
func (o *Outbound) CreateEndpoint(ctx context.Context, e models.Endpoint) error {
	types, err := json.Marshal(nonNil(e.EventTypes))
	if err != nil {
		return err
	}
	err = o.s.write(ctx, func(t *wtx) error {
		if !e.FromConfig {
			var n int
			if err := t.row(`SELECT count(*) FROM endpoints`).Scan(&n); err != nil {
				return translate(err)
			}
			if n >= models.MaxEndpoints {
				return models.EndpointsFull(n)
			}
		}
		n, err := t.execN(`INSERT INTO endpoints (`+endpointColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 0, NULL, ?)
			ON CONFLICT (id) DO NOTHING`,
			e.ID, e.URL, e.Description, string(types), e.Enabled, e.Disabled, e.Secret, e.PreviousSecret,
			msPtr(e.PreviousUntil), e.FromConfig, msPtr(e.FailingSince), ms(e.CreatedAt), ms(e.UpdatedAt), e.LegacyURL)
		if err == nil && n == 0 {
			err = fmt.Errorf("%w: the id is taken", models.ErrConflict)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create endpoint %s: %w", models.Quote(e.ID), err)
	}
	return nil
}

// UpdateEndpoint writes e's settings if the endpoint is still at
// e.Revision.
func (o *Outbound) UpdateEndpoint(ctx context.Context, e models.Endpoint) error {
	types, err := json.Marshal(nonNil(e.EventTypes))
	if err != nil {
		return err
	}
	err = o.s.write(ctx, func(t *wtx) error {
		n, err := t.execN(`UPDATE endpoints SET url = ?, description = ?, event_types = ?, enabled = ?, disabled = ?, secret = ?,
			previous_secret = ?, previous_until = ?, from_config = ?, legacy_url = ?, updated_at = ?, revision = revision + 1
			WHERE id = ? AND revision = ?`,
			e.URL, e.Description, string(types), e.Enabled, e.Disabled, e.Secret, e.PreviousSecret, msPtr(e.PreviousUntil),
			e.FromConfig, e.LegacyURL, ms(e.UpdatedAt), e.ID, e.Revision)
		if err != nil || n == 1 {
			return err
		}
		return endpointMissed(t, e.ID)
	})
	if err != nil {
		return fmt.Errorf("write endpoint %s: %w", models.Quote(e.ID), err)
	}
	return nil
}

// endpointMissed says why a conditional write of endpoint id matched
// nothing: it is gone (models.ErrNotFound), or it moved on.
func endpointMissed(t *wtx, id string) error {
	var one int
	err := t.row(`SELECT 1 FROM endpoints WHERE id = ?`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return models.ErrNotFound
	case err != nil:
		return translate(err)
	}
	return models.ErrEndpointChanged
}

// EndpointFailing sets failing_since, unless it is set.
func (o *Outbound) EndpointFailing(ctx context.Context, id string, at time.Time) error {
	return o.endpointHealth(ctx, id, `UPDATE endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL`, ms(at), id)
}

// EndpointAnswered clears failing_since, if it is set.
func (o *Outbound) EndpointAnswered(ctx context.Context, id string) error {
	return o.endpointHealth(ctx, id, `UPDATE endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL`, id)
}

// DisableEndpoint disables an enabled endpoint for reason, and when
// failingBefore is set only one failing since before it.
func (o *Outbound) DisableEndpoint(ctx context.Context, id, reason string, failingBefore, now time.Time) (bool, error) {
	q, args := `UPDATE endpoints SET enabled = 0, disabled = ?, updated_at = ?, revision = revision + 1
		WHERE id = ? AND enabled = 1`, []any{reason, ms(now), id}
	if !failingBefore.IsZero() {
		q += ` AND failing_since <= ?`
		args = append(args, ms(failingBefore))
	}
	var n int64
	err := o.s.writeBackground(ctx, func(t *wtx) error {
		var err error
		n, err = t.execN(q, args...)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("disable endpoint %s: %w", models.Quote(id), err)
	}
	return n == 1, nil
}

// endpointHealth runs one conditional write of an endpoint's health.
func (o *Outbound) endpointHealth(ctx context.Context, id, q string, args ...any) error {
	err := o.s.writeBackground(ctx, func(t *wtx) error {
		_, err := t.exec(q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the health of endpoint %s: %w", models.Quote(id), err)
	}
	return nil
}

// StartResync starts the resync r of endpoint id, in place of one under
// way.
func (o *Outbound) StartResync(ctx context.Context, id string, r models.Resync) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var n int64
	err = o.s.write(ctx, func(t *wtx) error {
		n, err = t.execN(`UPDATE endpoints SET resync = ?, resync_started = ? WHERE id = ?`, string(b), ms(r.StartedAt), id)
		return err
	})
	if err == nil && n == 0 {
		err = models.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("start a resync of endpoint %s: %w", models.Quote(id), err)
	}
	return nil
}

// SaveResync records r, the progress of the resync of endpoint id that
// started at r.StartedAt; false when another started since, or the
// endpoint is gone. A resync done clears needs_resync.
func (o *Outbound) SaveResync(ctx context.Context, id string, r models.Resync) (bool, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return false, err
	}
	var n int64
	err = o.s.writeBackground(ctx, func(t *wtx) error {
		n, err = t.execN(`UPDATE endpoints SET resync = ?, needs_resync = needs_resync AND ? WHERE id = ? AND resync_started = ?`,
			string(b), r.DoneAt == nil, id, ms(r.StartedAt))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record the resync of endpoint %s: %w", models.Quote(id), err)
	}
	return n == 1, nil
}

// MarkNeedsResync marks a disabled endpoint as needing a resync.
func (o *Outbound) MarkNeedsResync(ctx context.Context, id string) error {
	return o.endpointHealth(ctx, id, `UPDATE endpoints SET needs_resync = 1 WHERE id = ? AND enabled = 0`, id)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// DeleteEndpoint deletes an endpoint and its deliveries; its attempts
// stay until they are old.
func (o *Outbound) DeleteEndpoint(ctx context.Context, id string) error {
	err := o.s.write(ctx, func(t *wtx) error {
		n, err := t.execN(`DELETE FROM endpoints WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return models.ErrNotFound
		}
		_, err = t.exec(`DELETE FROM deliveries WHERE endpoint_id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete endpoint %s: %w", models.Quote(id), err)
	}
	return nil
}

// Outbox returns up to limit entries of the outbox, oldest first.
func (o *Outbound) Outbox(ctx context.Context, limit int) ([]models.Outboxed, error) {
	rows, err := o.s.r.QueryContext(ctx, `SELECT id, kind, object_id, user_id, source_time, event_id, deleted, change, origin, at
		FROM outbox ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", translate(err))
	}
	defer rows.Close()
	out := []models.Outboxed{}
	for rows.Next() {
		var (
			e            models.Outboxed
			id, src, at  int64
			kind, change string
		)
		if err := rows.Scan(&id, &kind, &e.ObjectID, &e.UserID, &src, &e.Version.EventID, &e.Version.Deleted,
			&change, &e.Origin, &at); err != nil {
			return nil, fmt.Errorf("read the outbox: %w", translate(err))
		}
		e.Key, e.Kind, e.Change = strconv.FormatInt(id, 10), models.Kind(kind), models.EventType(change)
		e.Version.SourceTime, e.At = fromMS(src), fromMS(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the outbox: %w", translate(err))
	}
	return out, nil
}

// OutboxOldest returns when the first row of the outbox applied (its
// primary key).
func (o *Outbound) OutboxOldest(ctx context.Context) (time.Time, bool, error) {
	var at int64
	err := o.s.r.QueryRowContext(ctx, `SELECT at FROM outbox ORDER BY id LIMIT 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the outbox's oldest entry: %w", translate(err))
	}
	return fromMS(at), true, nil
}

// Fanout queues each change for its endpoints and deletes the outbox rows
// done, in one transaction.
func (o *Outbound) Fanout(ctx context.Context, fs []models.Fanout, done []string, now time.Time) error {
	err := o.s.writeBackgroundN(ctx, max(len(fs), len(done)), func(t *wtx) error {
		exists := map[string]bool{}
		for _, f := range fs {
			for _, ep := range f.Endpoints {
				ok, seen := exists[ep]
				if !seen {
					var one int
					err := t.row(`SELECT 1 FROM endpoints WHERE id = ?`, ep).Scan(&one)
					if err != nil && !errors.Is(err, sql.ErrNoRows) {
						return translate(err)
					}
					ok = err == nil
					exists[ep] = ok
				}
				if !ok {
					continue // deleted since the fan-out read the endpoints
				}
				cur, err := readDelivery(t.row(`SELECT `+deliveryColumns+` FROM deliveries
					WHERE endpoint_id = ? AND kind = ? AND object_id = ?`, ep, string(f.Pending.Kind), f.Pending.ObjectID))
				if err != nil && !errors.Is(err, models.ErrNotFound) {
					return err
				}
				if d, changed := f.Queue(cur, ep, now); changed {
					if err := putDelivery(t, d); err != nil {
						return err
					}
				}
			}
		}
		for _, key := range done {
			if _, err := t.exec(`DELETE FROM outbox WHERE id = ?`, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fan out the outbox: %w", err)
	}
	return nil
}

const deliveryColumns = `endpoint_id, kind, object_id, user_id, message_id, source_time, event_id, deleted, change, origin,
	status, attempts, next_at, since, fields, sent, last_status, last_error, last_at, delivered_at, delivered_msg`

func readDelivery(sc interface{ Scan(...any) error }) (models.Delivery, error) {
	var (
		d                   models.Delivery
		kind, change        string
		src, next, since    int64
		fields, sent        sql.NullString
		lastAt, deliveredAt sql.NullInt64
	)
	err := sc.Scan(&d.EndpointID, &kind, &d.ObjectID, &d.UserID, &d.MessageID, &src, &d.Version.EventID, &d.Version.Deleted,
		&change, &d.Origin, &d.Status, &d.Attempts, &next, &since, &fields, &sent, &d.LastStatus, &d.LastError, &lastAt,
		&deliveredAt, &d.DeliveredMsg)
	if err != nil {
		return models.Delivery{}, translate(err)
	}
	d.Kind, d.Change = models.Kind(kind), models.EventType(change)
	d.Version.SourceTime, d.NextAt, d.Since = fromMS(src), fromMS(next), fromMS(since)
	d.LastAt, d.DeliveredAt = timePtr(lastAt), timePtr(deliveredAt)
	if sent.Valid {
		d.Sent = json.RawMessage(sent.String)
	}
	if fields.Valid {
		if err := json.Unmarshal([]byte(fields.String), &d.Fields); err != nil {
			return d, fmt.Errorf("delivery %s: its fields: %w", d.Key(), err)
		}
	}
	return d, nil
}

// fieldsText is a delivery's fingerprint as stored: JSON, NULL for none.
func fieldsText(f map[string]string) (any, error) {
	if f == nil {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func putDelivery(t *wtx, d models.Delivery) error {
	fields, err := fieldsText(d.Fields)
	if err != nil {
		return err
	}
	_, err = t.exec(`INSERT OR REPLACE INTO deliveries (`+deliveryColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.EndpointID, string(d.Kind), d.ObjectID, d.UserID, d.MessageID, ms(d.Version.SourceTime), d.Version.EventID,
		d.Version.Deleted, string(d.Change), d.Origin, d.Status, d.Attempts, ms(d.NextAt), ms(d.Since), fields, text(string(d.Sent)),
		d.LastStatus, d.LastError, msPtr(d.LastAt), msPtr(d.DeliveredAt), d.DeliveredMsg)
	return err
}

// queryDeliveries reads the deliveries a query selects.
func (o *Outbound) queryDeliveries(ctx context.Context, what, q string, args ...any) ([]models.Delivery, error) {
	rows, err := o.s.r.QueryContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries `+q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, translate(err))
	}
	defer rows.Close()
	out := []models.Delivery{}
	for rows.Next() {
		d, err := readDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", what, err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", what, translate(err))
	}
	return out, nil
}

// Due returns up to limit pending deliveries of an endpoint due by now,
// soonest first (index deliveries_due).
func (o *Outbound) Due(ctx context.Context, endpointID string, now time.Time, limit int) ([]models.Delivery, error) {
	return o.queryDeliveries(ctx, "the deliveries due", `INDEXED BY deliveries_due
		WHERE endpoint_id = ? AND status = 'pending' AND next_at <= ? ORDER BY next_at LIMIT ?`, endpointID, ms(now), limit)
}

// Settle records what became of each attempt, and the attempt, in one
// transaction: a background write, as many writes as ss has.
func (o *Outbound) Settle(ctx context.Context, ss ...models.Settlement) error {
	if len(ss) == 0 {
		return nil
	}
	err := o.s.writeBackgroundN(ctx, len(ss), func(t *wtx) error {
		for _, st := range ss {
			if err := settle(t, st); err != nil {
				return fmt.Errorf("record a delivery to endpoint %s: %w", models.Quote(st.Sent.EndpointID), err)
			}
		}
		return nil
	})
	if err != nil && len(ss) == 1 {
		return err
	}
	if err != nil {
		return fmt.Errorf("record %d deliveries: %w", len(ss), err)
	}
	return nil
}

// settle records one settlement.
func settle(t *wtx, st models.Settlement) error {
	sent, result := st.Sent, st.Result
	// The common case in one statement: the delivery still waits for
	// the message sent, and becomes result (models.Settled). It sets
	// only what a settle changes, so the index of users is not
	// written.
	fields, err := fieldsText(result.Fields)
	if err != nil {
		return err
	}
	n, err := t.execN(`UPDATE deliveries SET message_id = ?, status = ?, attempts = ?, next_at = ?, fields = ?, sent = ?,
		last_status = ?, last_error = ?, last_at = ?, delivered_at = ?, delivered_msg = ?
		WHERE endpoint_id = ? AND kind = ? AND object_id = ? AND message_id = ?`,
		result.MessageID, result.Status, result.Attempts, ms(result.NextAt), fields, text(string(result.Sent)),
		result.LastStatus, result.LastError, msPtr(result.LastAt), msPtr(result.DeliveredAt), result.DeliveredMsg,
		sent.EndpointID, string(sent.Kind), sent.ObjectID, sent.MessageID)
	if err != nil {
		return err
	}
	if n == 1 {
		return addAttempt(t, st.Attempt)
	}
	// A newer change was queued meanwhile, or the delivery is gone.
	cur, err := readDelivery(t.row(`SELECT `+deliveryColumns+` FROM deliveries
		WHERE endpoint_id = ? AND kind = ? AND object_id = ?`, sent.EndpointID, string(sent.Kind), sent.ObjectID))
	switch {
	case errors.Is(err, models.ErrNotFound):
		// Its endpoint was deleted, or its user erased, meanwhile.
	case err != nil:
		return err
	default:
		if err := putDelivery(t, models.Settled(cur, sent, result)); err != nil {
			return err
		}
	}
	return addAttempt(t, st.Attempt)
}

// addAttempt records a, unless nothing was sent (no message id).
func addAttempt(t *wtx, a models.Attempt) error {
	if a.MessageID == "" {
		return nil
	}
	_, err := t.exec(`INSERT INTO delivery_attempts (endpoint_id, message_id, type, object_id, at, status, latency_ms, error, delivered)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.EndpointID, a.MessageID, a.Type, a.ObjectID, ms(a.At), a.Status,
		a.Latency.Milliseconds(), a.Error, a.Delivered)
	return err
}

// Delivery returns an endpoint's delivery of one object.
func (o *Outbound) Delivery(ctx context.Context, endpointID string, kind models.Kind, objectID string) (models.Delivery, error) {
	d, err := readDelivery(o.s.r.QueryRowContext(ctx, `SELECT `+deliveryColumns+` FROM deliveries
		WHERE endpoint_id = ? AND kind = ? AND object_id = ?`, endpointID, string(kind), objectID))
	if err != nil {
		return d, fmt.Errorf("read a delivery: %w", err)
	}
	return d, nil
}

// deliveryCursor is a delivery's place in its endpoint's list: kind and
// object id.
func deliveryCursor(d models.Delivery) string { return string(d.Kind) + "/" + d.ObjectID }

// Deliveries returns a page of an endpoint's deliveries, by kind and
// object (the primary key; with a status, deliveries_status).
func (o *Outbound) Deliveries(ctx context.Context, f models.DeliveryFilter) ([]models.Delivery, string, error) {
	kind, object, _ := strings.Cut(f.After, "/")
	q := `WHERE endpoint_id = ? AND (kind, object_id) > (?, ?)`
	args := []any{f.EndpointID, kind, object}
	if f.Status != "" {
		// One range of deliveries_status, however few have the status.
		q = `INDEXED BY deliveries_status ` + q + ` AND status = ?`
		args = append(args, f.Status)
	}
	return repository.Page(f.Limit, f.After, func(after string, n int) ([]models.Delivery, error) {
		kind, object, _ := strings.Cut(after, "/")
		args[1], args[2] = kind, object
		return o.queryDeliveries(ctx, "deliveries", q+` ORDER BY kind, object_id LIMIT ?`, append(args, n)...)
	}, func(models.Delivery) bool { return true }, deliveryCursor)
}

// Requeue makes the deliveries f selects pending again, due at now.
func (o *Outbound) Requeue(ctx context.Context, f models.Requeue, now time.Time) (int, error) {
	var n int64
	err := o.s.write(ctx, func(t *wtx) error {
		var err error
		const set = `UPDATE deliveries SET status = 'pending', attempts = 0, next_at = ?, since = ?, fields = NULL
			WHERE endpoint_id = ? AND status <> 'pending' `
		switch {
		case f.Kind != "":
			n, err = t.execN(set+`AND kind = ? AND object_id = ?`, ms(now), ms(now), f.EndpointID, string(f.Kind), f.ObjectID)
			return err
		case f.Failed:
			n, err = t.execN(set+`AND (endpoint_id, kind, object_id) IN (SELECT endpoint_id, kind, object_id
				FROM deliveries INDEXED BY deliveries_status WHERE endpoint_id = ? AND status = 'failed' LIMIT ?)`,
				ms(now), ms(now), f.EndpointID, f.EndpointID, f.Limit)
			return err
		}
		n, err = t.execN(set+`AND (endpoint_id, kind, object_id) IN (SELECT endpoint_id, kind, object_id
			FROM deliveries INDEXED BY deliveries_last WHERE endpoint_id = ? AND last_at >= ? AND status <> 'pending' LIMIT ?)`,
			ms(now), ms(now), f.EndpointID, f.EndpointID, ms(f.Since), f.Limit)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("requeue deliveries of endpoint %s: %w", models.Quote(f.EndpointID), err)
	}
	return int(n), nil
}

// Backlog returns the pending deliveries of each endpoint of ids (none:
// every endpoint) that has some (index deliveries_backlog), counted up to
// models.MaxBacklogCount each.
func (o *Outbound) Backlog(ctx context.Context, ids ...string) (map[string]models.Backlog, error) {
	ids, err := repository.EndpointIDs(ctx, o, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]models.Backlog{}
	for _, id := range ids {
		var (
			n      int64
			oldest sql.NullInt64
		)
		err := o.s.r.QueryRowContext(ctx, `SELECT count(*), min(since) FROM (SELECT since FROM deliveries INDEXED BY deliveries_backlog
			WHERE endpoint_id = ? AND status = 'pending' ORDER BY since LIMIT ?)`, id, models.MaxBacklogCount).Scan(&n, &oldest)
		if err != nil {
			return nil, fmt.Errorf("count the backlog of endpoint %s: %w", models.Quote(id), translate(err))
		}
		if n > 0 {
			out[id] = models.Backlog{Pending: n, Oldest: timePtr(oldest)}
		}
	}
	return out, nil
}

// Attempts returns a page of attempts, newest first.
func (o *Outbound) Attempts(ctx context.Context, f models.AttemptFilter) ([]models.Attempt, string, error) {
	var after int64 = 1<<63 - 1
	if f.After != "" {
		n, err := strconv.ParseInt(f.After, 10, 64)
		if err != nil {
			return nil, "", models.Public(models.ErrInvalid, "the cursor is not one this list gave").In("cursor")
		}
		after = n
	}
	q := `SELECT id, endpoint_id, message_id, type, object_id, at, status, latency_ms, error, delivered
		FROM delivery_attempts WHERE id < ?`
	args := []any{after}
	if f.EndpointID != "" {
		q += ` AND endpoint_id = ?`
		args = append(args, f.EndpointID)
	}
	if f.Failed {
		q += ` AND delivered = 0`
	}
	rows, err := o.s.r.QueryContext(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("read attempts: %w", translate(err))
	}
	defer rows.Close()
	out := []models.Attempt{}
	for rows.Next() {
		var (
			a                 models.Attempt
			id, at, latencyMS int64
		)
		if err := rows.Scan(&id, &a.EndpointID, &a.MessageID, &a.Type, &a.ObjectID, &at, &a.Status, &latencyMS,
			&a.Error, &a.Delivered); err != nil {
			return nil, "", fmt.Errorf("read attempts: %w", translate(err))
		}
		a.ID, a.At, a.Latency = strconv.FormatInt(id, 10), fromMS(at), time.Duration(latencyMS)*time.Millisecond
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("read attempts: %w", translate(err))
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = out[f.Limit-1].ID
	}
	return out, next, nil
}

// DeleteAttemptsBefore deletes up to limit attempts made before cutoff
// (the primary key: see below).
func (o *Outbound) DeleteAttemptsBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var n int64
	err := o.s.writeBackground(ctx, func(t *wtx) error {
		// The oldest first, by id (the order they were recorded in): those
		// made before cutoff are a prefix, bar attempts recorded out of
		// order by a request's time (15 s at most), which the next pass
		// takes. The cost is what it deletes, plus one row.
		var err error
		n, err = t.execN(`DELETE FROM delivery_attempts WHERE id IN (
			SELECT id FROM delivery_attempts ORDER BY id LIMIT ?) AND at < ?`, limit, ms(cutoff))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete old attempts: %w", err)
	}
	return int(n), nil
}
