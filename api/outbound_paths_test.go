package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// The tests of this file hold outbound webhooks' promise on each path
// that applies a change, for every kind of models.Kinds: the change
// reaches the app once, from where it came (its origin), and neither a
// duplicate delivery nor an older state sends anything more. Each test's
// table has a row per kind, and fails when a kind has none; a kind a path
// does not read says why in its row. The webhook path is
// TestOutbound_EveryKindsChangeReachesTheAppAsItsRESTShape
// (outbound_test.go); backfill and reconcile are
// TestBackfillAndReconcile_EveryKindTheyReadReachesTheEndpoints
// (cmd/usersync/outbound_test.go).

// pathKind is one kind's webhooks for the tests of the paths: a state of
// one object of the kind, as Clerk's webhook carries it.
type pathKind struct {
	// state is the object's state with its updated_at moved by shift
	// milliseconds (a negative shift: an older state of the same object),
	// and the states it nests with it.
	state func(t *testing.T, shift int64) []byte
	typ   string // the outbound type of its message, the object being new here
	// plan: the state changes its payer's plan, so a plan.changed comes
	// too, from the same path.
	plan bool
	// nested are the types of the messages of the objects the state
	// nests (a membership's organization, a subscription's items), each
	// from the same path.
	nested []string
	// deletion is Clerk's deletion of the object; nil for a kind Clerk
	// never deletes (Clerk Billing's).
	deletion func(t *testing.T) []byte
}

// shifted moves a Clerk time (Unix ms, as JSON decodes it) by shift.
func shifted(v any, shift int64) int64 { return int64(v.(float64)) + shift }

// pathKinds are the states of the path tests, one row per kind; a kind of
// models.Kinds without a row fails the tests.
func pathKinds() map[models.Kind]pathKind {
	fixtureState := func(name string) func(t *testing.T, shift int64) []byte {
		return func(t *testing.T, shift int64) []byte {
			return editFixture(t, name, func(env, d map[string]any) {
				d["updated_at"] = shifted(d["updated_at"], shift)
				env["timestamp"] = d["updated_at"]
				if org, ok := d["organization"].(map[string]any); ok { // a membership's: as old as it
					org["updated_at"] = shifted(org["updated_at"], shift)
				}
			})
		}
	}
	billingState := func(file, typ string) func(t *testing.T, shift int64) []byte {
		return func(t *testing.T, shift int64) []byte {
			return billingBody(t, file, typ, func(d map[string]any) {
				d["updated_at"] = shifted(d["updated_at"], shift)
				items, _ := d["items"].([]any) // a subscription's: each has its own time
				for _, it := range items {
					it := it.(map[string]any)
					it["updated_at"] = shifted(it["updated_at"], shift)
				}
			})
		}
	}
	deletion := func(name string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return fixture(t, name) } // a deletion wins over every state, whatever its time
	}
	return map[models.Kind]pathKind{
		models.KindUser: {typ: "user.created", state: func(t *testing.T, shift int64) []byte {
			return userBody(t, "user.created", clerkUser{ID: "user_paths", UpdatedAt: t0 + shift, Email: "paths@example.com"})
		}, deletion: func(t *testing.T) []byte { return deleteBody(t, "user_paths", t0) }},
		models.KindOrganization: {typ: "organization.created", state: fixtureState("openapi.organization.created.json"),
			deletion: deletion("openapi.organization.deleted.json")},
		models.KindMembership: {typ: "organizationMembership.created", state: fixtureState("openapi.organizationMembership.created.json"),
			deletion: deletion("openapi.organizationMembership.deleted.json"), nested: []string{"organization.created"}},
		models.KindInvitation: {typ: "organizationInvitation.created", state: fixtureState("openapi.organizationInvitation.created.json")},
		models.KindSubscription: {typ: "subscription.created", state: billingState("upstream.subscription.created.json", ""), plan: true,
			nested: []string{"subscriptionItem.created"}},
		models.KindSubscriptionItem: {typ: "subscriptionItem.updated", state: billingState("subscriptionItem.canceled.json", "subscriptionItem.active"), plan: true},
		models.KindPaymentAttempt: {typ: "paymentAttempt.created", state: func(_ *testing.T, shift int64) []byte {
			return attemptBody("paymentAttempt.created", "pa_paths", "cpa_Paths", billingUser, t0+shift)
		}},
	}
}

// kindMessages returns the messages of kind k among ms, and the plan.changed
// ones.
func kindMessages(ms []message, k models.Kind) (got, plans []message) {
	for _, m := range ms {
		switch {
		case strings.HasPrefix(m.Type, models.OutboundName(k)+"."):
			got = append(got, m)
		case m.Type == models.TypePlanChanged:
			plans = append(plans, m)
		}
	}
	return got, plans
}

