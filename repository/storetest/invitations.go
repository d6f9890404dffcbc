package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about organization invitations: Clerk's examples end in
// the newest state in every order of arrival, duplicates included; an
// organization's deletion deletes its invitations in every order of
// arrival; the list pages and filters by status as invitations read now
// (a pending one past its expiry is expired); ended invitations are
// erased on the schedule of deleted users.

// The ids of Clerk's examples (models/testdata): one invitation of one
// organization, accepted by one user, whose membership is the
// organizationMembership example.
const (
	exampleInvitation = "orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	exampleOrg        = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	exampleMembership = "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	exampleUser       = "user_2h8op3Isl1QR7tKu5FGNfaLKEoU"
)

// clerkExample decodes Clerk's example file of package models as the
// event eventID carries it, its ids (and its instance's) suffixed by
// suffix, so that each order of arrival has objects of its own.
func clerkExample(t testing.TB, file, eventID, suffix string) (models.Event, models.Change) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	body = bytes.ReplaceAll(body, []byte("2g7np7Hrk0SN6kj5EDMLDaKNL0S"), []byte("2g7np7Hrk0SN6kj5EDMLDaKNL0S"+suffix))
	body = bytes.ReplaceAll(body, []byte(exampleUser), []byte(exampleUser+suffix))
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ce.Decode(eventID, time.Now())
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	userID, objectID := ch.IDs()
	ts := ch.Version().SourceTime
	return models.Event{EventID: eventID, Type: ce.Type, EventType: ce.EventType(), UserID: userID, ObjectID: objectID,
		RawBody: body, Source: models.SourceClerk, SourceTimestamp: &ts, ReceivedAt: t0, Status: models.StatusStored}, ch
}

// example is one delivery of one of Clerk's examples.
type example struct{ file, eventID string }

// deliverExample delivers ex with suffix through Deliver and returns the
// outcome (none for a duplicate).
func deliverExample(t *testing.T, s repository.Store, ex example, suffix string) models.Delivered {
	t.Helper()
	ev, ch := clerkExample(t, ex.file, ex.eventID+suffix, suffix)
	d, err := s.Deliver(context.Background(), ev, ch, time.Now())
	if err != nil {
		t.Fatalf("Deliver %s (%s): %v", ev.EventID, ex.file, err)
	}
	return d
}

func getInvitation(t *testing.T, s repository.Store, id string) models.Invitation {
	t.Helper()
	i, err := s.Invitations().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get invitation %s: %v", id, err)
	}
	return i
}

// invitationChange is a state of invitation invID of orgID at t0+at.
func invitationChange(invID, orgID, eventID string, at time.Duration, status string, expires *time.Time) models.InvitationChange {
	ch := models.InvitationChange{InvitationID: invID, OrgID: orgID, EventID: eventID, SourceTime: t0.Add(at),
		EmailAddress: invID + "@invited.example.com", Role: "org:member", RoleName: "Member", Status: status,
		Metadata: json.RawMessage(`{"e":"` + eventID + `"}`), ExpiresAt: expires}
	if status == models.InvitationAccepted {
		ch.UserID = "user_" + invID
	}
	return ch
}

func applyInvitation(t *testing.T, s repository.Store, ch models.InvitationChange) models.Outcome {
	t.Helper()
	o, err := s.Invitations().Apply(context.Background(), ch, time.Now())
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", ch.InvitationID, ch.EventID, err)
	}
	return o
}

// invitations walks every page of f (by 2) and returns the invitations'
// ids.
func invitations(t *testing.T, s repository.Store, f models.InvitationFilter) []string {
	t.Helper()
	f.Limit = 2
	var out []string
	for range 100 {
		page, err := s.Invitations().List(context.Background(), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		if len(page.Invitations) > f.Limit {
			t.Fatalf("a page of %d invitations, limit %d", len(page.Invitations), f.Limit)
		}
		for _, i := range page.Invitations {
			out = append(out, i.InvitationID)
		}
		if page.NextCursor == "" {
			return out
		}
		f.After = page.NextCursor
	}
	t.Fatal("the pages do not end")
	return nil
}

func init() {
	kindFixtures[models.KindInvitation] = kindFixture{
		state: func(id string, at time.Duration) models.Change {
			return invitationChange("orginv_dl", "org_dli", id, at, models.InvitationPending, nil)
		},
		broken: func(id string, at time.Duration) models.Change {
			ch := invitationChange("orginv_dl", "org_dli", id, at, models.InvitationPending, nil)
			ch.Metadata = json.RawMessage(`[1]`)
			return ch
		},
		version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
			return models.VersionOf(s.Invitations().Get(ctx, "orginv_dl"))
		},
		apply: func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
			return s.Invitations().Apply(ctx, ch.(models.InvitationChange), time.Now())
		},
	}
}

