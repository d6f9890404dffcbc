package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about memberships: Clerk's order in every order of arrival,
// the nested organization, the cascades of a deleted organization or user
// in every order of arrival, one active membership per (organization,
// user), the member shown from the user's current record, and the list.

// memberChange is a state of membership memID of userID in orgID, nesting
// no organization (see withOrg).
func memberChange(memID, orgID, userID, eventID string, at time.Duration, role string) models.MembershipChange {
	return models.MembershipChange{
		MembershipID: memID, OrgID: orgID, UserID: userID, EventID: eventID, SourceTime: t0.Add(at),
		Role: role, RoleName: strings.ToUpper(role), Permissions: []string{"org:" + role + ":read"},
		Metadata: json.RawMessage(`{"e":"` + eventID + `"}`),
		Member:   models.Member{FirstName: "Pub", LastName: eventID, Identifier: userID + "@public.example.com"},
	}
}

func memberDeletion(memID, orgID, userID, eventID string, at time.Duration) models.MembershipChange {
	return models.MembershipChange{MembershipID: memID, OrgID: orgID, UserID: userID, EventID: eventID,
		SourceTime: t0.Add(at), Deleted: true}
}

// withOrg nests the organization state o in ch, stamped with ch's event.
func withOrg(ch models.MembershipChange, o models.OrganizationChange) models.MembershipChange {
	o.EventID = ch.EventID
	ch.Organization = &o
	return ch
}

func applyMember(t *testing.T, s repository.Store, ch models.MembershipChange) models.Outcome {
	t.Helper()
	o, err := s.Memberships().Apply(context.Background(), ch, time.Now())
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", ch.MembershipID, ch.EventID, err)
	}
	return o
}

func getMember(t *testing.T, s repository.Store, memID string) models.Membership {
	t.Helper()
	m, err := s.Memberships().Get(context.Background(), memID)
	if err != nil {
		t.Fatalf("Get(%s): %v", memID, err)
	}
	return m
}

// memberships walks every page of f (by 2) and returns the memberships.
func memberships(t *testing.T, s repository.Store, f models.MembershipFilter) []models.Membership {
	t.Helper()
	f.Limit = 2
	var out []models.Membership
	for range 100 {
		page, err := s.Memberships().List(context.Background(), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		if len(page.Memberships) > f.Limit {
			t.Fatalf("a page of %d memberships, limit %d", len(page.Memberships), f.Limit)
		}
		if page.NextCursor != "" && len(page.Memberships) < f.Limit {
			t.Fatalf("a page of %d memberships with a next page, limit %d", len(page.Memberships), f.Limit)
		}
		out = append(out, page.Memberships...)
		if page.NextCursor == "" {
			return out
		}
		f.After = page.NextCursor
	}
	t.Fatal("the pages do not end")
	return nil
}

func ids(ms []models.Membership) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MembershipID)
	}
	return out
}

// activeOf returns the active memberships of an organization and those of
// a user, as an application reads them.
func activeOf(t *testing.T, s repository.Store, orgID, userID string) (ofOrg, ofUser []string) {
	t.Helper()
	return ids(memberships(t, s, models.MembershipFilter{OrgID: orgID})), ids(memberships(t, s, models.MembershipFilter{UserID: userID}))
}