// String is what a failure shows of a message.
func (m message) String() string { return m.Type + " from " + m.Origin + " (" + m.ID + ")" }

// in is h as seen by the (sub)test t: its failures are t's.
func (h *harness) in(t *testing.T) *harness {
	c := *h
	c.t = t
	return &c
}

// eventStatus reads the status of the stored event id.
func (h *harness) eventStatus(id string) string {
	h.t.Helper()
	return h.event(id)["status"].(string)
}

// TestOutbound_EveryKindsChangeAppliedByAReplayOrTheSweepReachesTheAppOnce:
// an event of each kind fails to apply, then a replay (one event, or the
// bulk replay of failed events) or the recovery sweep applies it. The app
// receives one message of the object, from "replay" or "sweep" (and its
// payer's plan.changed from there too); a duplicate delivery of the
// event's svix-id, an older state of the object, and the path run again
// send nothing more. Then the same for the object's deletion, for the
// kinds Clerk deletes.
func TestOutbound_EveryKindsChangeAppliedByAReplayOrTheSweepReachesTheAppOnce(t *testing.T) {
	t.Parallel()
	sweep := func(h *harness, _ string) {
		h.t.Helper()
		// A day later, when every failed event's retry is due.
		rec := &sync.Recovery{Service: h.svc, Store: h.store.Events(), Now: func() time.Time { return time.Now().Add(24 * time.Hour) }}
		if _, err := rec.SweepOnce(context.Background()); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, path := range []struct {
		name, origin string
		// apply applies the failed event id; again runs the path once more
		// after it applied, and checks its answer.
		apply, again func(h *harness, id string)
	}{
		{
			name: "replay", origin: models.OriginReplay,
			apply: func(h *harness, id string) {
				h.t.Helper()
				if r := h.postAs("/v1/events/"+id+"/replay", testAdminKey); r.Code != http.StatusOK || r.JSON(h.t)["outcome"] != "applied" {
					h.t.Fatalf("replay: %s", r)
				}
			},
			again: func(h *harness, id string) {
				h.t.Helper()
				if r := h.postAs("/v1/events/"+id+"/replay", testAdminKey); r.Code != http.StatusConflict {
					h.t.Errorf("a replay of a processed event = %s, want 409", r)
				}
			},
		},
		{
			name: "bulk replay", origin: models.OriginReplay,
			apply: func(h *harness, _ string) {
				h.t.Helper()
				if r := h.send(http.MethodPost, "/v1/events/replay", `{}`); r.Code != http.StatusOK || r.JSON(h.t)["matched"] != float64(1) {
					h.t.Fatalf("bulk replay: %s", r)
				}
			},
			again: func(h *harness, _ string) {
				h.t.Helper()
				if r := h.send(http.MethodPost, "/v1/events/replay", `{}`); r.Code != http.StatusOK || r.JSON(h.t)["matched"] != float64(0) {
					h.t.Errorf("a bulk replay with no failed event = %s, want none matched", r)
				}
			},
		},
		{name: "sweep", origin: models.OriginSweep, apply: sweep, again: sweep},
	} {
		rows := pathKinds()
		for _, k := range models.Kinds {
			row, ok := rows[k]
			if !ok {
				t.Errorf("kind %s has no row: the test must cover every kind", k)
				continue
			}
			t.Run(path.name+"/"+string(k), func(t *testing.T) {
				t.Parallel()
				var failing stdsync.Map
				h := newHarness(t, func(o *harnessOptions) {
					o.outbound = true
					o.beforeApply = func(_ context.Context, ch models.Change) error {
						if _, ok := failing.Load(ch.Version().EventID); ok {
							return models.Public(models.ErrRetryLater, "down for a test")
						}
						return nil
					}
				})
				app := newAppReceiver(t)
				h.register(app)
				// tell fails body's event, applies it by the path, and checks
				// the app received one message of type typ, and every
				// message, from the path; then that Svix's delivery of the
				// same svix-id, noise (an older state, late) and the path run
				// again send nothing more. It returns the messages the change
				// sent.
				tell := func(body []byte, typ string, noise []byte) []message {
					t.Helper()
					before := len(app.messages())
					id := newID()
					failing.Store(id, true)
					h.deliver(id, body)
					if s := h.eventStatus(id); s != string(models.StatusFailed) {
						t.Fatalf("the event is %s, want failed", s)
					}
					h.step()
					if ms := app.messages()[before:]; len(ms) != 0 {
						t.Fatalf("messages of a change that did not apply: %v", ms)
					}
					failing.Delete(id)
					path.apply(h, id)
					h.step()
					ms := app.messages()[before:]
					if got, _ := kindMessages(ms, k); len(got) != 1 || got[0].Type != typ {
						t.Fatalf("messages = %v, want one %s from %s", ms, typ, path.origin)
					}
					for _, m := range ms {
						if m.Origin != path.origin {
							t.Errorf("%s from %q, want from %s", m.Type, m.Origin, path.origin)
						}
					}
					sent := len(app.messages())
					if r := h.mustDeliver(id, body); r["duplicate"] != true {
						t.Errorf("Svix's delivery of the same svix-id = %v, want a duplicate", r)
					}
					if r := h.mustDeliver(newID(), noise); r["outcome"] == "applied" {
						t.Errorf("an older state applied: %v", r)
					}
					path.again(h, id)
					h.step()
					if ms := app.messages()[sent:]; len(ms) != 0 {
						t.Errorf("messages after the change was told: %v; want none", ms)
					}
					return ms
				}
				ms := tell(row.state(t, 0), row.typ, row.state(t, -1000))
				if _, plans := kindMessages(ms, k); row.plan && len(plans) != 1 {
					t.Errorf("%d plan.changed, want the payer's plan, once", len(plans))
				}
				for _, typ := range row.nested {
					if n := len(slices.DeleteFunc(slices.Clone(ms), func(m message) bool { return m.Type != typ })); n != 1 {
						t.Errorf("%d %s, want the nested object's, once", n, typ)
					}
				}
				if row.deletion != nil {
					tell(row.deletion(t), models.OutboundType(k, models.EventDeleted), row.state(t, -1000))
				}
			})
		}
	}
}

// TestOutbound_EveryKindASyncRouteReadsReachesTheAppOnce: the sync
// routes (POST /v1/users/{userId}/sync, POST
// /v1/organizations/{orgId}/sync) apply the object Clerk has; the app
// receives it once, from "sync". Syncing the same state again, or a
// webhook of an older state, sends nothing; a newer state Clerk has by
// the next sync is sent as an update.
func TestOutbound_EveryKindASyncRouteReadsReachesTheAppOnce(t *testing.T) {
	t.Parallel()
	type syncRow struct {
		// none says why no sync route reads the kind; the rest is then unset.
		none string
		path string // the route
		// clerk is the object as Clerk's API serves it, updated at t0+shift
		// (its name differs with shift: each state is a change).
		clerk func(t *testing.T, shift int64) json.RawMessage
		// add gives the fake Clerk the object (replacing the one it has).
		add func(f *clerktest.Server, raw json.RawMessage)
		// webhook is a webhook of the object's state at t0+shift.
		webhook func(t *testing.T, shift int64) []byte
	}
	const userID, orgID = "user_pathsSync", "org_pathsSync"
	rows := map[models.Kind]syncRow{
		models.KindUser: {
			path: "/v1/users/" + userID + "/sync",
			clerk: func(t *testing.T, shift int64) json.RawMessage {
				return clerkData(t, clerkUser{ID: userID, UpdatedAt: t0 + shift, Email: "sync@example.com", First: fmt.Sprint("S", shift)})
			},
			add: func(f *clerktest.Server, raw json.RawMessage) { f.Remove(userID); f.Add(raw) },
			webhook: func(t *testing.T, shift int64) []byte {
				return userBody(t, "user.updated", clerkUser{ID: userID, UpdatedAt: t0 + shift, Email: "sync@example.com", First: fmt.Sprint("S", shift)})
			},
		},
		models.KindOrganization: {
			path: "/v1/organizations/" + orgID + "/sync",
			clerk: func(t *testing.T, shift int64) json.RawMessage {
				return clerkOrg(t, orgID, func(d map[string]any) { d["updated_at"], d["name"] = t0+shift, fmt.Sprint("Org ", shift) })
			},
			add: func(f *clerktest.Server, raw json.RawMessage) { f.Remove(orgID); f.AddOrganization(raw) },
			webhook: func(t *testing.T, shift int64) []byte {
				return editFixture(t, "openapi.organization.updated.json", func(env, d map[string]any) {
					d["id"], d["updated_at"], env["timestamp"], d["name"] = orgID, t0+shift, t0+shift, fmt.Sprint("Org ", shift)
				})
			},
		},
		models.KindMembership:       {none: "the organization's sync route reads the organization alone, not its memberships"},
		models.KindInvitation:       {none: "the organization's sync route reads the organization alone, not its invitations"},
		models.KindSubscription:     {none: "no sync route reads Clerk Billing's objects"},
		models.KindSubscriptionItem: {none: "no sync route reads Clerk Billing's objects"},
		models.KindPaymentAttempt:   {none: "no sync route reads Clerk Billing's objects"},
	}
	fake := clerktest.New(t, nil)
	cl, err := clerk.New(fake.URL, "sk_test_syncKey")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *harnessOptions) { o.outbound, o.clerk = true, cl })
	app := newAppReceiver(t)
	h.register(app)
	for _, k := range models.Kinds {
		row, ok := rows[k]
		switch {
		case !ok:
			t.Errorf("kind %s has no row: the test must cover every kind", k)
			continue
		case row.none != "":
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			h := h.in(t)
			sync := func(want int) []message {
				t.Helper()
				before := len(app.messages())
				if r := h.send(http.MethodPost, row.path, ""); r.Code != http.StatusOK {
					t.Fatalf("sync: %s", r)
				}
				h.step()
				got, _ := kindMessages(app.messages()[before:], k)
				if len(got) != want {
					t.Fatalf("messages = %+v, want %d", got, want)
				}
				return got
			}
			row.add(fake, row.clerk(t, 0))
			ms := sync(1)
			if ms[0].Origin != models.OriginSync || ms[0].Type != models.OutboundName(k)+".updated" {
				t.Errorf("message %s from %q, want %s.updated from sync", ms[0].Type, ms[0].Origin, models.OutboundName(k))
			}
			sync(0) // the same state again
			before := len(app.messages())
			if r := h.mustDeliver(newID(), row.webhook(t, -1000)); r["outcome"] != "stale" {
				t.Errorf("an older state = %v, want stale", r)
			}
			h.step()
			if ms := app.messages()[before:]; len(ms) != 0 {
				t.Errorf("messages of an older state: %+v", ms)
			}
			row.add(fake, row.clerk(t, 1000))
			if ms := sync(1); ms[0].Origin != models.OriginSync || ms[0].Type != models.OutboundName(k)+".updated" {
				t.Errorf("the newer state's message %s from %q, want %s.updated from sync", ms[0].Type, ms[0].Origin, models.OutboundName(k))
			}
		})
	}
}

