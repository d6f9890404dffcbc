package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
)

// The seeded outbound webhooks (-deliveries D), through the store's own
// writes (the same calls on both stores):
//   - one endpoint, scaleEndpoint, enabled, for every type, on an address
//     nothing is sent to (the dispatcher is not run);
//   - delivery i (i < D) is of user i: the change that created the user
//     (Clerk time epoch + i ms), queued by Fanout, then settled by Settle
//     with one attempt: delivered (200), or, for every 100th
//     (pendingDelivery), failed (503) and pending again, due at the seed
//     time (dueNowDelivery: every 200th) or a day after it;
//   - outboxSeed entries in the outbox: user.updated changes of users
//     whose delivery is pending and due now, delivered through
//     Store.Deliver with the outbox's recording on (only then: the
//     webhooks the program measures are not recorded).
//
// The measurements that write keep this shape: a fan-out queues changes
// of deliveries already pending and due (a newer change in the place of
// the one waiting), after putting as many new entries in the outbox; a
// settle settles, delivered, a delivery the program queued just before.
const (
	scaleEndpoint = "ep_scale"
	minDeliveries = 2000 // 10 pending deliveries due now: a Due of 8 finds 8
	outboxSeed    = 300
	fanoutEntries = 64 // a relay batch (the relay writes up to 256 at once)
	outboxRead    = 256
)

func pendingDelivery(i int) bool { return i%100 == 50 }
func dueNowDelivery(i int) bool  { return i%200 == 50 }

// dueNowObject is the user of the k-th (modulo their number) delivery
// pending and due now, among d deliveries.
func dueNowObject(k, d int) int { return 50 + 200*(k%max((d+149)/200, 1)) }

// seedPending is the change that queued delivery i, applied at at.
func seedPending(i int, at time.Time) models.Pending {
	uid := seedUser(i)
	return models.Pending{Kind: models.KindUser, ObjectID: uid, UserID: uid,
		Version: models.Version{SourceTime: epoch.Add(time.Duration(i) * time.Millisecond), EventID: "msg_seed_user_" + strconv.Itoa(i)},
		Change:  models.EventCreated, Origin: models.OriginBackfill, At: at}
}

// seedOutbound seeds the endpoint, the deliveries and the outbox size s
// asks for, as far as st says they are not yet.
func (b *bench) seedOutbound(ctx context.Context, s size, st *seedState, res *seeded, at time.Time) error {
	if s.deliveries == 0 {
		return nil
	}
	start := time.Now()
	defer func() { res.deliveriesIn = time.Since(start) }()
	ob := b.store.Outbound()
	if st.Deliveries < s.deliveries || st.Outbox < outboxSeed {
		err := ob.CreateEndpoint(ctx, models.Endpoint{ID: scaleEndpoint, URL: "https://app.invalid/webhooks/usersync",
			Description: "scripts/scale", Enabled: true, Secret: "whsec_" + strings.Repeat("A", 32), CreatedAt: epoch, UpdatedAt: epoch})
		if err != nil && !errors.Is(err, models.ErrConflict) { // made by an earlier run
			return err
		}
	}
	res.deliveries = max(s.deliveries-st.Deliveries, 0)
	err := b.seedRange(ctx, "deliveries", st.Deliveries, s.deliveries, func(lo, hi int) error {
		return b.seedDeliveries(ctx, lo, hi, at)
	}, func(n int) error {
		st.Deliveries = n
		return b.saveSeedState(ctx, *st)
	})
	if err != nil || st.Outbox >= outboxSeed {
		return err
	}
	res.outbox = outboxSeed - st.Outbox
	base := b.seq
	b.seq += res.outbox
	if err := b.record(ctx, res.outbox, func(k int) int { return dueNowObject(k, s.deliveries) }, base); err != nil {
		return fmt.Errorf("seed the outbox: %w", err)
	}
	st.Outbox = outboxSeed
	return b.saveSeedState(ctx, *st)
}

// seedDeliveries queues deliveries [lo, hi) in one fan-out, and settles
// each (16 at a time). Again after a run stopped within the batch, the
// fan-out changes nothing and the settles write the same deliveries; only
// the attempts of the settles already made are recorded twice.
func (b *bench) seedDeliveries(ctx context.Context, lo, hi int, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	ob := b.store.Outbound()
	fs := make([]models.Fanout, 0, hi-lo)
	for i := lo; i < hi; i++ {
		fs = append(fs, models.Fanout{Pending: seedPending(i, at), Endpoints: []string{scaleEndpoint}})
	}
	if err := ob.Fanout(ctx, fs, nil, at); err != nil {
		return err
	}
	return b.applyEach(ctx, lo, hi, func(ctx context.Context, i int) error {
		sent, _ := models.Delivery{}.Queue(scaleEndpoint, seedPending(i, at), at)
		next := at
		if !dueNowDelivery(i) {
			next = at.Add(24 * time.Hour)
		}
		result, a, err := attempted(sent, at, !pendingDelivery(i), next)
		if err != nil {
			return err
		}
		return ob.Settle(ctx, models.Settlement{Sent: sent, Result: result, Attempt: a})
	})
}

