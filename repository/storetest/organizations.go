package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about organizations: Clerk's order and the tombstones in
// every order of arrival, the list and its slug filter, and the change
// feeds and walks of organizations and memberships.

func orgChange(orgID, eventID string, at time.Duration, name string) models.OrganizationChange {
	count := int64(len(name))
	return models.OrganizationChange{
		OrgID: orgID, EventID: eventID, SourceTime: t0.Add(at), Metadata: json.RawMessage(`{"e":"` + eventID + `"}`),
		OrganizationProfile: models.OrganizationProfile{Name: name, Slug: strings.ToLower(name), MembersCount: &count},
	}
}

func orgDeletion(orgID, eventID string, at time.Duration) models.OrganizationChange {
	return models.OrganizationChange{OrgID: orgID, EventID: eventID, SourceTime: t0.Add(at), Deleted: true}
}

func applyOrg(t *testing.T, s repository.Store, ch models.OrganizationChange) models.Outcome {
	t.Helper()
	o, err := s.Organizations().Apply(context.Background(), ch, time.Now())
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", ch.OrgID, ch.EventID, err)
	}
	return o
}

func getOrg(t *testing.T, s repository.Store, orgID string) models.Organization {
	t.Helper()
	o, err := s.Organizations().Get(context.Background(), orgID)
	if err != nil {
		t.Fatalf("Get(%s): %v", orgID, err)
	}
	return o
}