// testMemberEveryOrder delivers a membership's created, updated and
// deleted in every order, each twice (a duplicate delivery).
func testMemberEveryOrder(t *testing.T, s repository.Store) {
	applyOrg(t, s, orgChange("org_m", "msg_o", 0, "Org"))
	created := memberChange("", "org_m", "", "msg_1", time.Second, "member")
	updated := memberChange("", "org_m", "", "msg_2", 2*time.Second, "admin")
	// A deletion carries the membership's last updated_at; the store sees
	// the deletion's time only.
	deleted := memberDeletion("", "org_m", "", "msg_3", 30*24*time.Hour)
	for i, order := range permutations([]models.MembershipChange{created, updated, deleted}) {
		id, user := fmt.Sprintf("orgmem_cud%d", i), fmt.Sprintf("user_cud%d", i)
		for _, ch := range order {
			ch.MembershipID, ch.UserID = id, user
			applyMember(t, s, ch)
			applyMember(t, s, ch)
		}
		if m := getMember(t, s, id); !m.Deleted() || m.LastEventID != "msg_3" || m.Role != "" || m.OrgID != "org_m" || m.UserID != user {
			t.Errorf("order %d ended in %+v, want the tombstone", i, m)
		}
	}
	for i, order := range permutations([]models.MembershipChange{created, updated}) {
		id, user := fmt.Sprintf("orgmem_cu%d", i), fmt.Sprintf("user_cu%d", i)
		for _, ch := range order {
			ch.MembershipID, ch.UserID = id, user
			applyMember(t, s, ch)
		}
		m := getMember(t, s, id)
		if m.Deleted() || m.LastEventID != "msg_2" || m.Role != "admin" || m.RoleName != "ADMIN" ||
			!slices.Equal(m.Permissions, []string{"org:admin:read"}) || string(m.Metadata) != `{"e":"msg_2"}` {
			t.Errorf("order %d ended in %+v, want the update", i, m)
		}
	}
	if _, err := s.Memberships().Get(context.Background(), "orgmem_none"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("Get of an unknown membership: %v, want ErrNotFound", err)
	}
}

// testNestedOrganization: a membership's nested organization is a state
// of the organization, applied under the same rule: it may create it,
// update it when newer, and changes nothing when older or deleted.
func testNestedOrganization(t *testing.T, s repository.Store) {
	first := withOrg(memberChange("orgmem_n1", "org_n", "user_n1", "msg_m1", time.Second, "member"), orgChange("org_n", "", time.Second, "Nested"))
	applyMember(t, s, first)
	if o := getOrg(t, s, "org_n"); o.Deleted() || o.Name != "Nested" || o.LastEventID != "msg_m1" {
		t.Fatalf("organization after a membership came first = %+v, want it made from the nested state", o)
	}
	// organization.created arrives late, older than the nested state.
	if got := applyOrg(t, s, orgChange("org_n", "msg_oc", 0, "Created")); got != models.OutcomeStale {
		t.Errorf("a late organization.created = %q, want stale", got)
	}
	// A newer organization.updated wins; an older nested state then loses.
	applyOrg(t, s, orgChange("org_n", "msg_ou", 5*time.Second, "Renamed"))
	older := withOrg(memberChange("orgmem_n2", "org_n", "user_n2", "msg_m2", 6*time.Second, "member"), orgChange("org_n", "", 2*time.Second, "Nested Again"))
	if got := applyMember(t, s, older); got != models.OutcomeApplied {
		t.Errorf("membership with an older nested organization = %q, want applied", got)
	}
	if o := getOrg(t, s, "org_n"); o.Name != "Renamed" {
		t.Errorf("an older nested state overwrote the organization: %+v", o)
	}
	newer := withOrg(memberChange("orgmem_n3", "org_n", "user_n3", "msg_m3", 7*time.Second, "member"), orgChange("org_n", "", 7*time.Second, "Nested Newest"))
	applyMember(t, s, newer)
	if o := getOrg(t, s, "org_n"); o.Name != "Nested Newest" || o.LastEventID != "msg_m3" {
		t.Errorf("a newer nested state did not update the organization: %+v", o)
	}
	// A nested state never revives a deleted organization.
	applyOrg(t, s, orgDeletion("org_n", "msg_od", 8*time.Second))
	late := withOrg(memberChange("orgmem_n4", "org_n", "user_n4", "msg_m4", 9*time.Second, "member"), orgChange("org_n", "", 9*time.Second, "Zombie"))
	if got := applyMember(t, s, late); got != models.OutcomeDeleted {
		t.Errorf("a membership of a deleted organization = %q, want deleted", got)
	}
	if o := getOrg(t, s, "org_n"); !o.Deleted() || o.Name != "" {
		t.Errorf("a nested state revived the organization: %+v", o)
	}
}