// attempted is what the dispatcher settles sent with after an attempt at
// at: delivered (200), or failed (503) and due again at next.
func attempted(sent models.Delivery, at time.Time, delivered bool, next time.Time) (models.Delivery, models.Attempt, error) {
	at = at.UTC().Truncate(time.Millisecond)
	r := sent
	a := models.Attempt{EndpointID: sent.EndpointID, MessageID: sent.MessageID, Type: models.OutboundType(sent.Kind, sent.Change),
		ObjectID: sent.ObjectID, At: at, Latency: 20 * time.Millisecond}
	if !delivered {
		r.Attempts++
		r.LastStatus, r.LastError, r.LastAt, r.NextAt = 503, "HTTP 503", &at, next
		a.Status, a.Error = 503, "HTTP 503"
		return r, a, nil
	}
	fields, err := outbound.Fingerprint(sent.Key(), userShape(sent.ObjectID))
	if err != nil {
		return r, a, err
	}
	r.Status, r.Attempts, r.Fields = models.DeliveryDelivered, 0, fields
	r.LastStatus, r.LastError, r.LastAt, r.DeliveredAt, r.DeliveredMsg = 200, "", &at, &at, sent.MessageID
	a.Status, a.Delivered = 200, true
	return r, a, nil
}

// userShape stands for the state of a user as a delivery sends it: its
// fingerprint is what a delivered delivery keeps (one hash per field).
func userShape(uid string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"id":%q,"primaryEmail":%q,"emailAddresses":[%q],"phoneNumbers":[],"firstName":"Seed",`+
		`"lastName":"User","username":null,"imageUrl":"","publicMetadata":{},"privateMetadata":{},"unsafeMetadata":{},`+
		`"banned":false,"locked":false,"externalAccounts":[],"createdAt":"2025-01-01T00:00:00Z","lastSignInAt":null,`+
		`"deleted":false,"updatedAt":"2025-01-01T00:00:00Z","sourceUpdatedAt":"2025-01-01T00:00:00Z","lastEventId":"msg"}`,
		uid, primaryEmail(uid), primaryEmail(uid)))
}

// record delivers n user.updated changes through Store.Deliver with the
// outbox's recording on, one after another: change k is of user
// object(k), with event id from seq+k, and a Clerk time later than any
// change before it (so each applies, and is recorded).
func (b *bench) record(ctx context.Context, n int, object func(k int) int, seq int) error {
	b.store.Outbound().SetRecording(true)
	defer b.store.Outbound().SetRecording(false)
	for k := range n {
		uid := seedUser(object(k))
		id := fmt.Sprintf("msg_scale_%s_%d", b.run, seq+k)
		now := time.Now()
		b.changeAt = b.changeAt.Add(time.Millisecond)
		if at := now.Truncate(time.Millisecond); at.After(b.changeAt) {
			b.changeAt = at
		}
		body := b.body.make("user.updated", uid, b.changeAt)
		ce, err := models.DecodeEvent(body)
		if err != nil {
			return err
		}
		ch, err := ce.Decode(id, now)
		if err != nil {
			return err
		}
		ts := b.changeAt.UTC()
		ev := models.Event{EventID: id, Type: ce.Type, EventType: ce.EventType(), UserID: uid, ObjectID: uid,
			RawBody: body, Source: models.SourceClerk, SourceTimestamp: &ts,
			ReceivedAt: now.UTC().Truncate(time.Millisecond), Status: models.StatusStored}
		if _, err = b.store.Deliver(ctx, ev, ch, now); err != nil {
			return err
		}
	}
	return nil
}

// getter is the ops' GET of a path, with the key, checked by check.
type getter func(key string, path func(i int) string, check func([]byte) string) func(context.Context, int) (string, error)

// listed checks that a response's list field is not empty.
func listed(field string) func([]byte) string {
	return func(resp []byte) string {
		var m map[string]json.RawMessage
		var items []json.RawMessage
		if json.Unmarshal(resp, &m) != nil || json.Unmarshal(m[field], &items) != nil || len(items) == 0 {
			return "empty " + field
		}
		return ""
	}
}

// outboundOps are the queries of outbound webhooks: the dispatcher's
// (Outbox, Fanout, Due, Settle, Backlog, through the store) and the admin
// API's reads of the endpoint.
func (b *bench) outboundOps(s size, get getter) []op {
	skip := s.deliveries == 0
	ob := b.store.Outbound()
	fixed := func(p string) func(int) string { return func(int) string { return p } }
	ep := "/v1/endpoints/" + scaleEndpoint
	var fan struct {
		fs   []models.Fanout
		done []string
	}
	var settle struct {
		sent, result models.Delivery
		a            models.Attempt
	}
	return []op{
		{name: fmt.Sprintf("outbound: outbox, %d oldest (Outbox)", outboxRead), skip: skip, call: func(ctx context.Context, _ int) (string, error) {
			es, err := ob.Outbox(ctx, outboxRead)
			if err != nil {
				return "", err
			}
			if len(es) < outboxRead {
				return fmt.Sprintf("%d entries", len(es)), nil
			}
			return "", nil
		}},
		{name: "outbound: the outbox's oldest entry (OutboxOldest)", skip: skip, call: func(ctx context.Context, _ int) (string, error) {
			if _, ok, err := ob.OutboxOldest(ctx); err != nil || !ok {
				return "the outbox is empty", err
			}
			return "", nil
		}},
		{name: fmt.Sprintf("outbound: fan-out of %d entries (Fanout)", fanoutEntries), skip: skip,
			// As many new entries as the call takes, then the oldest
			// entries, as the dispatcher reads them.
			prepare: func(ctx context.Context) error {
				base := b.seq
				b.seq += fanoutEntries
				if err := b.record(ctx, fanoutEntries, func(k int) int { return dueNowObject(base+k, s.deliveries) }, base); err != nil {
					return err
				}
				es, err := ob.Outbox(ctx, fanoutEntries)
				if err != nil {
					return err
				}
				fan.fs, fan.done = fan.fs[:0], fan.done[:0]
				for _, e := range es {
					fan.fs = append(fan.fs, models.Fanout{Pending: e.Pending, Endpoints: []string{scaleEndpoint}})
					fan.done = append(fan.done, e.Key)
				}
				return nil
			},
			call: func(ctx context.Context, _ int) (string, error) {
				return "", ob.Fanout(ctx, fan.fs, fan.done, time.Now())
			}},
		{name: "outbound: deliveries due, 8 (Due)", skip: skip, call: func(ctx context.Context, _ int) (string, error) {
			ds, err := ob.Due(ctx, scaleEndpoint, time.Now(), 8)
			if err != nil {
				return "", err
			}
			if len(ds) < 8 {
				return fmt.Sprintf("%d due", len(ds)), nil
			}
			return "", nil
		}},
		{name: "outbound: settle of one delivery, delivered, and its attempt (Settle)", skip: skip,
			// A newer change of a delivered user, queued.
			prepare: func(ctx context.Context) error {
				b.seq++
				j := (b.seq * 7919) % s.deliveries
				if pendingDelivery(j) {
					j--
				}
				uid, now := seedUser(j), time.Now().UTC().Truncate(time.Millisecond)
				p := models.Pending{Kind: models.KindUser, ObjectID: uid, UserID: uid,
					Version: models.Version{SourceTime: now, EventID: fmt.Sprintf("msg_scale_%s_%d", b.run, b.seq)},
					Change:  models.EventUpdated, Origin: models.OriginWebhook, At: now}
				if err := ob.Fanout(ctx, []models.Fanout{{Pending: p, Endpoints: []string{scaleEndpoint}}}, nil, now); err != nil {
					return err
				}
				sent, err := ob.Delivery(ctx, scaleEndpoint, models.KindUser, uid)
				if err != nil {
					return err
				}
				settle.sent = sent
				settle.result, settle.a, err = attempted(sent, now, true, time.Time{})
				return err
			},
			call: func(ctx context.Context, _ int) (string, error) {
				return "", ob.Settle(ctx, models.Settlement{Sent: settle.sent, Result: settle.result, Attempt: settle.a})
			}},
		{name: "outbound: backlog (Backlog)", skip: skip, call: func(ctx context.Context, _ int) (string, error) {
			bl, err := ob.Backlog(ctx)
			if err != nil {
				return "", err
			}
			if bl[scaleEndpoint].Pending == 0 {
				return "no backlog", nil
			}
			return "", nil
		}},
		{name: "GET /v1/endpoints (with backlogs)", skip: skip, call: get(adminKey, fixed("/v1/endpoints"), listed("endpoints"))},
		{name: "GET /v1/endpoints/{id}/attempts?limit=50", skip: skip, call: get(adminKey, fixed(ep+"/attempts?limit=50"), listed("attempts"))},
		{name: "GET /v1/endpoints/{id}/attempts?failed=true", skip: skip, call: get(adminKey, fixed(ep+"/attempts?limit=50&failed=true"), listed("attempts"))},
		{name: "GET /v1/endpoints/{id}/deliveries?limit=50", skip: skip, call: get(adminKey, fixed(ep+"/deliveries?limit=50"), listed("deliveries"))},
		{name: "GET /v1/endpoints/{id}/deliveries?status=pending", skip: skip, call: get(adminKey, fixed(ep+"/deliveries?limit=50&status=pending"), listed("deliveries"))},
		// No delivery is failed (its retries run out): the filter walks every
		// delivery of the endpoint, and finds none.
		{name: "GET /v1/endpoints/{id}/deliveries?status=failed (none)", skip: skip, call: get(adminKey, fixed(ep+"/deliveries?limit=50&status=failed"), nil)},
	}
}
