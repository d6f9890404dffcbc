package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	gosync "sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/sync"
)

// appEndpoint is an app's endpoint on loopback: it verifies each message
// with svix's own library and records, per object, what it received
// ("<type> from <origin>").
type appEndpoint struct {
	url, secret string
	mu          gosync.Mutex
	got         map[string][]string // "<outbound name>/<object id>" → messages
}

// objectField is the field of data that names the object, per outbound
// name; "id" for the others, a plan's is its payer's.
var objectField = map[string]string{"user": "userId", "organization": "organizationId", "organizationMembership": "membershipId",
	"organizationInvitation": "invitationId"}

func newAppEndpoint(t *testing.T) *appEndpoint {
	t.Helper()
	secret, err := outbound.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	a := &appEndpoint{secret: secret, got: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Error(err)
		} else if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("a message does not verify: %v", err)
		}
		var m struct {
			Type   string         `json:"type"`
			Origin string         `json:"origin"`
			Data   map[string]any `json:"data"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		name, _, _ := strings.Cut(m.Type, ".")
		field := objectField[name]
		if field == "" {
			field = "id"
		}
		id, _ := m.Data[field].(string)
		if payer, ok := m.Data["payer"].(map[string]any); ok && name == "plan" {
			id, _ = payer["id"].(string)
		}
		a.mu.Lock()
		a.got[name+"/"+id] = append(a.got[name+"/"+id], m.Type+" from "+m.Origin)
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	a.url = srv.URL + "/hooks/usersync"
	return a
}

func (a *appEndpoint) messages() map[string][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.got)
}

// dispatcher is a dispatcher of e's store, as serve's; it returns drain,
// which runs its rounds until nothing waits for the endpoint ep_app (a
// round sends a few messages per endpoint).
func (e *backfillEnv) dispatcher(t *testing.T) (drain func()) {
	d := outbound.NewDispatcher(outbound.Options{Store: e.store, Render: api.Renderer(e.store, nil, 0), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true})})
	return func() {
		t.Helper()
		ctx := context.Background()
		for range 10 {
			if err := d.Step(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := e.store.Outbound().Backlog(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if b["ep_app"].Pending == 0 {
				return
			}
		}
		t.Fatal("deliveries still wait after 10 rounds")
	}
}

// edited is raw with fn's changes.
func edited(t *testing.T, raw json.RawMessage, fn func(d map[string]any)) json.RawMessage {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	fn(d)
	return rawJSON(t, d)
}

// TestBackfillAndReconcile_EveryKindTheyReadReachesTheEndpoints: every
// object of every kind backfill reads from Clerk reaches the app, once,
// from "backfill"; after a webhook outage, each newer state and each
// deletion reconcile finds reaches it, from "reconcile" (a membership
// deleted with its organization: from "cascade"), and so does the payer's
// plan a subscription item changes. A rerun of either sends nothing.
func TestBackfillAndReconcile_EveryKindTheyReadReachesTheEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newBackfillEnv(t, someUsers(t, 3))
	e.clerkHas(t, []int{0, 1}, []membership{{0, 0, 0}, {1, 1, 1}, {2, 0, 1}})
	e.clerkHasItems(t, teamActive(), proEnded())
	e.clerk.AddInvitation(rawJSON(t, clerkInvitationData(0, 0, models.InvitationPending, invitationUpdatedAt(0))))
	e.clerk.AddInvitation(rawJSON(t, clerkInvitationData(1, 1, models.InvitationPending, invitationUpdatedAt(1))))
	app := newAppEndpoint(t)
	now := time.Now().UTC()
	if err := e.store.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: "ep_app", URL: app.url, Enabled: true, Secret: app.secret,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	drain := e.dispatcher(t)

	// What each kind is in Clerk, and what changes there while webhooks
	// are down.
	type row struct {
		// none says why neither backfill nor reconcile reads the kind from
		// Clerk; the rest is then unset.
		none string
		ids  []string // the objects Clerk has at first
		// newer gives Clerk a newer state of updated, a change of one of
		// its fields.
		updated string
		newer   func()
		// deleted is an object Clerk deletes; "" with noDelete, why
		// reconcile never deletes the kind.
		deleted, noDelete string
	}
	rows := map[models.Kind]row{
		models.KindUser: {
			ids:     []string{userID(0), userID(1), userID(2)},
			updated: userID(0),
			newer: func() {
				e.clerk.Remove(userID(0)) // and its membership 0, given back below
				e.clerk.Add(edited(t, clerkUser(t, 0, updatedAt(0)+1000), func(d map[string]any) { d["first_name"] = "Renamed" }))
			},
			deleted: userID(2),
		},
		models.KindOrganization: {
			ids:     []string{orgID(0), orgID(1)},
			updated: orgID(0),
			newer: func() {
				e.clerk.Remove(orgID(0)) // and its memberships 0 and 2: 2 is deleted in Clerk, 0 given back below
				e.clerk.AddOrganization(edited(t, rawJSON(t, clerkOrgData(0, orgUpdatedAt(0)+1000)), func(d map[string]any) { d["name"] = "Renamed" }))
			},
			deleted: orgID(1), // with its membership 1: a cascade
		},
		models.KindMembership: {
			ids:     []string{memberID(0), memberID(1), memberID(2)},
			updated: memberID(0),
			newer: func() {
				e.clerk.AddMembership(edited(t, rawJSON(t, clerkMemberData(0, 0, 0, memberUpdatedAt(0)+1000)), func(d map[string]any) { d["role"] = "org:admin" }))
			},
			deleted: memberID(2),
		},
		models.KindInvitation: {
			ids:     []string{invitationID(0), invitationID(1)},
			updated: invitationID(0),
			newer: func() {
				e.clerk.SetInvitation(rawJSON(t, clerkInvitationData(0, 0, models.InvitationAccepted, invitationUpdatedAt(0)+1000)))
			},
			// Invitation 1 goes with its organization, 1: a cascade.
			noDelete: "Clerk never deletes an invitation (its organization's deletion does)",
		},
		// Clerk's API has no list of subscriptions or of payment attempts
		// that a backfill or a reconcile reads: a payer's plan is computed
		// from its subscription items alone (sync/sources.go). Their
		// changes come from webhooks, the sweep and replays.
		models.KindSubscription:   {none: "no Clerk list of subscriptions is read"},
		models.KindPaymentAttempt: {none: "no Clerk list of payment attempts is read"},
		models.KindSubscriptionItem: {
			ids:     []string{teamItemID, proItemID},
			updated: teamItemID,
			newer: func() {
				e.clerkHasItems(t, clerkItemData(teamItemID, billingPayer, teamPlanID, "team-plan", 5000, "canceled", teamStartedAt+1000), proEnded())
			},
			noDelete: "Clerk never deletes a subscription item (it ends, cancels or abandons it)",
		},
	}
	want := map[string][]string{}
	add := func(k models.Kind, id, typ, origin string) {
		key := models.OutboundName(k) + "/" + id
		want[key] = append(want[key], typ+" from "+origin)
	}
	check := func(when string) {
		t.Helper()
		drain()
		got := app.messages()
		for _, key := range slices.Sorted(maps.Keys(want)) {
			if !slices.Equal(got[key], want[key]) {
				t.Errorf("%s: %s received %q, want %q", when, key, got[key], want[key])
			}
		}
		for key, ms := range got {
			if _, ok := want[key]; !ok {
				t.Errorf("%s: %s received %q, want nothing", when, key, ms)
			}
		}
	}

	e.mustBackfill(t)
	for _, k := range models.Kinds {
		r, ok := rows[k]
		switch {
		case !ok:
			t.Errorf("kind %s has no row: the test must cover every kind", k)
		case r.none == "":
			for _, id := range r.ids {
				add(k, id, models.OutboundType(k, models.EventUpdated), models.OriginBackfill)
			}
		}
	}
	add(models.KindPlan, billingPayer, models.TypePlanChanged, models.OriginBackfill)
	check("backfill")
	e.mustBackfill(t)
	check("a second backfill")

	// Webhooks are down while these change in Clerk.
	for _, k := range models.Kinds {
		r := rows[k]
		if r.none != "" {
			continue
		}
		r.newer()
		add(k, r.updated, models.OutboundType(k, models.EventUpdated), models.OriginReconcile)
		if r.deleted != "" {
			e.clerk.Remove(r.deleted)
			add(k, r.deleted, models.OutboundType(k, models.EventDeleted), models.OriginReconcile)
		}
	}
	add(models.KindMembership, memberID(1), models.OutboundType(models.KindMembership, models.EventDeleted), models.OriginCascade)
	add(models.KindInvitation, invitationID(1), models.OutboundType(models.KindInvitation, models.EventDeleted), models.OriginCascade)
	add(models.KindPlan, billingPayer, models.TypePlanChanged, models.OriginReconcile)
	e.mustReconcile(t)
	check("reconcile")
	e.mustReconcile(t)
	check("a second reconcile")
	e.mustBackfill(t)
	check("a backfill after the reconcile")
}

// TestReplayCommand_EveryKindsChangeReachesTheEndpointsFromReplay: the
// events of every kind that failed to apply, applied by `usersync
// replay`, reach the endpoint once each, from "replay", and the payer's
// plan with them; a second replay finds nothing to do and sends nothing.
func TestReplayCommand_EveryKindsChangeReachesTheEndpointsFromReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newBackfillEnv(t, nil)
	app := newAppEndpoint(t)
	now := time.Now().UTC()
	if err := e.store.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: "ep_app", URL: app.url, Enabled: true, Secret: app.secret,
		CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	const subscriptionID, attemptID = "csub_recbilling000", "pa_recbilling000"
	// Each kind's webhook, and the object it creates.
	rows := map[models.Kind]struct {
		typ, id string
		data    any
	}{
		models.KindUser:         {models.TypeUserCreated, userID(0), json.RawMessage(clerkUser(t, 0, updatedAt(0)))},
		models.KindOrganization: {models.TypeOrganizationCreated, orgID(0), clerkOrgData(0, orgUpdatedAt(0))},
		models.KindMembership:   {models.TypeMembershipCreated, memberID(0), clerkMemberData(0, 0, 0, memberUpdatedAt(0))},
		models.KindInvitation: {models.TypeInvitationCreated, invitationID(0),
			clerkInvitationData(0, 0, models.InvitationPending, invitationUpdatedAt(0))},
		models.KindSubscription: {"subscription.created", subscriptionID, map[string]any{
			"object": "commerce_subscription", "id": subscriptionID, "status": "active", "payer": teamActive()["payer"],
			"items": []any{}, "created_at": baseUpdatedAt, "updated_at": teamStartedAt}},
		models.KindSubscriptionItem: {"subscriptionItem.active", teamItemID, teamActive()},
		models.KindPaymentAttempt: {"paymentAttempt.created", attemptID, map[string]any{
			"id": attemptID, "payment_id": "cpa_recbilling000", "status": "paid", "payer": map[string]any{"user_id": billingPayer},
			"subscription_items": []any{map[string]any{"id": teamItemID}}, "updated_at": teamStartedAt + 10}},
	}
	refused := sync.New(e.store.Events(), refusing(e.store), nil)
	want := map[string][]string{}
	for _, k := range models.Kinds {
		r, ok := rows[k]
		if !ok {
			t.Errorf("kind %s has no row: the test must cover every kind", k)
			continue
		}
		body := webhook(t, r.typ, teamStartedAt, r.data)
		ev, err := models.DecodeEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := refused.Ingest(ctx, sync.Delivery{EventID: "msg_replay_" + string(k), Signature: "v1,test", Body: body, Event: ev}); err == nil ||
			res.Status != models.StatusFailed {
			t.Fatalf("%s: %+v, %v; want failed", k, res, err)
		}
		typ := models.OutboundType(k, models.EventTypeOf(r.typ))
		if models.EventTypeOf(r.typ) != models.EventCreated {
			typ = models.OutboundType(k, models.EventUpdated)
		}
		want[models.OutboundName(k)+"/"+r.id] = []string{typ + " from " + models.OriginReplay}
	}
	want["plan/"+billingPayer] = []string{models.TypePlanChanged + " from " + models.OriginReplay}
	drain := e.dispatcher(t)
	for _, when := range []string{"replay", "a second replay"} {
		e.mustCommand(t, "replay")
		drain()
		if got := app.messages(); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("after %s: received %q, want %q", when, got, want)
		}
	}
}