// testOrgCascade: an organization's deletion deletes its memberships, and
// a membership event that arrives after it, or before it, never leaves an
// active membership of a deleted organization: every order of
// organization.created, two memberships' states and organization.deleted.
func testOrgCascade(t *testing.T, s repository.Store) {
	type step struct {
		org *models.OrganizationChange
		mem *models.MembershipChange
	}
	oc, od := orgChange("", "msg_oc", time.Second, "Doomed"), orgDeletion("", "msg_od", 4*time.Second)
	m1 := withOrg(memberChange("", "", "", "msg_m1", 2*time.Second, "admin"), orgChange("", "", time.Second, "Doomed"))
	m1u := memberChange("", "", "", "msg_m1u", 5*time.Second, "member") // a state after the deletion (a delayed update)
	m2 := memberChange("", "", "", "msg_m2", 3*time.Second, "member")
	for i, order := range permutations([]step{{org: &oc}, {org: &od}, {mem: &m1}, {mem: &m1u}, {mem: &m2}}) {
		org := fmt.Sprintf("org_casc%d", i)
		for _, st := range order {
			if st.org != nil {
				ch := *st.org
				ch.OrgID = org
				applyOrg(t, s, ch)
				continue
			}
			ch := *st.mem
			ch.OrgID = org
			if ch.Organization != nil {
				nested := *ch.Organization
				nested.OrgID = org
				ch.Organization = &nested
			}
			ch.MembershipID, ch.UserID = "orgmem_1_"+org, "user_1_"+org
			if ch.EventID == "msg_m2" {
				ch.MembershipID, ch.UserID = "orgmem_2_"+org, "user_2_"+org
			}
			applyMember(t, s, ch)
			if o, err := s.Organizations().Get(context.Background(), org); err == nil && o.Deleted() {
				if ofOrg, ofUser := activeOf(t, s, org, ch.UserID); len(ofOrg)+len(ofUser) > 0 {
					t.Fatalf("order %d: after %s, active memberships of a deleted organization: %v %v", i, ch.EventID, ofOrg, ofUser)
				}
			}
		}
		for _, id := range []string{"orgmem_1_" + org, "orgmem_2_" + org} {
			if m := getMember(t, s, id); !m.Deleted() {
				t.Errorf("order %d: %s = %+v, want a tombstone", i, id, m)
			}
		}
		if o := getOrg(t, s, org); !o.Deleted() {
			t.Errorf("order %d: organization %+v, want a tombstone", i, o)
		}
	}
}

// testUserCascade: a user's deletion deletes the user's memberships, in
// every order of arrival with them.
func testUserCascade(t *testing.T, s repository.Store) {
	type step struct {
		user *models.UserChange
		mem  *models.MembershipChange
	}
	uc, ud := change("", "msg_uc", time.Second, ""), deletion("", "msg_ud", 4*time.Second)
	mc := memberChange("", "", "", "msg_mc", 2*time.Second, "admin")
	mu := memberChange("", "", "", "msg_mu", 5*time.Second, "member")
	for i, order := range permutations([]step{{user: &uc}, {user: &ud}, {mem: &mc}, {mem: &mu}}) {
		user, org := fmt.Sprintf("user_casc%d", i), fmt.Sprintf("org_ucasc%d", i)
		mem := "orgmem_" + user
		applyOrg(t, s, orgChange(org, "msg_o"+user, 0, "Org"))
		// Another organization's membership of the same user.
		applyMember(t, s, memberChange("orgmem_other_"+user, "org_other", user, "msg_other"+user, time.Second, "member"))
		for _, st := range order {
			if st.user != nil {
				ch := *st.user
				ch.UserID = user
				apply(t, s, ch)
			} else {
				ch := *st.mem
				ch.MembershipID, ch.OrgID, ch.UserID = mem, org, user
				applyMember(t, s, ch)
			}
			if u, err := s.Users().Get(context.Background(), user); err == nil && u.Deleted() {
				if ofOrg, ofUser := activeOf(t, s, org, user); len(ofOrg)+len(ofUser) > 0 {
					t.Fatalf("order %d: active memberships of a deleted user: %v %v", i, ofOrg, ofUser)
				}
			}
		}
		for _, id := range []string{mem, "orgmem_other_" + user} {
			if m := getMember(t, s, id); !m.Deleted() {
				t.Errorf("order %d: %s = %+v, want a tombstone", i, id, m)
			}
		}
	}
}

