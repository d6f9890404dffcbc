package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises of outbound webhooks' storage: a change that applies is
// recorded with it (and nothing else is); the fan-out keeps, per endpoint
// and object, the newest change not yet received; a settle never loses a
// change queued meanwhile; endpoints, attempts, replays and backlogs
// round-trip; erasure takes a user's deliveries.

// outboxSince returns the entries of the outbox that before did not hold,
// in the store's order, which may not be the order they were recorded in
// (a DocumentDB engine's is not).
func outboxSince(t *testing.T, s repository.Store, before []models.Outboxed) []models.Outboxed {
	t.Helper()
	had := map[string]bool{}
	for _, e := range before {
		had[e.Key] = true
	}
	var out []models.Outboxed
	for _, e := range outboxOf(t, s) {
		if !had[e.Key] {
			out = append(out, e)
		}
	}
	return out
}

func outboxOf(t *testing.T, s repository.Store) []models.Outboxed {
	t.Helper()
	out, err := s.Outbound().Outbox(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testOutboundRecordsEachChangeThatApplied(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.Outbound().SetRecording(true)
	forEachKind(t, func(t *testing.T, k models.Kind, f kindFixture) {
		before := outboxOf(t, s)
		first, newer := "msg_ob_"+string(k), "msg_ob_newer_"+string(k)
		ev := eventOf(f.state(first, 2*time.Second), models.EventCreated)
		ev.Origin = models.OriginReplay
		if _, err := s.Deliver(ctx, ev, f.state(first, 2*time.Second), now); err != nil {
			t.Fatal(err)
		}
		// A duplicate and a stale state change nothing: nothing recorded.
		if _, err := s.Deliver(ctx, ev, f.state(first, 2*time.Second), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Deliver(ctx, eventOf(f.state("msg_ob_stale_"+string(k), time.Second), models.EventUpdated),
			f.state("msg_ob_stale_"+string(k), time.Second), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Deliver(ctx, eventOf(f.state(newer, 3*time.Second), models.EventUpdated), f.state(newer, 3*time.Second), now); err != nil {
			t.Fatal(err)
		}
		got := outboxSince(t, s, before)
		if len(got) == 2 && got[0].Version.EventID == newer { // in the order they were recorded
			got[0], got[1] = got[1], got[0]
		}
		if len(got) != 2 {
			t.Fatalf("outbox = %+v, want the two changes that applied", got)
		}
		want := models.PendingOf(ev, f.state(first, 2*time.Second), now)
		if want.Change != models.EventCreated || want.Origin != models.OriginReplay {
			t.Fatalf("PendingOf = %+v", want)
		}
		if !samePending(got[0].Pending, want) || got[1].Version.EventID != newer || got[1].Change != models.EventUpdated ||
			got[1].Origin != models.OriginWebhook {
			t.Errorf("outbox = %+v, want %+v then the newer update", got, want)
		}
	})
	s.Outbound().SetRecording(false)
	before := len(outboxOf(t, s))
	ch := change("user_ob_off", "msg_ob_off", time.Second, "")
	if _, err := s.Deliver(ctx, eventOf(ch, models.EventCreated), ch, now); err != nil {
		t.Fatal(err)
	}
	if n := len(outboxOf(t, s)); n != before {
		t.Errorf("with recording off, the outbox grew to %d entries", n)
	}
}

// testOutboundStaleEventThatNestsStatesIsRecordedForThem: a membership
// event older than the membership's copy changes nothing of it, but the
// organization state it nests may apply: the event is recorded with the
// change nested (the fan-out sends what of it applied); a stale event
// that nests nothing is not recorded.
func testOutboundStaleEventThatNests(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.Outbound().SetRecording(true)
	defer s.Outbound().SetRecording(false)
	deliver := func(ch models.MembershipChange, et models.EventType) models.Outcome {
		t.Helper()
		d, err := s.Deliver(ctx, eventOf(ch, et), ch, now)
		if err != nil {
			t.Fatal(err)
		}
		return d.Outcome
	}
	deliver(withOrg(memberChange("orgmem_obn", "org_obn", "user_obn", "msg_obn1", 5*time.Second, "member"), orgChange("org_obn", "", time.Second, "First")), models.EventCreated)
	before := outboxOf(t, s)
	stale := withOrg(memberChange("orgmem_obn", "org_obn", "user_obn", "msg_obn2", 2*time.Second, "admin"), orgChange("org_obn", "", 3*time.Second, "Newer"))
	if got := deliver(stale, models.EventUpdated); got != models.OutcomeStale {
		t.Fatalf("outcome = %q, want stale", got)
	}
	if got := deliver(memberChange("orgmem_obn", "org_obn", "user_obn", "msg_obn3", time.Second, "admin"), models.EventUpdated); got != models.OutcomeStale {
		t.Fatalf("outcome = %q, want stale", got)
	}
	got := outboxSince(t, s, before)
	if len(got) != 1 || got[0].Change != models.EventNested || got[0].Kind != models.KindMembership || got[0].Version.EventID != "msg_obn2" {
		t.Errorf("outbox = %+v, want the stale event that nests a state, as nested, and not the one that nests none", got)
	}
	if o := getOrg(t, s, "org_obn"); o.Name != "Newer" || o.LastEventID != "msg_obn2" {
		t.Errorf("organization = %+v, want the nested state applied", o)
	}
}

// testOutboundReapplyRecordsAgain: a change applied, then its mark lost
// (a crash), is recorded again by the Reapply that heals it.
func testOutboundReapplyRecordsAgain(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.Outbound().SetRecording(true)
	ch := change("user_ob_crash", "msg_ob_crash", time.Second, "")
	stored, _, err := s.Events().Record(ctx, eventOf(ch, models.EventCreated))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Users().Apply(ctx, ch, now); err != nil { // the crash: applied, not marked
		t.Fatal(err)
	}
	stored.Origin = models.OriginSweep
	if d, err := s.Reapply(ctx, stored, ch, now); err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("Reapply = %+v, %v", d, err)
	}
	got := outboxOf(t, s)
	if len(got) != 1 || got[0].ObjectID != "user_ob_crash" || got[0].Origin != models.OriginSweep {
		t.Errorf("outbox = %+v, want the change recorded by the sweep's re-apply", got)
	}
}

func samePending(a, b models.Pending) bool {
	return a.Kind == b.Kind && a.ObjectID == b.ObjectID && a.UserID == b.UserID && a.Version.EventID == b.Version.EventID &&
		a.Version.SourceTime.Equal(b.Version.SourceTime) && a.Version.Deleted == b.Version.Deleted &&
		a.Change == b.Change && a.Origin == b.Origin && a.At.Equal(b.At)
}

func pendingUser(userID, eventID string, at time.Duration, c models.EventType) models.Pending {
	return models.Pending{Kind: models.KindUser, ObjectID: userID, UserID: userID, Change: c, Origin: models.OriginWebhook,
		Version: models.Version{SourceTime: t0.Add(at), EventID: eventID, Deleted: c == models.EventDeleted}, At: t0.Add(at)}
}

// endpoints creates the endpoints ids (enabled, wanting every type): a
// fan-out writes deliveries for existing endpoints only.
func endpoints(t *testing.T, s repository.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		err := s.Outbound().CreateEndpoint(context.Background(), models.Endpoint{ID: id, URL: "https://example.com/" + id,
			Enabled: true, Secret: "whsec_a", CreatedAt: t0, UpdatedAt: t0})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// due returns the deliveries due by now of every endpoint of eps, by
// endpoint.
func due(t *testing.T, s repository.Store, now time.Time, eps ...string) []models.Delivery {
	t.Helper()
	var all []models.Delivery
	for _, ep := range eps {
		ds, err := s.Outbound().Due(context.Background(), ep, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ds...)
	}
	return all
}

func testOutboundFanoutKeepsTheNewestChange(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	now := t0.Add(time.Hour)
	s.Outbound().SetRecording(true)
	ch := change("user_fo_entry", "msg_fo_entry", time.Second, "")
	if _, err := s.Deliver(ctx, eventOf(ch, models.EventCreated), ch, now); err != nil {
		t.Fatal(err)
	}
	entries := outboxOf(t, s)
	endpoints(t, s, "ep_a", "ep_b")
	created := pendingUser("user_fo", "msg_fo_1", time.Second, models.EventCreated)
	fs := []models.Fanout{{Pending: created, Endpoints: []string{"ep_a", "ep_b"}}}
	for range 2 { // twice: the same
		if err := o.Fanout(ctx, fs, []string{entries[0].Key}, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := outboxOf(t, s); len(got) != 0 {
		t.Errorf("outbox after the fan-out = %+v, want it empty", got)
	}
	ds := due(t, s, now, "ep_a", "ep_b")
	if len(ds) != 2 || ds[0].MessageID != created.MessageID() || ds[0].Status != models.DeliveryPending ||
		ds[0].Change != models.EventCreated || !ds[0].NextAt.Equal(now) || !ds[0].Since.Equal(created.At) {
		t.Fatalf("due = %+v, want the creation pending for both endpoints", ds)
	}
	if len(due(t, s, now.Add(-time.Millisecond), "ep_a", "ep_b")) != 0 {
		t.Error("a delivery is due before its time")
	}
	// An update while the creation waits replaces it, and stays a
	// creation; a stale one and a duplicate change nothing.
	updated := pendingUser("user_fo", "msg_fo_2", 2*time.Second, models.EventUpdated)
	stale := pendingUser("user_fo", "msg_fo_0", 0, models.EventUpdated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: updated, Endpoints: []string{"ep_a"}},
		{Pending: stale, Endpoints: []string{"ep_a"}}, {Pending: updated, Endpoints: []string{"ep_a"}}}, nil, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	d, err := o.Delivery(ctx, "ep_a", models.KindUser, "user_fo")
	if err != nil || d.MessageID != updated.MessageID() || d.Change != models.EventCreated || !d.NextAt.Equal(now) ||
		d.Version.EventID != "msg_fo_2" {
		t.Errorf("delivery = %+v, %v; want the update in place of the creation, still a creation, due as before", d, err)
	}
	if _, err := o.Delivery(ctx, "ep_c", models.KindUser, "user_fo"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("an endpoint never queued has a delivery: %v", err)
	}
	// After a deletion, a late update of the object is never queued.
	deleted := pendingUser("user_fo", "msg_fo_del", 3*time.Second, models.EventDeleted)
	late := pendingUser("user_fo", "msg_fo_late", 4*time.Second, models.EventUpdated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: deleted, Endpoints: []string{"ep_b"}}, {Pending: late, Endpoints: []string{"ep_b"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	if d, err := o.Delivery(ctx, "ep_b", models.KindUser, "user_fo"); err != nil || d.MessageID != deleted.MessageID() || d.Change != models.EventDeleted {
		t.Errorf("delivery = %+v, %v; want the deletion, never the late update", d, err)
	}
}

func testOutboundSettleKeepsAChangeQueuedMeanwhile(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	now := t0.Add(time.Hour)
	endpoints(t, s, "ep_st")
	first := pendingUser("user_st", "msg_st_1", time.Second, models.EventCreated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: first, Endpoints: []string{"ep_st"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	sent := due(t, s, now, "ep_st")[0]
	delivered := func(d models.Delivery, at time.Time) models.Delivery {
		d.Status, d.Attempts, d.Fields = models.DeliveryDelivered, 0, map[string]string{"email": "h1"}
		d.Sent = json.RawMessage(`{"plan":{"slug":"pro"}}`)
		d.LastStatus, d.LastAt, d.DeliveredAt, d.DeliveredMsg = 204, &at, &at, d.MessageID
		return d
	}
	attempt := models.Attempt{EndpointID: "ep_st", MessageID: sent.MessageID, Type: "user.created", ObjectID: "user_st",
		At: now, Status: 204, Latency: 12 * time.Millisecond, Delivered: true}
	// While it was being sent, a newer change was queued.
	second := pendingUser("user_st", "msg_st_2", 2*time.Second, models.EventUpdated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: second, Endpoints: []string{"ep_st"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Second)
	if err := o.Settle(ctx, models.Settlement{Sent: sent, Result: delivered(sent, at), Attempt: attempt}); err != nil {
		t.Fatal(err)
	}
	d, err := o.Delivery(ctx, "ep_st", models.KindUser, "user_st")
	if err != nil || d.Status != models.DeliveryPending || d.MessageID != second.MessageID() || d.DeliveredMsg != first.MessageID() ||
		!reflect.DeepEqual(d.Fields, map[string]string{"email": "h1"}) || !d.NextAt.Equal(at) || string(d.Sent) != `{"plan":{"slug":"pro"}}` {
		t.Fatalf("delivery = %+v, %v; want the newer change pending, due now, the first one received", d, err)
	}
	// Sent and received: delivered.
	if err := o.Settle(ctx, models.Settlement{Sent: d, Result: delivered(d, at), Attempt: attempt}); err != nil {
		t.Fatal(err)
	}
	if d, err := o.Delivery(ctx, "ep_st", models.KindUser, "user_st"); err != nil || d.Status != models.DeliveryDelivered ||
		d.DeliveredMsg != second.MessageID() {
		t.Errorf("delivery = %+v, %v; want it delivered", d, err)
	}
	if len(due(t, s, at.Add(time.Hour), "ep_st")) != 0 {
		t.Error("a delivered delivery is still due")
	}
	// A delivery settled after its endpoint was deleted records the
	// attempt only.
	if err := o.Settle(ctx, models.Settlement{Sent: models.Delivery{EndpointID: "ep_gone", Kind: models.KindUser, ObjectID: "user_st"}, Result: d, Attempt: attempt}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Delivery(ctx, "ep_gone", models.KindUser, "user_st"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a settle revived a delivery: %v", err)
	}
	// A settle of a delivery that sent nothing (a state already received)
	// records no attempt.
	if err := o.Settle(ctx, models.Settlement{Sent: d, Result: d, Attempt: models.Attempt{}}); err != nil {
		t.Fatal(err)
	}
	as, _, err := o.Attempts(ctx, models.AttemptFilter{EndpointID: "ep_st", Limit: 10})
	if err != nil || len(as) != 3 || as[0].Status != 204 || as[0].Latency != 12*time.Millisecond || !as[0].Delivered {
		t.Errorf("attempts = %+v, %v; want the three recorded", as, err)
	}
}

// testOutboundBatchOfSettles: one Settle of a batch settles each delivery
// as a Settle of it alone would: one still waiting for the message sent
// becomes its result, one with a newer change queued meanwhile keeps it
// pending with what was received, one gone (its endpoint deleted) stays
// gone; the attempts of those sent are all recorded.
func testOutboundBatchOfSettles(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	now := t0.Add(2 * time.Hour)
	endpoints(t, s, "ep_bs")
	var sent []models.Delivery
	for _, id := range []string{"user_bs1", "user_bs2"} {
		p := pendingUser(id, "msg_"+id, time.Second, models.EventCreated)
		if err := o.Fanout(ctx, []models.Fanout{{Pending: p, Endpoints: []string{"ep_bs"}}}, nil, now); err != nil {
			t.Fatal(err)
		}
		d, err := o.Delivery(ctx, "ep_bs", models.KindUser, id)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, d)
	}
	newer := pendingUser("user_bs2", "msg_user_bs2_newer", 2*time.Second, models.EventUpdated)
	if err := o.Fanout(ctx, []models.Fanout{{Pending: newer, Endpoints: []string{"ep_bs"}}}, nil, now); err != nil {
		t.Fatal(err)
	}
	at := now.Add(time.Second)
	var batch []models.Settlement
	for _, d := range append(sent, models.Delivery{EndpointID: "ep_bs_gone", Kind: models.KindUser, ObjectID: "user_bs1", MessageID: "msg_x"}) {
		r := d
		r.Status, r.Attempts, r.Fields = models.DeliveryDelivered, 1, map[string]string{"email": "h_" + d.ObjectID}
		r.LastStatus, r.LastAt, r.DeliveredAt, r.DeliveredMsg = 204, &at, &at, d.MessageID
		batch = append(batch, models.Settlement{Sent: d, Result: r, Attempt: models.Attempt{EndpointID: "ep_bs", MessageID: d.MessageID,
			Type: "user.created", ObjectID: d.ObjectID, At: at, Status: 204, Delivered: true}})
	}
	if err := o.Settle(ctx, batch...); err != nil {
		t.Fatal(err)
	}
	if d, err := o.Delivery(ctx, "ep_bs", models.KindUser, "user_bs1"); err != nil || d.Status != models.DeliveryDelivered ||
		d.DeliveredMsg != sent[0].MessageID || d.Fields["email"] != "h_user_bs1" {
		t.Errorf("the first delivery = %+v, %v; want it delivered", d, err)
	}
	if d, err := o.Delivery(ctx, "ep_bs", models.KindUser, "user_bs2"); err != nil || d.Status != models.DeliveryPending ||
		d.MessageID != newer.MessageID() || d.DeliveredMsg != sent[1].MessageID || d.Fields["email"] != "h_user_bs2" {
		t.Errorf("the second delivery = %+v, %v; want the newer change pending, the first one received", d, err)
	}
	if _, err := o.Delivery(ctx, "ep_bs_gone", models.KindUser, "user_bs1"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a settle revived a delivery of an endpoint gone: %v", err)
	}
	if as, _, err := o.Attempts(ctx, models.AttemptFilter{EndpointID: "ep_bs", Limit: 10}); err != nil || len(as) != 3 {
		t.Errorf("attempts = %+v, %v; want the three recorded", as, err)
	}
}

func testOutboundEndpointsRoundTrip(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	until := t0.Add(24 * time.Hour)
	e := models.Endpoint{ID: "ep_rt", URL: "https://example.com/hook", Description: "CRM", EventTypes: []string{"user.*", "organization.created"},
		Enabled: true, Secret: "whsec_a", PreviousSecret: "whsec_b", PreviousUntil: &until, CreatedAt: t0, UpdatedAt: t0}
	cfg := models.Endpoint{ID: "cfg_x", URL: "http://example.com/x", FromConfig: true, Secret: "whsec_c", CreatedAt: t0, UpdatedAt: t0,
		FailingSince: &until, Disabled: models.DisabledFailing, LegacyURL: true}
	for _, ep := range []models.Endpoint{e, cfg} {
		if err := o.CreateEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.CreateEndpoint(ctx, e); !errors.Is(err, models.ErrConflict) {
		t.Errorf("creating it again = %v, want a conflict", err)
	}
	got, err := o.Endpoints(ctx)
	cfg.EventTypes = []string{}
	e.Revision, cfg.Revision = 1, 1
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], cfg) || !reflect.DeepEqual(got[1], e) {
		t.Fatalf("endpoints = %+v, %v; want both as written, by id", got, err)
	}
	e.Enabled, e.URL, e.PreviousSecret, e.PreviousUntil, e.LegacyURL = false, "https://example.com/other", "", nil, true
	if err := o.UpdateEndpoint(ctx, e); err != nil {
		t.Fatal(err)
	}
	e.Revision = 2
	if got, err := o.Endpoint(ctx, "ep_rt"); err != nil || !reflect.DeepEqual(got, e) {
		t.Errorf("endpoint = %+v, %v; want it changed, at revision 2", got, err)
	}
	if err := o.UpdateEndpoint(ctx, models.Endpoint{ID: "ep_rt", Revision: 1}); !errors.Is(err, models.ErrEndpointChanged) {
		t.Errorf("a write over revision 1 = %v, want the endpoint changed", err)
	}
	if err := o.UpdateEndpoint(ctx, models.Endpoint{ID: "ep_none", Revision: 1}); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a write of no endpoint = %v, want not found", err)
	}
	if err := o.Fanout(ctx, []models.Fanout{{Pending: pendingUser("user_ep", "msg_ep", 0, models.EventCreated),
		Endpoints: []string{"ep_rt", "cfg_x"}}}, nil, t0); err != nil {
		t.Fatal(err)
	}
	if err := o.DeleteEndpoint(ctx, "ep_rt"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Endpoint(ctx, "ep_rt"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("a deleted endpoint reads: %v", err)
	}
	if err := o.DeleteEndpoint(ctx, "ep_rt"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("deleting it again = %v, want not found", err)
	}
	if ds := due(t, s, t0, "ep_rt", "cfg_x"); len(ds) != 1 || ds[0].EndpointID != "cfg_x" {
		t.Errorf("due = %+v, want the deleted endpoint's delivery gone", ds)
	}
}

func testOutboundAttemptsPageAndAge(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_at")
	if err := o.Fanout(ctx, []models.Fanout{{Pending: pendingUser("user_at", "msg_at", 0, models.EventCreated),
		Endpoints: []string{"ep_at"}}}, nil, t0); err != nil {
		t.Fatal(err)
	}
	d := due(t, s, t0, "ep_at")[0]
	for i := range 5 {
		a := models.Attempt{EndpointID: "ep_at", MessageID: d.MessageID, Type: "user.created", ObjectID: "user_at",
			At: t0.Add(time.Duration(i) * time.Hour), Status: 500, Error: "status 500", Delivered: i == 4}
		if i == 4 {
			a.Status, a.Error = 200, ""
		}
		if err := o.Settle(ctx, models.Settlement{Sent: d, Result: d, Attempt: a}); err != nil {
			t.Fatal(err)
		}
	}
	var all []models.Attempt
	for after := ""; ; {
		page, next, err := o.Attempts(ctx, models.AttemptFilter{EndpointID: "ep_at", After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if after = next; next == "" {
			break
		}
	}
	if len(all) != 5 || !all[0].Delivered || !all[0].At.Equal(t0.Add(4*time.Hour)) || !all[4].At.Equal(t0) {
		t.Fatalf("attempts = %+v, want five, newest first", all)
	}
	if failed, _, err := o.Attempts(ctx, models.AttemptFilter{Failed: true, Limit: 10}); err != nil || len(failed) != 4 || failed[0].Delivered {
		t.Errorf("failed attempts = %+v, %v; want the four failures", failed, err)
	}
	if n, err := o.DeleteAttemptsBefore(ctx, t0.Add(2*time.Hour), 100); err != nil || n != 2 {
		t.Errorf("DeleteAttemptsBefore = %d, %v; want the two older attempts", n, err)
	}
	if _, _, err := o.Attempts(ctx, models.AttemptFilter{After: "not-a-cursor", Limit: 2}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a bad cursor = %v, want invalid", err)
	}
}

func testOutboundRequeueAndBacklog(t *testing.T, s repository.Store) {
	ctx := context.Background()
	o := s.Outbound()
	endpoints(t, s, "ep_rq")
	var fs []models.Fanout
	for _, id := range []string{"user_rq1", "user_rq2", "user_rq3"} {
		fs = append(fs, models.Fanout{Pending: pendingUser(id, "msg_"+id, 0, models.EventCreated), Endpoints: []string{"ep_rq"}})
	}
	if err := o.Fanout(ctx, fs, nil, t0); err != nil {
		t.Fatal(err)
	}
	b, err := o.Backlog(ctx)
	if err != nil || b["ep_rq"].Pending != 3 || b["ep_rq"].Oldest == nil || !b["ep_rq"].Oldest.Equal(t0) {
		t.Fatalf("backlog = %+v, %v; want 3 pending since t0", b, err)
	}
	if one, err := o.Backlog(ctx, "ep_rq"); err != nil || len(one) != 1 || one["ep_rq"].Pending != 3 {
		t.Errorf("the backlog of ep_rq alone = %+v, %v; want its 3 pending, and no other endpoint's", one, err)
	}
	// Two are delivered (at t0+1h and t0+2h), one fails for good.
	for i, d := range due(t, s, t0, "ep_rq") {
		at := t0.Add(time.Duration(i+1) * time.Hour)
		r := d
		r.Status, r.LastAt, r.DeliveredAt, r.DeliveredMsg, r.Fields = models.DeliveryDelivered, &at, &at, d.MessageID, map[string]string{"a": "1"}
		if i == 2 {
			r.Status, r.DeliveredAt, r.DeliveredMsg, r.Fields = models.DeliveryFailed, nil, "", nil
		}
		if err := o.Settle(ctx, models.Settlement{Sent: d, Result: r, Attempt: models.Attempt{EndpointID: "ep_rq", MessageID: d.MessageID, At: at}}); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := o.Backlog(ctx); err != nil || len(b) != 0 {
		t.Errorf("backlog = %+v, %v; want none", b, err)
	}
	for status, n := range map[string]int{models.DeliveryFailed: 1, models.DeliveryDelivered: 2, models.DeliveryPending: 0} {
		page, _, err := o.Deliveries(ctx, models.DeliveryFilter{EndpointID: "ep_rq", Status: status, Limit: 10})
		if err != nil || len(page) != n || n > 0 && page[0].Status != status {
			t.Errorf("deliveries of status %s = %+v, %v; want %d", status, page, err, n)
		}
	}
	// A window from t0+2h: the last two.
	n, err := o.Requeue(ctx, models.Requeue{EndpointID: "ep_rq", Since: t0.Add(2 * time.Hour), Limit: 100}, t0.Add(5*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Requeue(window) = %d, %v; want 2", n, err)
	}
	// One object: the first.
	if n, err := o.Requeue(ctx, models.Requeue{EndpointID: "ep_rq", Kind: models.KindUser, ObjectID: "user_rq1"}, t0.Add(5*time.Hour)); err != nil || n != 1 {
		t.Fatalf("Requeue(one) = %d, %v; want 1", n, err)
	}
	ds := due(t, s, t0.Add(5*time.Hour), "ep_rq")
	if len(ds) != 3 {
		t.Fatalf("due = %+v, want the three requeued", ds)
	}
	for _, d := range ds {
		if d.Fields != nil || d.Attempts != 0 {
			t.Errorf("requeued %+v, want it sent whole, its schedule from the start", d)
		}
	}
	if n, err := o.Requeue(ctx, models.Requeue{EndpointID: "ep_rq", Kind: models.KindUser, ObjectID: "user_rq1"}, t0.Add(6*time.Hour)); err != nil || n != 0 {
		t.Errorf("Requeue of a pending delivery = %d, %v; want nothing to do", n, err)
	}
}

// testOutboundReadsWithinLimit: the outbox gives each entry recorded
// once, up to its limit, and an endpoint's deliveries due likewise, in an
// order the store chooses (oldest first where it reads an index in order:
// a DocumentDB engine gives them as it stores them).
func testOutboundReadsWithinLimit(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.Outbound().SetRecording(true)
	before := outboxOf(t, s)
	recorded := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("user_of%d", (i*3)%5) // not in the order of the ids
		ch := change(id, "msg_"+id, time.Second, "")
		if _, err := s.Deliver(ctx, eventOf(ch, models.EventCreated), ch, now); err != nil {
			t.Fatal(err)
		}
		recorded[id] = true
	}
	s.Outbound().SetRecording(false)
	got := map[string]int{}
	for _, e := range outboxOf(t, s) {
		got[e.ObjectID]++
	}
	for id := range recorded {
		if got[id] != 1 {
			t.Errorf("outbox holds %s %d times, want once", id, got[id])
		}
	}
	if n := len(outboxOf(t, s)); n != len(before)+5 {
		t.Errorf("outbox = %d entries, want %d", n, len(before)+5)
	}
	if few, err := s.Outbound().Outbox(ctx, 2); err != nil || len(few) != 2 {
		t.Errorf("Outbox(2) = %d entries, %v; want 2", len(few), err)
	}

	endpoints(t, s, "ep_of")
	queued := map[string]bool{}
	for i := range 5 {
		id := fmt.Sprintf("user_ofd%d", (i*3)%5)
		f := models.Fanout{Pending: pendingUser(id, "msg_"+id, 0, models.EventCreated), Endpoints: []string{"ep_of"}}
		if err := s.Outbound().Fanout(ctx, []models.Fanout{f}, nil, t0.Add(time.Duration(4-i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		queued[id] = true
	}
	ds := due(t, s, t0.Add(time.Minute), "ep_of")
	seen := map[string]bool{}
	for _, d := range ds {
		if !queued[d.ObjectID] || seen[d.ObjectID] {
			t.Errorf("due gave %s, not queued or twice", d.ObjectID)
		}
		seen[d.ObjectID] = true
	}
	if len(seen) != 5 {
		t.Errorf("due = %d deliveries, want the 5 queued", len(seen))
	}
	if few, err := s.Outbound().Due(ctx, "ep_of", t0.Add(time.Minute), 2); err != nil || len(few) != 2 {
		t.Errorf("Due(2) = %d deliveries, %v; want 2", len(few), err)
	}
	if early := due(t, s, t0.Add(2*time.Second+time.Millisecond), "ep_of"); len(early) != 3 {
		t.Errorf("due at t0+2s = %d deliveries, want the 3 due by then", len(early))
	}
}

// testOutboundOldest: the outbox's oldest entry, which the metrics age,
// is the first recorded of those not fanned out yet, whatever order the
// store reads the outbox in; none when it is empty.
func testOutboundOldest(t *testing.T, s repository.Store) {
	ctx := context.Background()
	oldest := func() (time.Time, bool) {
		t.Helper()
		at, ok, err := s.Outbound().OutboxOldest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	if _, ok := oldest(); ok {
		t.Fatal("an empty outbox has an oldest entry")
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	s.Outbound().SetRecording(true)
	defer s.Outbound().SetRecording(false)
	for i := range 3 {
		id := fmt.Sprintf("user_old%d", i)
		ch := change(id, "msg_"+id, time.Second, "")
		if _, err := s.Deliver(ctx, eventOf(ch, models.EventCreated), ch, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if at, ok := oldest(); !ok || !at.Equal(now) {
		t.Errorf("oldest = %v, %v; want the first recorded, %v", at, ok, now)
	}
	for _, e := range outboxOf(t, s) {
		if e.ObjectID == "user_old0" {
			if err := s.Outbound().Fanout(ctx, nil, []string{e.Key}, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if at, ok := oldest(); !ok || !at.Equal(now.Add(time.Second)) {
		t.Errorf("oldest after the first was fanned out = %v, %v; want the second, %v", at, ok, now.Add(time.Second))
	}
}