// testInvitationExamplesEveryOrder delivers Clerk's examples of an
// invitation's life in every order of arrival, each twice (a duplicate
// delivery): created then accepted, with the accepting user's membership
// (its accepted may come before the membership), and created then
// revoked. Each ends in the newest state.
func testInvitationExamplesEveryOrder(t *testing.T, s repository.Store) {
	created := example{"openapi.organizationInvitation.created.json", "msg_inv_created"}
	accepted := example{"openapi.organizationInvitation.accepted.json", "msg_inv_accepted"}
	revoked := example{"openapi.organizationInvitation.revoked.json", "msg_inv_revoked"}
	member := example{"openapi.organizationMembership.created.json", "msg_inv_member"}
	for _, tc := range []struct {
		name       string
		examples   []example
		want       string
		wantEvent  string
		wantUserID string
	}{
		{"accepted", []example{created, accepted, member}, models.InvitationAccepted, accepted.eventID, exampleUser},
		{"revoked", []example{created, revoked}, models.InvitationRevoked, revoked.eventID, ""},
	} {
		for i, order := range permutations(tc.examples) {
			suffix := fmt.Sprintf("Z%s%d", tc.name[:1], i)
			for _, ex := range order {
				first := deliverExample(t, s, ex, suffix)
				if !first.Created || first.Event.Status != models.StatusProcessed {
					t.Fatalf("%s order %d: Deliver %s = %+v; want a new event, processed", tc.name, i, ex.eventID, first)
				}
				if dup := deliverExample(t, s, ex, suffix); dup.Created || dup.Outcome != "" || dup.Event.Outcome != first.Outcome {
					t.Errorf("%s order %d: a duplicate of %s = %+v; want it found with its first outcome, %q", tc.name, i, ex.eventID, dup, first.Outcome)
				}
			}
			inv := getInvitation(t, s, exampleInvitation+suffix)
			if inv.Status != tc.want || inv.LastEventID != tc.wantEvent+suffix || inv.Deleted() ||
				inv.OrgID != exampleOrg+suffix || inv.EmailAddress != "jane.doe@acme.com" || inv.Role != "org:member" {
				t.Errorf("%s order %d: invitation = %+v; want %s by %s", tc.name, i, inv, tc.want, tc.wantEvent+suffix)
			}
			if want := tc.wantUserID; (want == "" && inv.UserID != "") || (want != "" && inv.UserID != want+suffix) {
				t.Errorf("%s order %d: invitation's user = %q, want %q", tc.name, i, inv.UserID, want)
			}
			if inv.ExpiresAt == nil || !inv.ExpiresAt.Equal(time.UnixMilli(1717487999000)) {
				t.Errorf("%s order %d: ExpiresAt = %v, want Clerk's", tc.name, i, inv.ExpiresAt)
			}
			if tc.name == "accepted" {
				if m := getMember(t, s, exampleMembership+suffix); m.Deleted() || m.UserID != exampleUser+suffix {
					t.Errorf("%s order %d: the membership = %+v; want it active, the accepting user's", tc.name, i, m)
				}
			}
		}
	}
}