// testRejoin: a user who leaves and joins again has a new membership; the
// old one's deletion, however late, deletes only the old one, by id.
func testRejoin(t *testing.T, s repository.Store) {
	applyOrg(t, s, orgChange("org_r", "msg_o", 0, "Org"))
	a := memberChange("orgmem_a", "org_r", "user_r", "msg_a", time.Second, "member")
	aDel := memberDeletion("orgmem_a", "org_r", "user_r", "msg_adel", 2*time.Second)
	b := memberChange("orgmem_b", "org_r", "user_r", "msg_b", 3*time.Second, "admin")
	for i, order := range permutations([]models.MembershipChange{a, aDel, b}) {
		org := fmt.Sprintf("org_rj%d", i)
		applyOrg(t, s, orgChange(org, "msg_o"+org, 0, "Org"))
		for _, ch := range order {
			ch.OrgID, ch.MembershipID = org, ch.MembershipID+"_"+org
			applyMember(t, s, ch)
		}
		ofOrg, ofUser := activeOf(t, s, org, "user_r")
		if !slices.Equal(ofOrg, []string{"orgmem_b_" + org}) || !slices.Contains(ofUser, "orgmem_b_"+org) || slices.Contains(ofUser, "orgmem_a_"+org) {
			t.Errorf("order %d: active %v / %v, want the new membership alone", i, ofOrg, ofUser)
		}
		if m := getMember(t, s, "orgmem_a_"+org); !m.Deleted() {
			t.Errorf("order %d: the old membership = %+v, want a tombstone", i, m)
		}
	}
}

