package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/sqlite"
)

// due is how many failed events each sweep pass finds due, and how many
// processed events past retention each retention pass finds: fewer than
// one batch of either, so a pass is one query and its writes.
const due = 20

// op is one operation measured: call is timed, prepare (untimed) runs
// before each call.
type op struct {
	name    string
	skip    bool // not measured at this size (nothing to read)
	prepare func(ctx context.Context) error
	call    func(ctx context.Context, i int) (note string, err error)
}

// row is what the measurement of one op found.
type row struct {
	name     string
	lat      []time.Duration
	db       time.Duration  // database time within the samples
	notes    map[string]int // results other than the expected one
	capped   bool           // stopped by the time budget
	warmKept bool           // the first call took 1 s or more and is a sample
	spent    time.Duration  // all calls, the warm-up included
	errs     []string       // first few errors, for the report
}

// measure runs every operation at size s.
func (b *bench) measure(ctx context.Context, s size) ([]row, error) {
	cursor, err := b.middleCursor(ctx, s)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, o := range b.ops(s, cursor) {
		if o.skip || (b.o.only != nil && !b.o.only.MatchString(o.name)) {
			continue
		}
		r, err := b.measureOp(ctx, o)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(b.progress, "%d users: %-45s %3d samples, p50 %s, %s\n", s.users, o.name, len(r.lat),
			fmtDur(pct(r.lat, 50)), r.spent.Round(time.Millisecond))
		rows = append(rows, r)
	}
	return rows, nil
}

func (b *bench) measureOp(ctx context.Context, o op) (row, error) {
	r := row{name: o.name, notes: map[string]int{}}
	one := func(i int) (d, dbt time.Duration, note string, err error) {
		if o.prepare != nil {
			pctx, cancel := context.WithTimeout(ctx, setupTimeout)
			err := o.prepare(pctx)
			cancel()
			if err != nil {
				return 0, 0, "", fmt.Errorf("%s: prepare: %w", o.name, err)
			}
		}
		b.db.reset()
		start := time.Now()
		note, err = o.call(ctx, i)
		d = time.Since(start)
		dbt = b.db.total()
		r.spent += d
		if ctx.Err() != nil {
			return 0, 0, "", ctx.Err()
		}
		if err != nil {
			note = "error"
			if len(r.errs) == 0 { // the first says enough
				msg := err.Error()
				if len(msg) > 160 {
					msg = msg[:160] + "…"
				}
				r.errs = append(r.errs, msg)
			}
		}
		return d, dbt, note, nil
	}
	// A first call, not counted unless it is slow: it warms the caches
	// and the connection pool; a slow one is a measurement worth keeping.
	d, dbt, note, err := one(b.o.requests)
	if err != nil {
		return r, err
	}
	if d >= time.Second {
		r.warmKept = true
		r.lat, r.db = append(r.lat, d), dbt
		if note != "" {
			r.notes[note]++
		}
	} else if note != "" {
		r.notes["(warm-up call, not counted) "+note]++
	}
	for i := 0; len(r.lat) < b.o.requests; i++ {
		if r.spent >= b.o.budget {
			r.capped = true
			break
		}
		d, dbt, note, err := one(i)
		if err != nil {
			return r, err
		}
		r.lat, r.db = append(r.lat, d), r.db+dbt
		if note != "" {
			r.notes[note]++
		}
	}
	slices.Sort(r.lat)
	return r, nil
}

// pick spreads sample i of the run (the warm-up is i = requests) over n
// seeded items.
func (b *bench) pick(i, n int) int {
	return int((int64(2*i+1) * int64(n)) / int64(2*(b.o.requests+1)))
}

// middleCursor is a users-page cursor from the middle of the users: the
// cursor the store gives after the user just before the middle one, found
// by a page of that one user (not timed). Both stores page in the order of
// their key, so it is a cursor of the store's own form.
func (b *bench) middleCursor(ctx context.Context, s size) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	uid := seedUser(s.users / 2)
	switch st := b.store.(type) {
	case *sqlite.Store:
		return hex.EncodeToString([]byte(uid)), nil
	case *mongo.Store:
		var d struct {
			ID bson.ObjectID `bson:"_id"`
		}
		err := st.Database().Collection(mongo.UsersCollection).FindOne(ctx, bson.D{{Key: "userId", Value: uid}},
			options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&d)
		if err != nil {
			return "", fmt.Errorf("find the middle user: %w", err)
		}
		return d.ID.Hex(), nil
	}
	return "", fmt.Errorf("no cursor for a %T", b.store)
}