func testOrgOrdering(t *testing.T, s repository.Store) {
	steps := []struct {
		ch   models.OrganizationChange
		want models.Outcome
	}{
		{orgChange("org_1", "msg_b", 2*time.Second, "Acme"), models.OutcomeApplied},
		{orgChange("org_1", "msg_b", 2*time.Second, "Acme"), models.OutcomeApplied}, // the same event again
		{orgChange("org_1", "msg_a", time.Second, "Old"), models.OutcomeStale},
		{orgChange("org_1", "msg_c", 2*time.Second, "Acme Tie"), models.OutcomeApplied}, // tie: larger event id wins
		{orgChange("org_1", "msg_a2", 2*time.Second, "Lost Tie"), models.OutcomeStale},
		{orgDeletion("org_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{orgDeletion("org_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{orgDeletion("org_1", "msg_d2", 4*time.Second), models.OutcomeDeleted},
		{orgChange("org_1", "msg_e", 9*time.Second, "Back"), models.OutcomeDeleted},
		{orgDeletion("org_2", "msg_f", time.Second), models.OutcomeApplied}, // never seen: a tombstone
		{orgChange("org_2", "msg_g", 9*time.Second, "Late"), models.OutcomeDeleted},
	}
	for i, st := range steps {
		if got := applyOrg(t, s, st.ch); got != st.want {
			t.Fatalf("step %d: Apply(%s %s) = %q, want %q", i, st.ch.OrgID, st.ch.EventID, got, st.want)
		}
	}
	o := getOrg(t, s, "org_1")
	if o.DeletedAt == nil || !o.DeletedAt.Equal(t0.Add(3*time.Second)) || o.OrganizationProfile != (models.OrganizationProfile{}) ||
		string(o.Metadata) != "{}" || o.LastEventID != "msg_d" {
		t.Errorf("deleted org_1 = %+v, want a tombstone deleted at Clerk's time", o)
	}
	if o2 := getOrg(t, s, "org_2"); !o2.Deleted() {
		t.Errorf("org_2 = %+v, want a tombstone", o2)
	}
	if _, err := s.Organizations().Get(context.Background(), "org_none"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("Get of an unknown organization: %v, want ErrNotFound", err)
	}
}

// testOrgEveryOrder delivers an organization's created, updated and
// deleted, and created and updated, in every order.
func testOrgEveryOrder(t *testing.T, s repository.Store) {
	created := orgChange("", "msg_1", time.Second, "First")
	updated := orgChange("", "msg_2", 2*time.Second, "Second")
	deleted := orgDeletion("", "msg_3", 3*time.Second)
	for i, order := range permutations([]models.OrganizationChange{created, updated, deleted}) {
		id := fmt.Sprintf("org_cud%d", i)
		for _, ch := range order {
			ch.OrgID = id
			applyOrg(t, s, ch)
		}
		if o := getOrg(t, s, id); !o.Deleted() || o.LastEventID != "msg_3" || o.Name != "" {
			t.Errorf("order %d ended in %+v, want the tombstone", i, o)
		}
	}
	for i, order := range permutations([]models.OrganizationChange{created, updated}) {
		id := fmt.Sprintf("org_cu%d", i)
		for _, ch := range order {
			ch.OrgID = id
			applyOrg(t, s, ch)
		}
		if o := getOrg(t, s, id); o.Deleted() || o.LastEventID != "msg_2" || o.Name != "Second" || o.Slug != "second" ||
			*o.MembersCount != 6 || string(o.Metadata) != `{"e":"msg_2"}` {
			t.Errorf("order %d ended in %+v, want the update", i, o)
		}
	}
}

func testOrgList(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, o := range []struct {
		id, name string // the slug is the name in lower case
		deleted  bool
	}{
		{"org_list0", "Nameorg_list0", false},
		{"org_list1", "Nameorg_list1", true},
		{"org_list2", "Nameorg_list2", false},
		{"org_list3", "Nameorg_list3", false},
		{"org_list4", "Shared", false},
		{"org_list5", "Nameorg_list5", false},
	} {
		applyOrg(t, s, orgChange(o.id, "msg_"+o.id, time.Second, o.name))
		if o.deleted {
			applyOrg(t, s, orgDeletion(o.id, "msg_del_"+o.id, 2*time.Second))
		}
	}
	want := []string{"org_list0", "org_list2", "org_list3", "org_list4", "org_list5"}
	walk := func(f models.OrganizationFilter) []string {
		f.Limit = 2
		var out []string
		for range 20 {
			page, err := s.Organizations().List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Organizations {
				out = append(out, o.OrgID)
			}
			if page.NextCursor == "" {
				return out
			}
			f.After = page.NextCursor
		}
		t.Fatal("the pages do not end")
		return nil
	}
	if got := walk(models.OrganizationFilter{}); !eachOnce(got, want) {
		t.Errorf("active organizations = %v, want %v", got, want)
	}
	if got := walk(models.OrganizationFilter{IncludeDeleted: true}); len(got) != 6 {
		t.Errorf("with deleted = %v, want 6", got)
	}
	if got := walk(models.OrganizationFilter{Slug: "shared"}); !slices.Equal(got, []string{"org_list4"}) {
		t.Errorf("by slug = %v, want org_list4", got)
	}
	if got := walk(models.OrganizationFilter{Slug: "nameorg_list1"}); len(got) != 0 {
		t.Errorf("a deleted organization's slug finds %v", got)
	}
}

// testOrgAndMemberChanges: the change feeds of organizations and
// memberships, oldest change first, tombstones included; a cascade moves
// the memberships it deletes.
func testOrgAndMemberChanges(t *testing.T, s repository.Store) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Millisecond)
	orgs, mems := s.Organizations(), s.Memberships()
	for i, id := range []string{"org_fa", "org_fb"} {
		if _, err := orgs.Apply(ctx, orgChange(id, "msg_"+id, time.Second, "F"), base.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mems.Apply(ctx, memberChange("orgmem_fa", "org_fa", "user_f", "msg_mfa", time.Second, "member"), base.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := orgs.Apply(ctx, orgDeletion("org_fa", "msg_dfa", time.Hour), base.Add(3*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	until := base.Add(time.Hour)
	op, err := orgs.Changes(ctx, models.ChangeFilter{Since: base, Until: until, Limit: 10})
	if err != nil || len(op.Organizations) != 2 || op.Organizations[0].OrgID != "org_fb" || !op.Organizations[1].Deleted() || op.NextCursor == "" {
		t.Errorf("organization feed = %+v, %v; want org_fb, then org_fa's tombstone", op, err)
	}
	if more, err := orgs.Changes(ctx, models.ChangeFilter{Since: base, Until: until, After: op.NextCursor, Limit: 10}); err != nil || len(more.Organizations) != 0 {
		t.Errorf("after the cursor = %+v, %v; want nothing", more, err)
	}
	mp, err := mems.Changes(ctx, models.ChangeFilter{Since: base.Add(3 * time.Millisecond), Until: until, Limit: 10})
	if err != nil || len(mp.Memberships) != 1 || !mp.Memberships[0].Deleted() || mp.NextCursor == "" {
		t.Errorf("membership feed since the cascade = %+v, %v; want the cascaded tombstone", mp, err)
	}
	if _, err := mems.Changes(ctx, models.ChangeFilter{Since: base, Until: until, After: "nonsense", Limit: 1}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

// testOrgAndMemberWalk: the walks of reconcile see every organization and
// membership that is not a tombstone and was first written before the cut,
// each once, whatever deleted the others (their own deletion, or their
// organization's), and stop at fn's first error.
func testOrgAndMemberWalk(t *testing.T, s repository.Store) {
	ctx := context.Background()
	written := time.Now().UTC().Truncate(time.Millisecond)
	apply := func(at time.Time, ch any) {
		t.Helper()
		var err error
		switch ch := ch.(type) {
		case models.OrganizationChange:
			_, err = s.Organizations().Apply(ctx, ch, at)
		case models.MembershipChange:
			_, err = s.Memberships().Apply(ctx, ch, at)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct {
		org, mem, user string    // an organization with one membership, of user
		at             time.Time // when both were first written
		deleted        string    // "organization" (its membership with it), "membership" (alone) or ""
	}{
		{"org_walk0", "orgmem_walk0", "user_walk0", written, ""},
		{"org_walk1", "orgmem_walk1", "user_walk1", written, ""},
		{"org_walk2", "orgmem_walk2", "user_walk2", written, "organization"},
		{"org_walk3", "orgmem_walk3", "user_walk3", written, "membership"},
		{"org_walk4", "orgmem_walk4", "user_walk4", written.Add(time.Minute), ""}, // after the cut
		{"org_walk5", "orgmem_walk5", "user_walk5", written, ""},
	} {
		apply(w.at, orgChange(w.org, "msg_o"+w.org, time.Second, "Walk"))
		apply(w.at, memberChange(w.mem, w.org, w.user, "msg_m"+w.mem, time.Second, "member"))
		switch w.deleted {
		case "organization":
			apply(w.at, orgDeletion(w.org, "msg_d"+w.org, 2*time.Second))
		case "membership":
			apply(w.at, memberDeletion(w.mem, w.org, w.user, "msg_d"+w.mem, 2*time.Second))
		}
	}
	wantOrgs := []string{"org_walk0", "org_walk1", "org_walk3", "org_walk5"}
	wantMembers := []string{"orgmem_walk0", "orgmem_walk1", "orgmem_walk5"}
	cut := written.Add(time.Second)
	var orgs, members []string
	if err := s.Organizations().WalkActive(ctx, cut, func(id string) error { orgs = append(orgs, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Memberships().WalkActive(ctx, cut, func(id string) error { members = append(members, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(orgs), wantOrgs) {
		t.Errorf("Organizations.WalkActive = %v, want %v (active, first written before the cut, each once)", orgs, wantOrgs)
	}
	if !slices.Equal(sorted(members), wantMembers) {
		t.Errorf("Memberships.WalkActive = %v, want %v (not tombstones, first written before the cut, each once)", members, wantMembers)
	}
	stop := errors.New("stop")
	if err := s.Organizations().WalkActive(ctx, cut, func(string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Organizations.WalkActive returns %v, want fn's error", err)
	}
	if err := s.Memberships().WalkActive(ctx, cut, func(string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Memberships.WalkActive returns %v, want fn's error", err)
	}
}