// testOnePerPair: when the old membership's deletion is lost, the newer
// membership of the pair takes over and the older one becomes a
// tombstone, in either order and when states race.
func testOnePerPair(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for i, order := range [][]string{{"old", "new"}, {"new", "old"}} {
		org := fmt.Sprintf("org_pair%d", i)
		applyOrg(t, s, orgChange(org, "msg_o"+org, 0, "Org"))
		states := map[string]models.MembershipChange{
			"old": memberChange("orgmem_old_"+org, org, "user_p", "msg_old", time.Second, "member"),
			"new": memberChange("orgmem_new_"+org, org, "user_p", "msg_new", 3*time.Second, "admin"),
		}
		want := map[string]models.Outcome{"old": models.OutcomeApplied, "new": models.OutcomeApplied}
		if order[0] == "new" {
			want["old"] = models.OutcomeDeleted // it was left before the new one was made
		}
		for _, k := range order {
			if got := applyMember(t, s, states[k]); got != want[k] {
				t.Errorf("%v: %s = %q, want %q", order, k, got, want[k])
			}
		}
		if ofOrg, _ := activeOf(t, s, org, "user_p"); !slices.Equal(ofOrg, []string{"orgmem_new_" + org}) {
			t.Errorf("%v: active = %v, want the newer membership alone", order, ofOrg)
		}
		// A later state of the older membership changes nothing.
		if got := applyMember(t, s, memberChange("orgmem_old_"+org, org, "user_p", "msg_old2", 2*time.Second, "owner")); got != models.OutcomeDeleted {
			t.Errorf("%v: a later state of the older membership = %q, want deleted", order, got)
		}
	}
	// Memberships of one pair applied at once: the newest is the one left.
	// A write answered "retry later" or "unavailable" (on a DocumentDB
	// engine, writers of one pair wait on each other's locks and
	// deadlocks: while other tests load the engine, an apply can run past
	// its deadline) is made again, as the next delivery or the sweep
	// would.
	applyOrg(t, s, orgChange("org_race", "msg_orace", 0, "Org"))
	const n = 4
	var wg stdsync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ch := memberChange(fmt.Sprintf("orgmem_race%d", i), "org_race", "user_race", fmt.Sprintf("msg_race%d", i), time.Duration(i+1)*time.Second, "member")
			for try := 1; ; try++ {
				_, err := s.Memberships().Apply(ctx, ch, time.Now())
				if err == nil {
					return
				}
				if try == 5 || !errors.Is(err, models.ErrRetryLater) && !errors.Is(err, models.ErrUnavailable) {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if ofOrg, _ := activeOf(t, s, "org_race", "user_race"); !slices.Equal(ofOrg, []string{fmt.Sprintf("orgmem_race%d", n-1)}) {
		t.Errorf("after a race, active = %v, want the newest alone", ofOrg)
	}
}

// testMemberFromUser: a membership shows its member from the user's
// current record when the store has the user, else from its
// public_user_data; a deprovisioned user's memberships are not active, a
// banned user's are, flagged.
func testMemberFromUser(t *testing.T, s repository.Store) {
	applyOrg(t, s, orgChange("org_u", "msg_o", 0, "Org"))
	applyMember(t, s, memberChange("orgmem_u", "org_u", "user_u", "msg_m", time.Second, "member"))
	m := getMember(t, s, "orgmem_u")
	if m.MemberFromUser || m.Member.FirstName != "Pub" || m.Member.Identifier != "user_u@public.example.com" {
		t.Errorf("member before the user is known = %+v, want public_user_data", m.Member)
	}
	u := change("user_u", "msg_u1", time.Second, "ann@example.com")
	u.Profile = models.Profile{FirstName: "Ann", LastName: "Lee", ImageURL: "https://img.example.com/ann", Username: "ann"}
	apply(t, s, u)
	want := models.Member{FirstName: "Ann", LastName: "Lee", ImageURL: "https://img.example.com/ann", Identifier: "ann@example.com", Username: "ann"}
	for _, got := range []models.Membership{getMember(t, s, "orgmem_u"), memberships(t, s, models.MembershipFilter{OrgID: "org_u"})[0],
		memberships(t, s, models.MembershipFilter{UserID: "user_u"})[0]} {
		if !got.MemberFromUser || got.Member != want {
			t.Errorf("member once the user is known = %+v, want %+v", got.Member, want)
		}
	}
	// A user.updated shows in every membership at once.
	u2 := change("user_u", "msg_u2", 2*time.Second, "ann@new.example.com")
	u2.Profile = models.Profile{FirstName: "Annie", LastName: "Lee", Banned: true}
	apply(t, s, u2)
	ofUser := memberships(t, s, models.MembershipFilter{UserID: "user_u"})
	if len(ofUser) != 1 || ofUser[0].Member.FirstName != "Annie" || ofUser[0].Member.Identifier != "ann@new.example.com" || !ofUser[0].Member.Banned {
		t.Errorf("after user.updated (banned) = %+v, want the new name, still active, flagged banned", ofUser)
	}
	if ofUser[0].Organization == nil || ofUser[0].Organization.Name != "Org" {
		t.Errorf("a user's membership shows organization %+v, want its summary", ofUser[0].Organization)
	}
	// Off-boarded by Directory Sync: no longer an active member; an admin
	// still sees the membership.
	u3 := change("user_u", "msg_u3", 3*time.Second, "ann@new.example.com")
	u3.Deprovisioned = true
	apply(t, s, u3)
	if ofOrg, ofUser := activeOf(t, s, "org_u", "user_u"); len(ofOrg)+len(ofUser) > 0 {
		t.Errorf("a deprovisioned user's memberships are active: %v %v", ofOrg, ofUser)
	}
	if all := memberships(t, s, models.MembershipFilter{OrgID: "org_u", IncludeDeleted: true}); len(all) != 1 || !all[0].Member.Deprovisioned {
		t.Errorf("with deleted: %+v, want the membership, flagged deprovisioned", all)
	}
	// When the store does not have the user, public_user_data says.
	pub := memberChange("orgmem_u2", "org_u", "user_unknown", "msg_m2", time.Second, "member")
	pub.Member.Deprovisioned = true
	applyMember(t, s, pub)
	if ofOrg, _ := activeOf(t, s, "org_u", ""); len(ofOrg) != 0 {
		t.Errorf("a membership whose public_user_data is deprovisioned is active: %v", ofOrg)
	}
}

func testMemberList(t *testing.T, s repository.Store) {
	ctx := context.Background()
	applyOrg(t, s, orgChange("org_l", "msg_o", 0, "Listed"))
	for _, m := range []struct {
		id, user      string
		deleted       bool // by its own deletion
		deprovisioned bool // its user is
	}{
		{id: "orgmem_l0", user: "user_l0"},
		{id: "orgmem_l1", user: "user_l1"},
		{id: "orgmem_l2", user: "user_l2", deleted: true},
		{id: "orgmem_l3", user: "user_l3"},
		// Deprovisioned users, one after the other: a page is still full.
		{id: "orgmem_l4", user: "user_l4", deprovisioned: true},
		{id: "orgmem_l5", user: "user_l5", deprovisioned: true},
		{id: "orgmem_l6", user: "user_l6"},
	} {
		applyMember(t, s, memberChange(m.id, "org_l", m.user, "msg_"+m.id, time.Second, "member"))
		if m.deleted {
			applyMember(t, s, memberDeletion(m.id, "org_l", m.user, "msg_del_"+m.id, 2*time.Second))
		}
		if m.deprovisioned {
			u := change(m.user, "msg_u"+m.id, time.Second, "")
			u.Deprovisioned = true
			apply(t, s, u)
		}
	}
	want := []string{"orgmem_l0", "orgmem_l1", "orgmem_l3", "orgmem_l6"}
	if got := ids(memberships(t, s, models.MembershipFilter{OrgID: "org_l"})); !eachOnce(got, want) {
		t.Errorf("active memberships = %v, want %v", got, want)
	}
	if all := memberships(t, s, models.MembershipFilter{OrgID: "org_l", IncludeDeleted: true}); len(all) != 7 {
		t.Errorf("with deleted = %v, want 7", ids(all))
	}
	// A user's memberships across organizations.
	applyOrg(t, s, orgChange("org_l2", "msg_o2", 0, "Second"))
	applyMember(t, s, memberChange("orgmem_l9", "org_l2", "user_l0", "msg_l9", time.Second, "admin"))
	applyMember(t, s, memberChange("orgmem_l8", "org_unknown", "user_l0", "msg_l8", time.Second, "admin"))
	got := memberships(t, s, models.MembershipFilter{UserID: "user_l0"})
	if !eachOnce(ids(got), []string{"orgmem_l0", "orgmem_l8", "orgmem_l9"}) {
		t.Errorf("user_l0's memberships = %v", ids(got))
	}
	for _, m := range got {
		if (m.OrgID == "org_unknown") != (m.Organization == nil) {
			t.Errorf("%s shows organization %+v", m.MembershipID, m.Organization)
		}
	}
	if _, err := s.Memberships().List(ctx, models.MembershipFilter{OrgID: "org_l", Limit: 2, After: "\x00nonsense"}); err != nil && !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a foreign cursor: %v, want ErrInvalid or a page", err)
	}
}