func (b *bench) ops(s size, cursor string) []op {
	n, m := s.users, max(s.events, 1)
	webhook := func(want func(webhookAnswer) bool, mk func(i int) (id string, body []byte)) func(context.Context, int) (string, error) {
		return func(ctx context.Context, i int) (string, error) {
			id, body := mk(i)
			code, resp, err := b.post(ctx, id, body)
			if err != nil {
				return "", err
			}
			var a webhookAnswer
			_ = json.Unmarshal(resp, &a)
			if code != http.StatusOK {
				return "HTTP " + strconv.Itoa(code), nil
			}
			if !want(a) {
				return fmt.Sprintf("answered status=%s outcome=%s duplicate=%t", a.Status, a.Outcome, a.Duplicate), nil
			}
			return "", nil
		}
	}
	applied := func(a webhookAnswer) bool {
		return a.Status == models.StatusProcessed && a.Outcome == models.OutcomeApplied && !a.Duplicate
	}
	var get getter = func(key string, path func(i int) string, check func([]byte) string) func(context.Context, int) (string, error) {
		return func(ctx context.Context, i int) (string, error) {
			code, resp, err := b.get(ctx, path(i), key)
			if err != nil {
				return "", err
			}
			if code != http.StatusOK {
				return "HTTP " + strconv.Itoa(code), nil
			}
			if check != nil {
				return check(resp), nil
			}
			return "", nil
		}
	}
	fixed := func(p string) func(int) string { return func(int) string { return p } }
	nonEmpty := func(resp []byte) string {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		if json.Unmarshal(resp, &page) != nil || len(page.Data) == 0 {
			return "empty page"
		}
		return ""
	}
	events := "/v1/events?limit=50"
	ops := []op{
		{name: "webhook: new user", call: webhook(applied, func(int) (string, []byte) {
			b.seq++
			uid := fmt.Sprintf("user_scale%sx%d", b.run, b.seq) // letters and digits: a Clerk id
			return fmt.Sprintf("msg_scale_%s_%d", b.run, b.seq), b.body.make("user.created", uid, time.Now())
		})},
		{name: "webhook: update of a known user", call: webhook(applied, func(i int) (string, []byte) {
			b.seq++
			return fmt.Sprintf("msg_scale_%s_%d", b.run, b.seq), b.body.make("user.updated", seedUser(b.pick(i, n)), time.Now())
		})},
		{name: "webhook: duplicate of a processed event", call: webhook(func(a webhookAnswer) bool {
			return a.Duplicate && a.Status == models.StatusProcessed
		}, func(i int) (string, []byte) {
			k := b.pick(i, m)
			return seedEvent(k), b.body.make("user.updated", seedUser(k%n), epoch.Add(time.Duration(k)*time.Second))
		})},
		{name: "GET /v1/users/{id}", call: get(apiKey, func(i int) string {
			return "/v1/users/" + seedUser(b.pick(i, n))
		}, nil)},
		{name: "GET /v1/users?limit=100&cursor= (middle)", call: get(apiKey, fixed("/v1/users?limit=100&cursor="+cursor), nonEmpty)},
		{name: "GET /v1/users?updatedSince=&limit=100 (change feed)", call: get(apiKey, fixed("/v1/users?limit=100&updatedSince="+url.QueryEscape(epoch.Format(time.RFC3339))), nonEmpty)},
		{name: "GET /v1/users?email=", call: get(apiKey, func(i int) string {
			return "/v1/users?email=" + url.QueryEscape(primaryEmail(seedUser(b.pick(i, n))))
		}, nonEmpty)},
		{name: "GET /v1/events?limit=50", call: get(adminKey, fixed(events), nonEmpty)},
		{name: "GET /v1/events?status=processed", call: get(adminKey, fixed(events+"&status=processed"), nonEmpty)},
		{name: "GET /v1/events?status=failed", call: get(adminKey, fixed(events+"&status=failed"), nil)},
		{name: "GET /v1/events?eventType=updated", call: get(adminKey, fixed(events+"&eventType=updated"), nonEmpty)},
		{name: "GET /v1/events?status=processed&eventType=updated", call: get(adminKey, fixed(events+"&status=processed&eventType=updated"), nonEmpty)},
		{name: "GET /v1/events?userId=", call: get(adminKey, func(i int) string {
			return events + "&userId=" + seedUser(b.pick(i, min(n, m)))
		}, nonEmpty)},
		{name: "GET /v1/events?kind=user (one range per type, merged)", call: get(adminKey, fixed(events+"&kind=user"), nonEmpty)},
		{name: "GET /v1/events?status=processed&kind=user", call: get(adminKey, fixed(events+"&status=processed&kind=user"), nonEmpty)},
		{name: "GET /v1/events?kind=membership (a rare kind)", call: get(adminKey, fixed(events+"&kind=membership"), nil)},
		{name: "GET /v1/events?eventType=organization.deleted", call: get(adminKey, fixed(events+"&eventType=organization.deleted"), nil)},
		{name: "GET /v1/events?objectId=", call: get(adminKey, func(i int) string {
			return events + "&objectId=orgmem_seed" + strconv.Itoa(b.pick(i, max(s.memberships, 1)))
		}, nil)},
		{name: "GET /v1/events/stats", call: get(adminKey, fixed("/v1/events/stats"), nil)},
		{name: "GET /v1/organizations/{id}", skip: s.orgs == 0, call: get(apiKey, func(i int) string {
			return "/v1/organizations/" + seedOrg(b.pick(i, max(s.orgs, 1)))
		}, nil)},
		{name: "GET /v1/organizations?slug=", skip: s.orgs == 0, call: get(apiKey, func(i int) string {
			return "/v1/organizations?slug=org-seed-" + strconv.Itoa(b.pick(i, max(s.orgs, 1)))
		}, nonEmpty)},
		{name: "GET /v1/organizations/{id}/memberships?limit=100", skip: s.memberships == 0, call: get(apiKey, func(i int) string {
			return "/v1/organizations/" + seedOrg(b.pick(i, max(s.orgs, 1))) + "/memberships?limit=100"
		}, nonEmpty)},
		{name: "GET /v1/users/{id}/memberships", skip: s.memberships == 0, call: get(apiKey, func(i int) string {
			return "/v1/users/" + seedUser(b.pick(i, max(s.memberships, 1))) + "/memberships"
		}, nonEmpty)},
		{name: "GET /v1/users/{id}/billing", skip: s.payers == 0, call: get(apiKey, func(i int) string {
			return "/v1/users/" + seedUser(b.pick(i, s.payers)) + "/billing"
		}, func(resp []byte) string {
			if !strings.Contains(string(resp), `"slug":"`) {
				return "no plan"
			}
			return ""
		})},
		{name: "webhook: a payer's new subscription item state", skip: s.payers == 0, call: webhook(applied, func(i int) (string, []byte) {
			b.seq++
			return fmt.Sprintf("msg_scale_%s_%d", b.run, b.seq), itemBody(seedUser(b.pick(i, s.payers)), "team", time.Now().Add(time.Duration(b.seq)*time.Millisecond))
		})},
	}
	ops = append(ops, b.outboundOps(s, get)...)
	return append(ops, []op{
		{name: "GET /metrics", call: get("", fixed("/metrics"), nil)},
		{name: fmt.Sprintf("sweep pass (%d failed events due)", due),
			prepare: func(ctx context.Context) error {
				evs := make([]models.Event, due)
				now := time.Now()
				for j := range evs {
					b.seq++
					evs[j] = b.event(fmt.Sprintf("msg_due_%s_%d", b.run, b.seq), "user.updated",
						seedUser(b.pick(j, n)), now, now.Add(-2*time.Minute), models.StatusFailed, "")
				}
				return b.seedEventList(ctx, evs)
			},
			call: func(ctx context.Context, _ int) (string, error) {
				rep, err := b.rec.SweepOnce(ctx)
				if err != nil {
					return "", err
				}
				if got := rep.Swept[models.StatusProcessed]; got < due {
					return fmt.Sprintf("processed %d of %d", got, due), nil
				}
				return "", nil
			}},
		{name: fmt.Sprintf("retention pass (%d events past retention)", due),
			prepare: func(ctx context.Context) error {
				evs := make([]models.Event, due)
				old := epoch.AddDate(-1, 0, 0)
				for j := range evs {
					b.seq++
					evs[j] = b.event(fmt.Sprintf("msg_old_%s_%d", b.run, b.seq), "user.updated",
						seedUser(b.pick(j, n)), old, old, models.StatusProcessed, models.OutcomeApplied)
				}
				return b.seedEventList(ctx, evs)
			},
			call: func(ctx context.Context, _ int) (string, error) {
				got, err := b.rec.RetainOnce(ctx)
				if err != nil {
					return "", err
				}
				if got < due {
					return fmt.Sprintf("deleted %d of %d", got, due), nil
				}
				return "", nil
			}},
	}...)
}

type webhookAnswer struct {
	Status    models.EventStatus `json:"status"`
	Outcome   models.Outcome     `json:"outcome"`
	Duplicate bool               `json:"duplicate"`
}

func (b *bench) post(ctx context.Context, id string, body []byte) (int, []byte, error) {
	now := time.Now()
	sig, err := b.wh.Sign(id, now, body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/webhooks/clerk", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	return b.do(req)
}

func (b *bench) get(ctx context.Context, path, key string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if key != "" {
		req.Header.Set("authorization", "Bearer "+key)
	}
	return b.do(req)
}

func (b *bench) do(req *http.Request) (int, []byte, error) {
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}