// TestOutbound_AnItemNewerThanItsOlderSubscriptionEventReachesTheApp: a
// subscription event older than the stored subscription that carries a
// newer state of an item changes the item, and the payer's plan, but not
// the subscription: the app receives the item's and the plan's messages,
// not the subscription's. An item event older than the stored item sends
// nothing. (api/outbound_nested_test.go has the rest of the nested items.)
func TestOutbound_AnItemNewerThanItsOlderSubscriptionEventReachesTheApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	h.register(app)
	// The fixture's one item, and its Clerk time.
	const itemID, itemAt = "csub_item_2g7np7Hrk0SN6kj5EDMLDaKNL0S", int64(1716883200000)
	// subscription is the fixture's subscription as an event of type typ,
	// in status, its updated_at moved by shift, and its item in
	// itemStatus, its updated_at moved by itemShift.
	subscription := func(typ, status string, shift int64, itemStatus string, itemShift int64) []byte {
		return billingBody(t, "upstream.subscription.created.json", typ, func(d map[string]any) {
			d["updated_at"], d["status"] = shifted(d["updated_at"], shift), status
			it := d["items"].([]any)[0].(map[string]any)
			it["updated_at"], it["status"] = shifted(it["updated_at"], itemShift), itemStatus
		})
	}
	sent := func(when string, want ...string) {
		t.Helper()
		before := len(app.messages())
		h.step()
		var got []string
		for _, m := range app.messages()[before:] {
			var d struct{ ID string }
			_ = json.Unmarshal(m.Data, &d)
			if strings.HasPrefix(m.Type, "subscriptionItem.") && d.ID != itemID {
				t.Errorf("%s: %s of item %s, want of %s", when, m.Type, d.ID, itemID)
			}
			got = append(got, m.Type+" from "+m.Origin)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: messages %q, want %q", when, got, want)
		}
	}
	h.mustDeliver(newID(), subscription("subscription.created", "active", 1000, "active", 0))
	sent("the subscription's creation",
		"plan.changed from webhook", "subscription.created from webhook", "subscriptionItem.created from webhook")
	h.mustDeliver(newID(), billingBody(t, "subscriptionItem.canceled.json", "subscriptionItem.canceled", func(d map[string]any) {
		d["id"], d["updated_at"] = itemID, itemAt-1000
	}))
	sent("an older item event")
	h.mustDeliver(newID(), subscription("subscription.updated", "canceled", 0, "past_due", 3000))
	sent("a newer item in an older subscription", "subscriptionItem.updated from webhook", "plan.changed from webhook")
}
