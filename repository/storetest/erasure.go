package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about erasure: the events of a deleted user or membership
// lose their bodies once due, late and pending ones included, and no other
// event does.

// eraseSetup makes user_er deleted with two processed events.
func eraseSetup(t *testing.T, s repository.Store, user string) []string {
	ctx := context.Background()
	var ids []string
	for i, ch := range []models.UserChange{change(user, "msg_er1"+user, time.Second, user+"@example.com"), deletion(user, "msg_er2"+user, 2*time.Second)} {
		ev := record(t, s, newEvent(ch.EventID, user, `{"email":"`+user+`@example.com"}`))
		o := apply(t, s, ch)
		if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func testErasure(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ids := eraseSetup(t, s, "user_er")
	apply(t, s, change("user_active", "msg_act", time.Second, ""))
	if _, err := s.EraseUser(ctx, "user_active", t0); !errors.Is(err, models.ErrConflict) {
		t.Errorf("EraseUser of an active user: %v, want ErrConflict", err)
	}
	if _, err := s.EraseUser(ctx, "user_unknown", t0); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("EraseUser of an unknown user: %v, want ErrNotFound", err)
	}
	// Not due yet: deleted after the cutoff.
	if res, err := s.EraseDeletedBefore(ctx, t0, t0); err != nil || res.Events != 0 {
		t.Errorf("erasure before the cutoff = %+v, %v; want nothing erased", res, err)
	}
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Users != 1 || res.Events != 2 || res.Pending != 0 {
		t.Errorf("erasure = %+v, %v; want 1 user, 2 events", res, err)
	}
	for _, id := range ids {
		if ev := getEvent(t, s, id); len(ev.RawBody) != 0 || ev.ErasedAt == nil {
			t.Errorf("event %s after erasure: body %q, erasedAt %v", id, ev.RawBody, ev.ErasedAt)
		}
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour)); err != nil || res != (models.Erasure{}) {
		t.Errorf("a second pass = %+v, %v; want nothing to do", res, err)
	}
}

func testEraseLateEvent(t *testing.T, s repository.Store) {
	ctx := context.Background()
	eraseSetup(t, s, "user_late")
	if res, err := s.EraseUser(ctx, "user_late", t0); err != nil || res.Users != 1 {
		t.Fatalf("EraseUser = %+v, %v", res, err)
	}
	late := change("user_late", "msg_late", time.Hour, "user_late@example.com")
	ev := record(t, s, newEvent(late.EventID, "user_late", `{"email":"user_late@example.com"}`))
	o := apply(t, s, late)
	if o != models.OutcomeDeleted {
		t.Fatalf("late event outcome %q, want deleted", o)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0); err != nil {
		t.Fatal(err)
	}
	if got := getEvent(t, s, ev.ID); len(got.RawBody) != 0 || got.ErasedAt == nil {
		t.Errorf("an event of an erased user kept its body: %q", got.RawBody)
	}
}

func testErasePending(t *testing.T, s repository.Store) {
	ctx := context.Background()
	eraseSetup(t, s, "user_pend")
	retry := t0.Add(time.Hour)
	pending := record(t, s, newEvent("msg_pending", "user_pend", `{"email":"p@example.com"}`))
	if err := s.Events().MarkFailed(ctx, pending.ID, "boom", &retry); err != nil {
		t.Fatal(err)
	}
	res, err := s.EraseUser(ctx, "user_pend", t0)
	if err != nil || res.Pending != 1 || res.Events != 2 || res.Users != 0 {
		t.Fatalf("EraseUser with a pending event = %+v, %v", res, err)
	}
	if err := s.Events().MarkProcessed(ctx, pending.ID, models.OutcomeDeleted, t0); err != nil {
		t.Fatal(err)
	}
	res, err = s.EraseDeletedBefore(ctx, t0, t0)
	if err != nil || res.Events != 1 || res.Users != 1 {
		t.Errorf("the next pass = %+v, %v; want the pending event erased", res, err)
	}
	if got := getEvent(t, s, pending.ID); len(got.RawBody) != 0 {
		t.Errorf("pending event kept its body: %q", got.RawBody)
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