// testInvitationOrgCascade deletes an organization around its
// invitations' states in every order of arrival: its invitations end
// deleted, with no email, and a state that arrives after the deletion
// stays deleted (outcome deleted).
func testInvitationOrgCascade(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for i, order := range permutations([]string{"created", "accepted", "orgDeleted"}) {
		org, inv := fmt.Sprintf("org_ic%d", i), fmt.Sprintf("orginv_ic%d", i)
		applyOrg(t, s, orgChange(org, fmt.Sprintf("msg_ic_org%d", i), 0, "Invites"))
		deleted := false
		for _, step := range order {
			switch step {
			case "created":
				o := applyInvitation(t, s, invitationChange(inv, org, fmt.Sprintf("msg_ic_c%d", i), time.Second, models.InvitationPending, nil))
				if deleted && o != models.OutcomeDeleted {
					t.Errorf("order %v: a state after its organization's deletion = %q, want deleted", order, o)
				}
			case "accepted":
				o := applyInvitation(t, s, invitationChange(inv, org, fmt.Sprintf("msg_ic_a%d", i), 2*time.Second, models.InvitationAccepted, nil))
				if deleted && o != models.OutcomeDeleted {
					t.Errorf("order %v: a state after its organization's deletion = %q, want deleted", order, o)
				}
			case "orgDeleted":
				applyOrg(t, s, orgDeletion(org, fmt.Sprintf("msg_ic_d%d", i), time.Hour))
				deleted = true
			}
		}
		got := getInvitation(t, s, inv)
		if !got.Deleted() || !got.DeletedAt.Equal(t0.Add(time.Hour)) || got.EmailAddress != "" {
			t.Errorf("order %v: invitation = %+v; want deleted at its organization's deletion, without its email", order, got)
		}
		if live := invitations(t, s, models.InvitationFilter{OrgID: org, Now: t0}); len(live) != 0 {
			t.Errorf("order %v: the organization's invitations = %v, want none", order, live)
		}
		if all := invitations(t, s, models.InvitationFilter{OrgID: org, IncludeDeleted: true, Now: t0}); len(all) != 1 || all[0] != inv {
			t.Errorf("order %v: with the deleted ones = %v, want [%s]", order, all, inv)
		}
	}
	if _, err := s.Invitations().Get(ctx, "orginv_none"); err == nil {
		t.Error("Get of an unknown invitation found one")
	}
}

// testInvitationList lists an organization's invitations of each status,
// a page of 2 at a time: a pending one past its expiry is listed as
// expired, not pending.
func testInvitationList(t *testing.T, s repository.Store) {
	now := t0.Add(24 * time.Hour)
	later, earlier := now.Add(time.Hour), now.Add(-time.Hour)
	for _, ch := range []models.InvitationChange{
		invitationChange("orginv_l1", "org_l", "msg_l1", time.Second, models.InvitationPending, &later),
		invitationChange("orginv_l2", "org_l", "msg_l2", time.Second, models.InvitationPending, &earlier),
		invitationChange("orginv_l3", "org_l", "msg_l3", time.Second, models.InvitationAccepted, &later),
		invitationChange("orginv_l4", "org_l", "msg_l4", time.Second, models.InvitationRevoked, &later),
		invitationChange("orginv_l5", "org_l", "msg_l5", time.Second, models.InvitationPending, nil),
		invitationChange("orginv_l6", "org_l", "msg_l6", time.Second, models.InvitationPending, &later),
		invitationChange("orginv_x1", "org_other", "msg_x1", time.Second, models.InvitationPending, &later),
	} {
		applyInvitation(t, s, ch)
	}
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"", []string{"orginv_l1", "orginv_l2", "orginv_l3", "orginv_l4", "orginv_l5", "orginv_l6"}},
		{models.InvitationPending, []string{"orginv_l1", "orginv_l5", "orginv_l6"}},
		{models.InvitationExpired, []string{"orginv_l2"}},
		{models.InvitationAccepted, []string{"orginv_l3"}},
		{models.InvitationRevoked, []string{"orginv_l4"}},
	} {
		got := invitations(t, s, models.InvitationFilter{OrgID: "org_l", Status: tc.status, Now: now})
		if !eachOnce(got, tc.want) {
			t.Errorf("List(status %q) = %v, want %v", tc.status, got, tc.want)
		}
	}
	if got := getInvitation(t, s, "orginv_l2"); got.StatusAt(now) != models.InvitationExpired || got.Status != models.InvitationPending {
		t.Errorf("an invitation past its expiry reads %q (stored %q), want expired (stored pending)", got.StatusAt(now), got.Status)
	}
	if _, err := s.Invitations().List(context.Background(), models.InvitationFilter{OrgID: "org_l", After: "zz", Limit: 2}); err == nil {
		t.Error("List with a malformed cursor succeeded")
	}
	// The change feed gives each once, oldest change first.
	page, err := s.Invitations().Changes(context.Background(), models.ChangeFilter{Until: time.Now().Add(time.Hour), Limit: 100})
	if err != nil || len(page.Invitations) != 7 || page.NextCursor == "" {
		t.Errorf("Changes = %d invitations, cursor %q, %v; want 7 and a cursor", len(page.Invitations), page.NextCursor, err)
	}
}

