package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the event log by kind of object and by object, the
// stats per kind, and the erasure of a deleted membership's member data.

// kindEvent is a stored event of kind k changing object (a user id for a
// user event, an organization or membership id else), of user userID.
func kindEvent(eventID string, k models.Kind, et models.EventType, object, userID string, at time.Duration) models.Event {
	typ := models.TypesOf(k)[slices.Index([]models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}, et)]
	ev := models.Event{EventID: eventID, Type: typ, EventType: et, UserID: userID, ObjectID: object,
		RawBody: []byte(`{"public_user_data":{"first_name":"Ada"}}`), Source: models.SourceClerk,
		ReceivedAt: t0.Add(at), Status: models.StatusStored}
	if k == models.KindUser {
		ev.ObjectID = ""
	}
	return ev
}

func testEventLogByKindAndObject(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ets := []models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}
	var all []models.Event
	for i := range 18 {
		k := models.Kinds[i%3]
		object := fmt.Sprintf("%s_%d", map[models.Kind]string{models.KindUser: "user", models.KindOrganization: "org", models.KindMembership: "orgmem"}[k], i%2)
		user := "user_k"
		if k == models.KindOrganization {
			user = ""
		}
		ev := record(t, s, kindEvent(fmt.Sprintf("msg_k%02d", i), k, ets[(i/3)%3], object, user, time.Duration(i/2)*time.Second))
		if i%5 == 0 {
			if err := s.Events().MarkFailed(ctx, ev.ID, "boom", nil); err != nil {
				t.Fatal(err)
			}
			ev.Status = models.StatusFailed
		}
		all = append(all, ev)
	}
	for _, f := range []models.EventFilter{
		{Kind: models.KindMembership},
		{Kind: models.KindUser, EventType: models.EventUpdated},
		{EventType: models.EventDeleted},
		{Status: models.StatusFailed, Kind: models.KindOrganization},
		{Status: models.StatusStored, EventType: models.EventCreated},
		{Status: models.StatusStored, Kind: models.KindMembership, EventType: models.EventUpdated},
		{ObjectID: "orgmem_1"},
		{ObjectID: "org_0", Status: models.StatusStored},
		{UserID: "user_k", Kind: models.KindMembership},
		{Kind: models.KindOrganization, Since: t0.Add(2 * time.Second), Until: t0.Add(7 * time.Second)},
	} {
		want := selected(all, f)
		if len(want) == 0 {
			t.Fatalf("filter %+v selects nothing: the test is wrong", f)
		}
		if got := logIDs(t, s, f); !inLogOrder(all, got, want) {
			t.Errorf("List(%+v) = %v, want %v (newest first, every page full)", f, got, want)
		}
	}
}

