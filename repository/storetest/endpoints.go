package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises of the endpoints' writes: none undoes another (an admin's
// change and the sender's record of the endpoint's health race on every
// instance), a deleted endpoint stays deleted and gets no delivery, and at
// most models.MaxEndpoints are created through the API however many
// creates race.

// testEndpointWritesNeverUndoEachOther races the sender's record of a
// flapping endpoint's health (failing, answering, again and again)
// against each admin's change, 100 rounds: none is resurrected, enabled
// again, or left with a secret or URL an admin replaced.
func testEndpointWritesNeverUndoEachOther(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	ops := []string{"delete", "disable", "rotate", "edit"}
	for round := range 100 {
		id, op := fmt.Sprintf("ep_race%03d", round), ops[round%len(ops)]
		if err := o.CreateEndpoint(ctx, models.Endpoint{ID: id, URL: "https://example.com/old", Enabled: true,
			Secret: "whsec_old", CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		var done atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the sender, until the admin is done and a few times more
			defer wg.Done()
			for i := 0; !done.Load() || i < 6; i++ {
				var err error
				if i%2 == 0 {
					err = o.EndpointFailing(ctx, id, t0.Add(time.Duration(i)*time.Second))
				} else {
					err = o.EndpointAnswered(ctx, id)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
		var err error
		switch op {
		case "delete":
			err = o.DeleteEndpoint(ctx, id)
		default:
			_, err = repository.ChangeEndpoint(ctx, o, id, func(e *models.Endpoint) error {
				switch op {
				case "disable":
					e.Enabled = false
				case "rotate":
					e.PreviousSecret, e.Secret = e.Secret, "whsec_new"
				case "edit":
					e.URL, e.Description = "https://example.com/new", "edited"
				}
				return nil
			})
		}
		done.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d, %s: %v", round, op, err)
		}
		e, err := o.Endpoint(ctx, id)
		switch {
		case op == "delete":
			if !errors.Is(err, models.ErrNotFound) {
				t.Fatalf("round %d: a deleted endpoint came back: %+v, %v", round, e, err)
			}
			continue
		case err != nil:
			t.Fatal(err)
		case op == "disable" && e.Enabled:
			t.Fatalf("round %d: a disabled endpoint is enabled again", round)
		case op == "rotate" && (e.Secret != "whsec_new" || e.PreviousSecret != "whsec_old"):
			t.Fatalf("round %d: rotated secrets = %q, %q; want the new one and the old", round, e.Secret, e.PreviousSecret)
		case op == "edit" && (e.URL != "https://example.com/new" || e.Description != "edited"):
			t.Fatalf("round %d: edited endpoint = %+v", round, e)
		}
		if err := o.DeleteEndpoint(ctx, id); err != nil { // within the limit of endpoints
			t.Fatal(err)
		}
	}
}

// testEndpointHealthWritesChangeOnlyTheHealth: failing and answering set
// and clear when the endpoint fails, once; a disable for failing too long
// needs it to be failing since before the bound (an admin who enabled it
// again cleared that); none writes an endpoint that is gone.
func testEndpointHealthWritesChangeOnlyTheHealth(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_h")
	read := func() models.Endpoint {
		t.Helper()
		e, err := o.Endpoint(ctx, "ep_h")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	at := t0.Add(time.Hour)
	for _, when := range []time.Time{at, at.Add(time.Minute)} {
		if err := o.EndpointFailing(ctx, "ep_h", when); err != nil {
			t.Fatal(err)
		}
	}
	if e := read(); e.FailingSince == nil || !e.FailingSince.Equal(at) || !e.Enabled || e.URL != "https://example.com/ep_h" {
		t.Fatalf("after two failures = %+v; want failing since the first, the rest as it was", e)
	}
	// An admin's change leaves the health as it is.
	if _, err := repository.ChangeEndpoint(ctx, o, "ep_h", func(e *models.Endpoint) error {
		e.FailingSince, e.Description = nil, "changed"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e := read(); e.FailingSince == nil || e.Description != "changed" {
		t.Fatalf("after an admin's change = %+v; want its description, and failing still", e)
	}
	if ok, err := o.DisableEndpoint(ctx, "ep_h", models.DisabledFailing, at.Add(-time.Second), at); ok || err != nil {
		t.Errorf("disabled one failing for less than the bound: %v, %v", ok, err)
	}
	if ok, err := o.DisableEndpoint(ctx, "ep_h", models.DisabledFailing, at, at); !ok || err != nil {
		t.Errorf("not disabled after failing for the bound: %v, %v", ok, err)
	}
	if e := read(); e.Enabled || e.Disabled != models.DisabledFailing {
		t.Errorf("disabled endpoint = %+v", e)
	}
	if err := o.EndpointAnswered(ctx, "ep_h"); err != nil { // as an admin enables it again
		t.Fatal(err)
	}
	if _, err := repository.ChangeEndpoint(ctx, o, "ep_h", func(e *models.Endpoint) error {
		e.Enabled, e.Disabled = true, ""
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := o.DisableEndpoint(ctx, "ep_h", models.DisabledFailing, at.Add(time.Hour), at); ok {
		t.Error("an endpoint an admin enabled again (failing no more) was disabled for failing")
	}
	if err := o.EndpointFailing(ctx, "ep_h", at); err != nil {
		t.Fatal(err)
	}
	if err := o.EndpointAnswered(ctx, "ep_h"); err != nil {
		t.Fatal(err)
	}
	if e := read(); e.FailingSince != nil || !e.Enabled {
		t.Errorf("after an answer = %+v, want failing no more", e)
	}
	if ok, err := o.DisableEndpoint(ctx, "ep_h", models.DisabledGone, time.Time{}, at); !ok || err != nil {
		t.Errorf("a 410's disable = %v, %v", ok, err)
	}
	if err := o.DeleteEndpoint(ctx, "ep_h"); err != nil {
		t.Fatal(err)
	}
	if err := o.EndpointFailing(ctx, "ep_h", at); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.DisableEndpoint(ctx, "ep_h", models.DisabledGone, time.Time{}, at); ok || err != nil {
		t.Errorf("disabling a deleted endpoint = %v, %v", ok, err)
	}
	if _, err := o.Endpoint(ctx, "ep_h"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("the health of a deleted endpoint brought it back: %v", err)
	}
}

// testEndpointsAtMostMaxHoweverManyCreatesRace: 64 creates at once from
// the API store models.MaxEndpoints and refuse the rest; an endpoint from
// the configuration is stored past the limit, and counts.
func testEndpointsAtMostMaxHoweverManyCreatesRace(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := o.CreateEndpoint(ctx, models.Endpoint{ID: fmt.Sprintf("ep_lim%02d", i), URL: "https://example.com",
				Enabled: true, Secret: "whsec_a", CreatedAt: t0, UpdatedAt: t0})
			var pe *models.PublicError
			switch {
			case err == nil:
				created.Add(1)
			case !errors.Is(err, models.ErrConflict) || !errors.As(err, &pe):
				t.Errorf("create %d = %v, want it stored or refused for the limit", i, err)
			}
		}()
	}
	wg.Wait()
	eps, err := o.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != models.MaxEndpoints || created.Load() != models.MaxEndpoints {
		t.Fatalf("%d endpoints stored, %d creates answered; want %d", len(eps), created.Load(), models.MaxEndpoints)
	}
	if err := o.CreateEndpoint(ctx, models.Endpoint{ID: "cfg_over", URL: "https://example.com", FromConfig: true,
		Secret: "whsec_a", CreatedAt: t0, UpdatedAt: t0}); err != nil {
		t.Fatalf("an endpoint of the configuration past the limit = %v, want it stored", err)
	}
	for _, id := range []string{eps[0].ID, eps[1].ID} {
		if err := o.DeleteEndpoint(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []bool{true, false} { // 48 and the configuration's: one more
		err := o.CreateEndpoint(ctx, models.Endpoint{ID: fmt.Sprintf("ep_again%d", i), URL: "https://example.com",
			Enabled: true, Secret: "whsec_a", CreatedAt: t0, UpdatedAt: t0})
		if (err == nil) != want {
			t.Errorf("create %d after two deletes = %v, want stored %t", i, err, want)
		}
	}
}

// testFanoutWritesNoDeliveryForAGoneEndpoint: a fan-out that read an
// endpoint before it was deleted writes no delivery for it, and none for
// an endpoint that never was.
func testFanoutWritesNoDeliveryForAGoneEndpoint(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_fg", "ep_fg_stays")
	first := pendingUser("user_fg", "msg_fg_1", time.Second, models.EventCreated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: first, Endpoints: []string{"ep_fg", "ep_fg_never"}}}, nil, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delivery(ctx, "ep_fg_never", models.KindUser, "user_fg"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a delivery for an endpoint that never was: %v", err)
	}
	if err := o.DeleteEndpoint(ctx, "ep_fg"); err != nil {
		t.Fatal(err)
	}
	newer := pendingUser("user_fg", "msg_fg_2", 2*time.Second, models.EventUpdated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: newer, Endpoints: []string{"ep_fg", "ep_fg_stays"}}}, nil, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delivery(ctx, "ep_fg", models.KindUser, "user_fg"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a fan-out wrote a delivery for a deleted endpoint: %v", err)
	}
	if ds := due(t, s, t0.Add(time.Minute), "ep_fg", "ep_fg_stays"); len(ds) != 1 || ds[0].EndpointID != "ep_fg_stays" {
		t.Errorf("due = %+v, want the other endpoint's only", ds)
	}
}

// testOutboundErasureKeepsTheDeletionNotices: erasing a deleted user
// keeps the deliveries that tell an endpoint of its deletion (pending,
// delivered or failed: a replay sends it again), without the
// fingerprints of the states it was told before, and deletes the others
// of the user; another user's stay.
func testOutboundErasureKeepsTheDeletionNotices(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	now := time.Now().UTC()
	endpoints(t, s, "ep_oe_down", "ep_oe_late", "ep_oe_told")
	for _, ch := range []models.UserChange{change("user_oe", "msg_oe_1", time.Second, "oe@example.com"), deletion("user_oe", "msg_oe_2", 2*time.Second)} {
		if _, err := s.Deliver(ctx, eventOf(ch, models.EventUpdated), ch, now); err != nil {
			t.Fatal(err)
		}
	}
	created := pendingUser("user_oe", "msg_oe_1", time.Second, models.EventCreated)
	deleted := pendingUser("user_oe", "msg_oe_2", 2*time.Second, models.EventDeleted)
	fanout := func(p models.Pending, eps ...string) {
		t.Helper()
		if err := o.Fanout(ctx, []models.Fanout{{Pending: p, Endpoints: eps}}, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	delivered := func(ep string) {
		t.Helper()
		d, err := o.Delivery(ctx, ep, models.KindUser, "user_oe")
		if err != nil {
			t.Fatal(err)
		}
		r := d
		r.Status, r.Fields, r.DeliveredAt, r.DeliveredMsg = models.DeliveryDelivered, map[string]string{"email": "a1b2"}, &now, d.MessageID
		if err := o.Settle(ctx, models.Settlement{Sent: d, Result: r, Attempt: models.Attempt{}}); err != nil {
			t.Fatal(err)
		}
	}
	// Every endpoint received the creation, with the email; ep_oe_down
	// was down when the deletion came, ep_oe_late has not had it fanned
	// out yet, ep_oe_told received it.
	fanout(created, "ep_oe_down", "ep_oe_late", "ep_oe_told")
	for _, ep := range []string{"ep_oe_down", "ep_oe_late", "ep_oe_told"} {
		delivered(ep)
	}
	fanout(deleted, "ep_oe_down", "ep_oe_told")
	delivered("ep_oe_told")
	fanout(pendingUser("user_keep", "msg_keep", time.Second, models.EventCreated), "ep_oe_down")

	if _, err := s.EraseUser(ctx, "user_oe", now); err != nil {
		t.Fatal(err)
	}
	for ep, status := range map[string]string{"ep_oe_down": models.DeliveryPending, "ep_oe_told": models.DeliveryDelivered} {
		d, err := o.Delivery(ctx, ep, models.KindUser, "user_oe")
		if err != nil || d.Status != status || d.Change != models.EventDeleted || d.Fields != nil {
			t.Errorf("%s's deletion after the erasure = %+v, %v; want it %s, without fingerprints", ep, d, err, status)
		}
	}
	if _, err := o.Delivery(ctx, "ep_oe_late", models.KindUser, "user_oe"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a delivery of the erased user's earlier state stays: %v", err)
	}
	if _, err := o.Delivery(ctx, "ep_oe_down", models.KindUser, "user_keep"); err != nil {
		t.Errorf("another user's delivery went: %v", err)
	}
	if ds := due(t, s, now.Add(time.Minute), "ep_oe_down"); len(ds) != 2 {
		t.Errorf("due to the endpoint that was down = %+v; want the deletion and the other user", ds)
	}
}

// testEndpointResyncProgressIsTheNewestResyncs: a resync's progress is
// recorded while it is the endpoint's, never over a newer one; the one
// done clears NeedsResync, which only a disabled endpoint takes; an
// admin's change leaves both.
func testEndpointResyncProgressIsTheNewestResyncs(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_rs")
	read := func() models.Endpoint {
		t.Helper()
		e, err := o.Endpoint(ctx, "ep_rs")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if err := o.MarkNeedsResync(ctx, "ep_rs"); err != nil {
		t.Fatal(err)
	}
	if read().NeedsResync {
		t.Error("an enabled endpoint was marked as needing a resync")
	}
	if _, err := repository.ChangeEndpoint(ctx, o, "ep_rs", func(e *models.Endpoint) error { e.Enabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := o.MarkNeedsResync(ctx, "ep_rs"); err != nil {
		t.Fatal(err)
	}
	if e := read(); !e.NeedsResync || e.Resync != nil {
		t.Fatalf("endpoint = %+v, want it needing a resync, never resynced", e)
	}
	first := models.Resync{StartedAt: t0, Kind: models.KindUser}
	second := models.Resync{StartedAt: t0.Add(time.Minute), Kind: models.KindUser, IncludeDeleted: true}
	for _, r := range []models.Resync{first, second} {
		if err := o.StartResync(ctx, "ep_rs", r); err != nil {
			t.Fatal(err)
		}
	}
	first.Kind, first.After, first.Queued = models.KindOrganization, "org_x", 10
	if ok, err := o.SaveResync(ctx, "ep_rs", first); ok || err != nil {
		t.Errorf("the progress of a resync replaced since = %v, %v; want it refused", ok, err)
	}
	second.Kind, second.After, second.Queued = models.KindMembership, "m_cursor", 7
	if ok, err := o.SaveResync(ctx, "ep_rs", second); !ok || err != nil {
		t.Fatalf("the progress of the endpoint's resync = %v, %v", ok, err)
	}
	if _, err := repository.ChangeEndpoint(ctx, o, "ep_rs", func(e *models.Endpoint) error { e.Description = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if e := read(); e.Resync == nil || *e.Resync != second || !e.NeedsResync {
		t.Fatalf("resync = %+v (needs %t); want %+v kept through an admin's change", e.Resync, e.NeedsResync, second)
	}
	done := t0.Add(time.Hour)
	second.Kind, second.After, second.DoneAt = "", "", &done
	if ok, err := o.SaveResync(ctx, "ep_rs", second); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if e := read(); e.NeedsResync || e.Resync.Running() || !e.Resync.DoneAt.Equal(done) {
		t.Errorf("after the resync = %+v; want it done and the endpoint needing none", e)
	}
	if err := o.StartResync(ctx, "ep_none", first); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a resync of no endpoint = %v, want not found", err)
	}
}

// testForcedFanoutSendsTheStateWhole: a resync's fan-out makes a
// delivery received pending again, its state sent whole with its
// webhook-id; a newer state is queued as any; a new object is queued; and
// the failed deliveries of an endpoint are requeued.
func testForcedFanoutSendsTheStateWhole(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_ff")
	now := t0.Add(time.Hour)
	first := pendingUser("user_ff", "msg_ff_1", time.Second, models.EventCreated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: first, Endpoints: []string{"ep_ff"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	d, err := o.Delivery(ctx, "ep_ff", models.KindUser, "user_ff")
	if err != nil {
		t.Fatal(err)
	}
	r := d
	r.Status, r.Fields, r.DeliveredAt, r.DeliveredMsg = models.DeliveryDelivered, map[string]string{"a": "1"}, &now, d.MessageID
	if err := o.Settle(ctx, models.Settlement{Sent: d, Result: r, Attempt: models.Attempt{}}); err != nil {
		t.Fatal(err)
	}
	same := first
	same.Origin, same.Change = models.OriginResync, models.EventUpdated
	if err := o.Fanout(ctx, []models.Fanout{{Pending: same, Endpoints: []string{"ep_ff"}, Forced: true}}, nil, now); err != nil {
		t.Fatal(err)
	}
	got, err := o.Delivery(ctx, "ep_ff", models.KindUser, "user_ff")
	if err != nil || got.Status != models.DeliveryPending || got.Fields != nil || got.MessageID != d.MessageID || got.Origin != models.OriginResync {
		t.Fatalf("after a forced fan-out of the state it has = %+v, %v; want it pending, whole, with its webhook-id", got, err)
	}
	other := pendingUser("user_ff2", "msg_ff_2", time.Second, models.EventUpdated)
	other.Origin = models.OriginResync
	if err := o.Fanout(ctx, []models.Fanout{{Pending: other, Endpoints: []string{"ep_ff"}, Forced: true}}, nil, now); err != nil {
		t.Fatal(err)
	}
	if len(due(t, s, now, "ep_ff")) != 2 {
		t.Error("a forced fan-out of an object the endpoint never had did not queue it")
	}
	for _, dl := range due(t, s, now, "ep_ff") {
		r := dl
		r.Status, r.Attempts = models.DeliveryFailed, 8
		if err := o.Settle(ctx, models.Settlement{Sent: dl, Result: r, Attempt: models.Attempt{}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := o.Requeue(ctx, models.Requeue{EndpointID: "ep_ff", Failed: true, Limit: 1}, now); n != 1 || err != nil {
		t.Errorf("requeue of the failed, one at most = %d, %v", n, err)
	}
	if n, err := o.Requeue(ctx, models.Requeue{EndpointID: "ep_ff", Failed: true, Limit: 10}, now); n != 1 || err != nil {
		t.Errorf("requeue of the failed left = %d, %v", n, err)
	}
	if len(due(t, s, now, "ep_ff")) != 2 {
		t.Error("the failed deliveries are not due again")
	}
}