// testEraseEndedInvitations erases, on the schedule of deleted users,
// what ended invitations hold of a person: the email and metadata of the
// accepted, revoked, expired and deleted ones, and their events' bodies,
// from when they ended (a pending one from its expiry); never a pending
// one's before it expires.
func testEraseEndedInvitations(t *testing.T, s repository.Store) {
	ctx := context.Background()
	expires, far := t0.Add(2*time.Hour), t0.Add(1000*time.Hour)
	deliver := func(ch models.InvitationChange) {
		t.Helper()
		ev := eventOf(ch, models.EventCreated)
		if _, err := s.Deliver(ctx, ev, ch, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	deliver(invitationChange("orginv_e1", "org_e", "msg_e1", time.Second, models.InvitationAccepted, &far))
	deliver(invitationChange("orginv_e2", "org_e", "msg_e2", time.Second, models.InvitationPending, &expires))
	deliver(invitationChange("orginv_e3", "org_e", "msg_e3", time.Second, models.InvitationPending, &far))
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Invitations != 1 || res.Events != 1 {
		t.Fatalf("EraseDeletedBefore(t0+1h) = %+v, %v; want the accepted invitation and its event erased", res, err)
	}
	if got := getInvitation(t, s, "orginv_e1"); got.EmailAddress != "" || string(got.Metadata) != "{}" || got.ErasedAt == nil ||
		got.Status != models.InvitationAccepted {
		t.Errorf("the erased invitation = %+v; want it accepted, without email or metadata, erased", got)
	}
	if ev := getEvent(t, s, "msg_e1"); len(ev.RawBody) != 0 || ev.ErasedAt == nil {
		t.Errorf("its event = body %q, erased %v; want it erased", ev.RawBody, ev.ErasedAt)
	}
	if got := getInvitation(t, s, "orginv_e2"); got.EmailAddress == "" || got.ErasedAt != nil {
		t.Errorf("a pending invitation before its expiry = %+v; want it kept", got)
	}
	// Past the expiry of the second: it ended then.
	res, err = s.EraseDeletedBefore(ctx, t0.Add(3*time.Hour), t0.Add(3*time.Hour))
	if err != nil || res.Invitations != 1 {
		t.Fatalf("EraseDeletedBefore(t0+3h) = %+v, %v; want the expired invitation erased", res, err)
	}
	if got := getInvitation(t, s, "orginv_e2"); got.EmailAddress != "" || got.ErasedAt == nil {
		t.Errorf("the expired invitation = %+v; want it erased", got)
	}
	if got := getInvitation(t, s, "orginv_e3"); got.EmailAddress == "" || got.ErasedAt != nil {
		t.Errorf("a pending invitation = %+v; want it kept", got)
	}
	// A late, stale state of an erased invitation is erased at once.
	deliver(invitationChange("orginv_e1", "org_e", "msg_e1_late", 0, models.InvitationPending, &far))
	if ev := getEvent(t, s, "msg_e1_late"); len(ev.RawBody) != 0 {
		t.Errorf("a late event of an erased invitation kept its body %q", ev.RawBody)
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(3*time.Hour), t0.Add(3*time.Hour)); err != nil || res != (models.Erasure{}) {
		t.Errorf("a second pass = %+v, %v; want nothing to do", res, err)
	}
	// A newer state of an erased invitation (revoked after it expired)
	// holds an email again: it is due from its own time.
	deliver(invitationChange("orginv_e2", "org_e", "msg_e2_revoked", 4*time.Hour, models.InvitationRevoked, &expires))
	if got := getInvitation(t, s, "orginv_e2"); got.EmailAddress == "" || got.ErasedAt != nil || got.Status != models.InvitationRevoked {
		t.Errorf("a revoked state after the erasure = %+v; want it revoked, with its email, not erased", got)
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(3*time.Hour), t0.Add(3*time.Hour)); err != nil || res.Invitations != 0 {
		t.Errorf("a pass before the revoke's time = %+v, %v; want nothing erased", res, err)
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(5*time.Hour), t0.Add(5*time.Hour)); err != nil || res.Invitations != 1 {
		t.Errorf("a pass after the revoke's time = %+v, %v; want it erased", res, err)
	}
	if got := getInvitation(t, s, "orginv_e2"); got.EmailAddress != "" || got.ErasedAt == nil {
		t.Errorf("the revoked invitation = %+v; want it erased", got)
	}
}