func testStatsPerKind(t *testing.T, s repository.Store) {
	ctx := context.Background()
	retry := t0.Add(time.Hour)
	for i, c := range []struct {
		k     models.Kind
		retry *time.Time // failed with a retry; nil with fail: given up
		fail  bool
	}{
		{k: models.KindUser},
		{k: models.KindUser, fail: true, retry: &retry},
		{k: models.KindOrganization, fail: true},
		{k: models.KindMembership},
		{k: models.KindMembership},
		{k: models.KindMembership, fail: true},
		{k: models.KindMembership, fail: true, retry: &retry},
	} {
		ev := record(t, s, kindEvent(fmt.Sprintf("msg_sk%d", i), c.k, models.EventUpdated, "org_sk", "user_sk", time.Duration(i)*time.Second))
		if c.fail {
			if err := s.Events().MarkFailed(ctx, ev.ID, "boom", c.retry); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := record(t, s, kindEvent("msg_sk_done", models.KindMembership, models.EventUpdated, "orgmem_sk", "user_sk", 0))
	if err := s.Events().MarkProcessed(ctx, done.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[models.Kind]models.KindStats{
		models.KindUser:         {Stored: 1, Failed: 1, GaveUp: 0},
		models.KindOrganization: {Stored: 0, Failed: 1, GaveUp: 1},
		models.KindMembership:   {Stored: 2, Failed: 2, GaveUp: 1},
	}
	if len(st.ByKind) != len(want) {
		t.Errorf("ByKind = %+v, want every kind: %+v", st.ByKind, want)
	}
	for k, w := range want {
		if st.ByKind[k] != w {
			t.Errorf("ByKind[%s] = %+v, want %+v", k, st.ByKind[k], w)
		}
	}
	if st.ByStatus[models.StatusStored] != 3 || st.ByStatus[models.StatusFailed] != 4 || st.GaveUp != 2 ||
		st.ByStatus[models.StatusProcessed] != 1 {
		t.Errorf("totals = %+v (gave up %d), want 3 stored, 4 failed (2 given up), 1 processed", st.ByStatus, st.GaveUp)
	}
}

// memberEvents records and processes the events of membership memID of
// userID in orgID: its creation and an update, with the member's public
// data in their bodies. It returns their ids.
func memberEvents(t *testing.T, s repository.Store, memID, orgID, userID string) []string {
	t.Helper()
	var ids []string
	for i, ch := range []models.MembershipChange{
		withOrg(memberChange(memID, orgID, userID, "msg_me1"+memID, time.Second, "admin"), orgChange(orgID, "", time.Second, "Acme")),
		memberChange(memID, orgID, userID, "msg_me2"+memID, 2*time.Second, "member"),
	} {
		et := []models.EventType{models.EventCreated, models.EventUpdated}[i]
		ev := record(t, s, kindEvent(ch.EventID, models.KindMembership, et, memID, userID, time.Duration(i)*time.Second))
		o := applyMember(t, s, ch)
		if err := s.Events().MarkProcessed(context.Background(), ev.ID, o, t0); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

// deleteMember records and applies the deletion of membership memID.
func deleteMember(t *testing.T, s repository.Store, memID, orgID, userID string, at time.Duration) string {
	t.Helper()
	ch := memberDeletion(memID, orgID, userID, "msg_md"+memID, at)
	ev := record(t, s, kindEvent(ch.EventID, models.KindMembership, models.EventDeleted, memID, userID, at))
	o := applyMember(t, s, ch)
	if err := s.Events().MarkProcessed(context.Background(), ev.ID, o, t0); err != nil {
		t.Fatal(err)
	}
	return ev.ID
}

func erased(t *testing.T, s repository.Store, ids ...string) (gone, kept []string) {
	t.Helper()
	for _, id := range ids {
		if ev := getEvent(t, s, id); len(ev.RawBody) == 0 && ev.ErasedAt != nil {
			gone = append(gone, id)
		} else {
			kept = append(kept, id)
		}
	}
	return gone, kept
}

func testEraseDeletedMembership(t *testing.T, s repository.Store) {
	ctx := context.Background()
	apply(t, s, change("user_stay", "msg_stay", time.Second, "stay@example.com"))
	userEv := record(t, s, newEvent("msg_stay", "user_stay", `{"email":"stay@example.com"}`))
	left := memberEvents(t, s, "orgmem_left", "org_e", "user_stay")
	stays := memberEvents(t, s, "orgmem_stays", "org_f", "user_stay")
	left = append(left, deleteMember(t, s, "orgmem_left", "org_e", "user_stay", 3*time.Second))

	if res, err := s.EraseDeletedBefore(ctx, t0.Add(3*time.Second-time.Millisecond), t0); err != nil || res != (models.Erasure{}) {
		t.Errorf("erasure before the deletion is due = %+v, %v; want nothing", res, err)
	}
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Memberships != 1 || res.Users != 0 || res.Events != 3 || res.Pending != 0 {
		t.Errorf("erasure = %+v, %v; want 1 membership, its 3 events", res, err)
	}
	if _, kept := erased(t, s, left...); len(kept) > 0 {
		t.Errorf("events %v of the deleted membership kept their bodies", kept)
	}
	if gone, _ := erased(t, s, append(stays, userEv.ID)...); len(gone) > 0 {
		t.Errorf("events %v of an active membership or of the active user were erased", gone)
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour)); err != nil || res != (models.Erasure{}) {
		t.Errorf("a second pass = %+v, %v; want nothing to do", res, err)
	}

	// A late state of the erased membership is erased when it is marked.
	late := memberChange("orgmem_left", "org_e", "user_stay", "msg_late_left", 2500*time.Millisecond, "admin")
	ev := record(t, s, kindEvent(late.EventID, models.KindMembership, models.EventUpdated, "orgmem_left", "user_stay", time.Hour))
	o := applyMember(t, s, late)
	if o != models.OutcomeDeleted {
		t.Fatalf("late state of a deleted membership: outcome %q, want deleted", o)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, kept := erased(t, s, ev.ID); len(kept) > 0 {
		t.Errorf("a late event of an erased membership kept its body")
	}
}

func testEraseMembershipsOfCascades(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, u := range []string{"user_c1", "user_c2"} {
		apply(t, s, change(u, "msg_"+u, time.Second, u+"@example.com"))
	}
	// The organization's deletion takes orgmem_c1 with it; a newer
	// membership of the same pair takes the pair from orgmem_c2.
	ofOrg := memberEvents(t, s, "orgmem_c1", "org_gone", "user_c1")
	applyOrg(t, s, orgDeletion("org_gone", "msg_org_gone", 3*time.Second))
	ofPair := memberEvents(t, s, "orgmem_c2", "org_kept", "user_c2")
	newer := memberChange("orgmem_c3", "org_kept", "user_c2", "msg_c3", 4*time.Second, "admin")
	applyMember(t, s, newer)
	if m := getMember(t, s, "orgmem_c2"); m.DeletedAt == nil {
		t.Fatalf("orgmem_c2 is active: %+v", m)
	}
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Memberships != 2 || res.Events != 4 {
		t.Errorf("erasure = %+v, %v; want 2 memberships, 4 events", res, err)
	}
	if _, kept := erased(t, s, append(ofOrg, ofPair...)...); len(kept) > 0 {
		t.Errorf("events %v of memberships deleted by a cascade kept their bodies", kept)
	}
}
