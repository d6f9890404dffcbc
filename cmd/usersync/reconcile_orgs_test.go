package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
)

func orgID(i int) string    { return fmt.Sprintf("org_rec%03d", i) }
func memberID(i int) string { return fmt.Sprintf("orgmem_rec%03d", i) }

// orgUpdatedAt and memberUpdatedAt are the Clerk times of organization i
// and membership i as the helpers below make them.
func orgUpdatedAt(i int) int64    { return baseUpdatedAt + 100_000 + int64(i)*1000 }
func memberUpdatedAt(i int) int64 { return baseUpdatedAt + 200_000 + int64(i)*1000 }

// clerkOrgData is organization i as Clerk's API serves it.
func clerkOrgData(i int, updatedAt int64) map[string]any {
	return map[string]any{
		"object": "organization", "id": orgID(i), "name": fmt.Sprintf("Org %d", i), "slug": fmt.Sprintf("org-%d", i),
		"image_url": "https://img.clerk.com/org", "has_image": false, "members_count": 2, "max_allowed_memberships": 0,
		"admin_delete_enabled": true, "public_metadata": map[string]any{"n": i}, "private_metadata": map[string]any{"secret": i},
		"created_by": userID(0), "created_at": baseUpdatedAt - int64(1000-i), "updated_at": updatedAt,
	}
}

// clerkMemberData is membership i, of user user in organization org, as
// Clerk's API serves it: with the whole organization and the member's
// public data.
func clerkMemberData(i, org, user int, updatedAt int64) map[string]any {
	return map[string]any{
		"object": "organization_membership", "id": memberID(i), "role": "org:member", "role_name": "Member",
		"permissions": []any{"org:sys_profile:read"}, "public_metadata": map[string]any{"m": i}, "private_metadata": map[string]any{},
		"organization": clerkOrgData(org, orgUpdatedAt(org)),
		"public_user_data": map[string]any{
			"user_id": userID(user), "first_name": "Person", "last_name": strconv.Itoa(user),
			"identifier": fmt.Sprintf("person%03d@example.org", user), "image_url": "https://img.clerk.com/u", "has_image": false,
		},
		"created_at": baseUpdatedAt - int64(500-i), "updated_at": updatedAt,
	}
}

func invitationID(i int) string { return fmt.Sprintf("orginv_rec%03d", i) }

// invitationUpdatedAt is the Clerk time of invitation i in the tests.
func invitationUpdatedAt(i int) int64 { return baseUpdatedAt + 300_000 + int64(i)*1000 }

// clerkInvitationData is invitation i, of organization org, as Clerk's
// API serves it, in status (accepted ones by user i).
func clerkInvitationData(i, org int, status string, updatedAt int64) map[string]any {
	d := map[string]any{
		"object": "organization_invitation", "id": invitationID(i), "email_address": fmt.Sprintf("invited%03d@example.org", i),
		"role": "org:member", "role_name": "Member", "organization_id": orgID(org), "status": status,
		"public_metadata": map[string]any{"i": i}, "private_metadata": map[string]any{"secret": i},
		"url": "https://accounts.example.org/accept?token=secret", "user_id": nil,
		"expires_at": updatedAt + 7*24*3600*1000, "created_at": baseUpdatedAt - int64(300-i), "updated_at": updatedAt,
	}
	if status == models.InvitationAccepted {
		d["user_id"] = userID(i)
	}
	return d
}

func rawJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// membership is one membership of the tests: its index, organization and
// user.
type membership struct{ i, org, user int }

// clerkHas adds the organizations and memberships to the fake Clerk.
func (e *backfillEnv) clerkHas(t *testing.T, orgs []int, members []membership) {
	t.Helper()
	for _, i := range orgs {
		e.clerk.AddOrganization(rawJSON(t, clerkOrgData(i, orgUpdatedAt(i))))
	}
	for _, m := range members {
		e.clerk.AddMembership(rawJSON(t, clerkMemberData(m.i, m.org, m.user, memberUpdatedAt(m.i))))
	}
}

// orgCreated and memberCreated write an organization or a membership as
// the webhook's .created would.
func (e *backfillEnv) orgCreated(t *testing.T, i int) {
	t.Helper()
	e.ingest(t, fmt.Sprintf("msg_org_created_%d", i), webhook(t, models.TypeOrganizationCreated, orgUpdatedAt(i), clerkOrgData(i, orgUpdatedAt(i))))
}

func (e *backfillEnv) memberCreated(t *testing.T, m membership) {
	t.Helper()
	e.ingest(t, fmt.Sprintf("msg_member_created_%d", m.i), webhook(t, models.TypeMembershipCreated, memberUpdatedAt(m.i),
		clerkMemberData(m.i, m.org, m.user, memberUpdatedAt(m.i))))
}

// org and member return the stored organization or membership; ok is
// false when it is unknown.
func (e *backfillEnv) org(t *testing.T, id string) (o models.Organization, ok bool) {
	t.Helper()
	o, err := e.store.Organizations().Get(context.Background(), id)
	if errors.Is(err, models.ErrNotFound) {
		return o, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return o, true
}

func (e *backfillEnv) member(t *testing.T, id string) (m models.Membership, ok bool) {
	t.Helper()
	m, err := e.store.Memberships().Get(context.Background(), id)
	if errors.Is(err, models.ErrNotFound) {
		return m, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return m, true
}

func (e *backfillEnv) orgActive(t *testing.T, i int) bool {
	t.Helper()
	o, ok := e.org(t, orgID(i))
	return ok && !o.Deleted()
}

func (e *backfillEnv) memberActive(t *testing.T, i int) bool {
	t.Helper()
	m, ok := e.member(t, memberID(i))
	return ok && !m.Deleted()
}

// kindSummary returns the counts of the run's summary line of one kind
// (users, organizations, memberships).
func kindSummary(t *testing.T, out, noun string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^reconcile: (?:done|dry run, nothing changed|refused[^:]*|stopped[^:]*): (` + noun + ` in Clerk .*)$`)
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("want one summary line of %s, got %d:\n%s", noun, len(m), out)
	}
	return m[0][1]
}

// isRecheck reports whether path is that of a re-check: a single
// organization, or a user's memberships.
func isRecheck(path string) bool {
	return strings.HasPrefix(path, "/v1/organizations/") ||
		(strings.HasPrefix(path, "/v1/users/") && strings.HasSuffix(path, "/organization_memberships"))
}

// recheckRequests lists the re-checks among reqs: single organizations
// and users' memberships.
func recheckRequests(reqs []clerktest.Request) []string {
	var paths []string
	for _, r := range reqs {
		if isRecheck(r.Path) {
			paths = append(paths, r.Path)
		}
	}
	return paths
}

func TestReconcile_DeletesOrganizationsAndMembershipsDeletedInClerkDuringAWebhookOutage(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	members := []membership{{0, 0, 0}, {1, 1, 1}, {2, 2, 0}, {3, 0, 1}}
	e.clerkHas(t, []int{0, 1, 2}, members)
	e.created(t, 0)
	e.created(t, 1)
	for i := range 3 {
		e.orgCreated(t, i)
	}
	for _, m := range members {
		e.memberCreated(t, m)
	}
	// Webhooks were down while organization 1 was deleted in Clerk (and
	// membership 1 with it), and user 1 left organization 0 (membership 3).
	e.clerk.Remove(orgID(1))
	e.clerk.Remove(memberID(3))

	out := e.mustReconcile(t)

	for noun, want := range map[string]string{
		"users":         "users in Clerk 2, local users 2, applied 0, stale 0, deleted 0, unchanged 2, failed 0",
		"organizations": "organizations in Clerk 2, local organizations 3, applied 0, stale 0, deleted 1, unchanged 2, failed 0",
		// Membership 1 went with its organization: it is no longer to check.
		"memberships": "memberships in Clerk 2, local memberships 3, applied 0, stale 0, deleted 1, unchanged 2, failed 0",
	} {
		if got := kindSummary(t, out, noun); got != want {
			t.Errorf("%s: summary = %q, want %q", noun, got, want)
		}
	}
	wantLine(t, out, "reconcile: organization "+orgID(1)+": absent from Clerk: deleted")
	wantLine(t, out, "reconcile: membership "+memberID(3)+": absent from Clerk: deleted")
	if got, want := strings.Join(recheckRequests(e.clerk.Requests()), ","),
		"/v1/organizations/"+orgID(1)+",/v1/users/"+userID(1)+"/organization_memberships"; got != want {
		t.Errorf("re-checks = %s, want %s (one GET for each object before deleting it)", got, want)
	}

	o, _ := e.org(t, orgID(1))
	if !o.Deleted() || o.Name != "" {
		t.Fatalf("organization 1 = %+v, want a tombstone", o)
	}
	runID := strconv.FormatInt(o.DeletedAt.UnixMilli(), 10)
	for _, tc := range []struct {
		id, typ, user, object string
	}{
		{"reconcile_delete_" + orgID(1) + "_" + runID, models.TypeOrganizationDeleted, "", orgID(1)},
		// A membership's deletion names its member: it is among the user's
		// events, and erased with them.
		{"reconcile_delete_" + memberID(3) + "_" + runID, models.TypeMembershipDeleted, userID(1), memberID(3)},
	} {
		ev, err := e.store.Events().Get(context.Background(), tc.id)
		if err != nil {
			t.Fatalf("the delete's event %s: %v", tc.id, err)
		}
		if ev.Type != tc.typ || ev.EventType != models.EventDeleted || ev.Status != models.StatusProcessed ||
			ev.Outcome != models.OutcomeApplied || ev.SignatureValid != nil || ev.UserID != tc.user || ev.ObjectID != tc.object {
			t.Errorf("event %s: %s/%s %s %s, signatureValid %v, user %q, object %q; want %s, processed, applied, null, %q, %q",
				tc.id, ev.Type, ev.EventType, ev.Status, ev.Outcome, ev.SignatureValid, ev.UserID, ev.ObjectID, tc.typ, tc.user, tc.object)
		}
	}
	for i, want := range []bool{true, false, true, false} {
		if got := e.memberActive(t, i); got != want {
			t.Errorf("membership %d active = %v, want %v", i, got, want)
		}
	}
	if n := e.events(t, models.EventFilter{EventType: models.EventDeleted}); n != 2 {
		t.Errorf("%d delete events, want 2 (membership 1 went with its organization)", n)
	}
	if !e.orgActive(t, 0) || !e.orgActive(t, 2) {
		t.Errorf("organizations 0 and 2 active = %v, %v; Clerk has them", e.orgActive(t, 0), e.orgActive(t, 2))
	}

	// A second run finds nothing to do.
	out = e.mustReconcile(t)
	for noun, want := range map[string]string{
		"organizations": "organizations in Clerk 2, local organizations 2, applied 0, stale 0, deleted 0, unchanged 2, failed 0",
		"memberships":   "memberships in Clerk 2, local memberships 2, applied 0, stale 0, deleted 0, unchanged 2, failed 0",
	} {
		if got := kindSummary(t, out, noun); got != want {
			t.Errorf("second run: %s: summary = %q, want %q", noun, got, want)
		}
	}
}

func TestReconcile_NeverDeletesAnOrganizationOrMembershipWrittenAfterTheListingBegan(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.clerkHas(t, []int{0}, []membership{{0, 0, 0}})
	e.orgCreated(t, 0)
	e.memberCreated(t, membership{0, 0, 0})
	// While the lists are read, organization 5 is made with a membership,
	// and their webhooks arrive; the lists read already do not have them.
	// Clerk would answer 404 for them: it is never asked.
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Path == "/v1/users" && r.Offset == "0" && before == 0 {
			e.orgCreated(t, 5)
			e.memberCreated(t, membership{5, 5, 0})
		}
		if isRecheck(r.Path) {
			http.Error(w, `{"errors":[{"code":"resource_not_found"}]}`, http.StatusNotFound)
			return http.StatusNotFound
		}
		return 0
	})
	out := e.mustReconcile(t)
	if !e.orgActive(t, 5) || !e.memberActive(t, 5) {
		t.Fatalf("organization 5 active %v, membership 5 active %v: first written after the listing began, they were deleted:\n%s",
			e.orgActive(t, 5), e.memberActive(t, 5), out)
	}
	if got := kindSummary(t, out, "organizations"); !strings.Contains(got, "local organizations 1,") || !strings.Contains(got, "deleted 0,") {
		t.Errorf("organizations: summary = %q, want 1 local organization (organization 5 is newer than the listing) and none deleted", got)
	}
	if got := kindSummary(t, out, "memberships"); !strings.Contains(got, "local memberships 1,") || !strings.Contains(got, "deleted 0,") {
		t.Errorf("memberships: summary = %q, want 1 local membership and none deleted", got)
	}
	if got := recheckRequests(e.clerk.Requests()); len(got) != 0 {
		t.Errorf("re-checks = %v, want none", got)
	}
}

func TestReconcile_AnOrganizationListingThatFailsMidwayDeletesNothingOfAnyKind(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.shortRetries()
	e.clerkHas(t, []int{0, 1, 2}, []membership{{0, 0, 0}})
	e.created(t, 0)
	e.created(t, 1) // not in Clerk
	for _, i := range []int{0, 1, 2, 3} {
		e.orgCreated(t, i) // 3 is not in Clerk
	}
	e.memberCreated(t, membership{0, 0, 0})
	e.memberCreated(t, membership{1, 1, 1}) // not in Clerk
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Path == "/v1/organizations" && r.Offset == "2" {
			http.Error(w, `{"errors":[{"code":"internal_error"}]}`, http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		return 0
	})
	out, err := e.reconcile(t, "-limit", "2")
	if err == nil || !strings.Contains(err.Error(), "organizations offset 2") || !strings.Contains(err.Error(), "500") ||
		!strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("reconcile = %v, want an error naming the organizations' offset 2, the 500, and that nothing was deleted\n%s", err, out)
	}
	wantLine(t, out, "reconcile: stopped at organizations offset 2, nothing deleted: "+
		"organizations in Clerk 2, local organizations not read, applied 0, stale 0, deleted 0, unchanged 2, failed 0")
	// The other lists were read whole, and applied.
	wantLine(t, out, "reconcile: stopped, nothing deleted: users in Clerk 1, local users not read, applied 0, stale 0, deleted 0, unchanged 1, failed 0")
	if !e.active(t, 1) || !e.orgActive(t, 3) || !e.memberActive(t, 1) {
		t.Errorf("after an incomplete listing: user 1 active %v, organization 3 %v, membership 1 %v; want all active",
			e.active(t, 1), e.orgActive(t, 3), e.memberActive(t, 1))
	}
	if got := recheckRequests(e.clerk.Requests()); len(got) != 0 {
		t.Errorf("re-checks = %v, want none", got)
	}
	if n := e.events(t, models.EventFilter{EventType: models.EventDeleted}); n != 0 {
		t.Errorf("%d delete events stored, want none", n)
	}
}

func TestReconcile_MaxDeletesAndTheDryRunCountEachKind(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	e.clerkHas(t, []int{0}, []membership{{0, 0, 0}})
	e.created(t, 0)
	e.created(t, 1)
	for i := range 4 {
		e.orgCreated(t, i) // 1 to 3 are gone from Clerk
		e.memberCreated(t, membership{i, i, i % 2})
	}
	counts := func() string {
		return fmt.Sprintf("events %d, deletions %d, organizations %v %v %v, memberships %v %v %v", e.events(t, models.EventFilter{}),
			e.events(t, models.EventFilter{EventType: models.EventDeleted}),
			e.orgActive(t, 1), e.orgActive(t, 2), e.orgActive(t, 3), e.memberActive(t, 1), e.memberActive(t, 2), e.memberActive(t, 3))
	}
	was := counts()

	// Three organizations to delete, and, since they stay, their three
	// memberships too: each kind is over the limit of 2.
	out, err := e.reconcile(t, "-max-deletes", "2")
	if err == nil || !strings.Contains(err.Error(), "refused to delete 3 organizations and 3 memberships") ||
		!strings.Contains(err.Error(), "-max-deletes 3") {
		t.Fatalf("reconcile = %v, want a refusal of 3 organizations and 3 memberships that says how to allow them\n%s", err, out)
	}
	for i := 1; i < 4; i++ {
		wantLine(t, out, "reconcile: organization "+orgID(i)+": absent from Clerk: would delete")
		wantLine(t, out, "reconcile: membership "+memberID(i)+": absent from Clerk: would delete")
	}
	wantLine(t, out, "reconcile: refused: 3 organizations are absent from Clerk, more than -max-deletes 2: nothing deleted: "+
		"organizations in Clerk 1, local organizations 4, applied 0, stale 0, deleted 0, unchanged 1, failed 0")
	// It applied the states it read (each stored once, as an event), and
	// deleted nothing.
	if now, want := counts(), strings.Replace(was, "events 10,", "events 14,", 1); now != want {
		t.Errorf("after a refused run: %s, want %s", now, want)
	}
	was = counts()

	// The dry run says what a run within the limit would do, and does not.
	out = e.mustReconcile(t, "-max-deletes", "3", "-dry-run")
	if got, want := kindSummary(t, out, "organizations"), "organizations in Clerk 1, local organizations 4, applied 0, stale 0, deleted 3, unchanged 1, failed 0"; got != want {
		t.Errorf("dry run: organizations: summary = %q, want %q", got, want)
	}
	if !strings.Contains(out, "reconcile: dry run, nothing changed: memberships in Clerk") {
		t.Errorf("the dry run does not say that nothing changed:\n%s", out)
	}
	if now := counts(); now != was {
		t.Errorf("a dry run changed the database: %s, was %s", now, was)
	}

	// Within the limit they go; their memberships go with them, and are
	// then not deletions of their own.
	out = e.mustReconcile(t, "-max-deletes", "3")
	if got, want := kindSummary(t, out, "organizations"), "organizations in Clerk 1, local organizations 4, applied 0, stale 0, deleted 3, unchanged 1, failed 0"; got != want {
		t.Errorf("organizations: summary = %q, want %q", got, want)
	}
	if got, want := kindSummary(t, out, "memberships"), "memberships in Clerk 1, local memberships 1, applied 0, stale 0, deleted 0, unchanged 1, failed 0"; got != want {
		t.Errorf("memberships: summary = %q, want %q", got, want)
	}
	for i := 1; i < 4; i++ {
		if e.orgActive(t, i) || e.memberActive(t, i) {
			t.Errorf("organization %d active %v, its membership %v; want both deleted", i, e.orgActive(t, i), e.memberActive(t, i))
		}
	}
}

func TestReconcile_AMembershipHiddenByAShiftingListIsNotDeleted(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	members := []membership{{0, 0, 0}, {1, 0, 1}, {2, 1, 0}, {3, 1, 1}}
	e.clerkHas(t, []int{0, 1}, members)
	for _, m := range members {
		e.memberCreated(t, m)
	}
	// Membership 0 is deleted in Clerk between the first and the second
	// page: everyone moves up one place, and membership 2 is on no page.
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Path == "/v1/organization_memberships" && r.Offset == "2" && before == 0 {
			e.clerk.Remove(memberID(0))
		}
		return 0
	})
	out := e.mustReconcile(t, "-limit", "2", "-kinds", "memberships")
	wantLine(t, out, "reconcile: membership "+memberID(2)+": missing from the list, but Clerk has it: kept")
	for i := range 4 {
		if !e.memberActive(t, i) {
			t.Errorf("membership %d was deleted:\n%s", i, out)
		}
	}
	if strings.Contains(out, "users in Clerk") || strings.Contains(out, "organizations in Clerk") {
		t.Errorf("-kinds memberships reconciled other kinds:\n%s", out)
	}
	// The next run sees membership 0's deletion.
	out = e.mustReconcile(t, "-limit", "2", "-kinds", "memberships")
	if got := kindSummary(t, out, "memberships"); !strings.Contains(got, "memberships in Clerk 3, local memberships 4,") || !strings.Contains(got, "deleted 1,") {
		t.Errorf("second run: summary = %q, want 3 memberships in Clerk, 4 local, 1 deleted", got)
	}
	if e.memberActive(t, 0) {
		t.Errorf("membership 0, deleted in Clerk, is still active")
	}
}

func TestBackfill_AppliesOrganizationsAndMembershipsAPageOfEachListInTurn(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 3))
	members := []membership{{0, 0, 0}, {1, 1, 1}, {2, 2, 2}}
	e.clerkHas(t, []int{0, 1, 2}, members)
	e.orgCreated(t, 7) // not in Clerk: a backfill deletes nothing
	out := e.mustBackfill(t, "-limit", "2")

	var order []string
	for _, r := range e.clerk.Requests() {
		order = append(order, strings.TrimPrefix(r.Path, "/v1/")+"@"+r.Offset)
		if r.Path == "/v1/organizations" && r.IncludeMembersCount != "true" {
			t.Errorf("organizations read without include_members_count=true")
		}
	}
	// One limiter for all: the lists take turns, a page each.
	if got, want := strings.Join(order, " "), "users@0 organizations@0 organization_memberships@0 organization_invitations@0 billing/subscription_items@0 "+
		"users@2 organizations@2 organization_memberships@2"; got != want {
		t.Errorf("requests = %s, want %s", got, want)
	}
	wantLine(t, out, "backfill: organizations offset 0: 2 organizations (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, offsets 0 to 3: 3 users (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, organizations offsets 0 to 3: 3 organizations (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, memberships offsets 0 to 3: 3 memberships (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")

	for i := range 3 {
		o, ok := e.org(t, orgID(i))
		eventID := fmt.Sprintf("backfill_%s_%d", orgID(i), orgUpdatedAt(i))
		// The membership's nested state of the organization is the same
		// state, with a larger event id: it may be the one stored last.
		if !ok || o.Name != fmt.Sprintf("Org %d", i) || o.MembersCount == nil || *o.MembersCount != 2 ||
			o.SourceUpdatedAt.UnixMilli() != orgUpdatedAt(i) {
			t.Errorf("organization %d = %+v, want Clerk's state", i, o)
		}
		ev, err := e.store.Events().Get(context.Background(), eventID)
		if err != nil || ev.Type != models.TypeOrganizationUpdated || ev.Outcome != models.OutcomeApplied || ev.SignatureValid != nil {
			t.Errorf("event %s = %+v, %v; want organization.updated, applied, unsigned", eventID, ev, err)
		}
		m, ok := e.member(t, memberID(i))
		eventID = fmt.Sprintf("backfill_%s_%d", memberID(i), memberUpdatedAt(i))
		if !ok || m.Deleted() || m.OrgID != orgID(i) || m.UserID != userID(i) || m.Role != "org:member" || m.LastEventID != eventID {
			t.Errorf("membership %d = %+v, want Clerk's state from %s", i, m, eventID)
		}
		if ev, err := e.store.Events().Get(context.Background(), eventID); err != nil || ev.Type != models.TypeMembershipUpdated || ev.UserID != userID(i) {
			t.Errorf("event %s = %+v, %v; want organizationMembership.updated of %s", eventID, ev, err, userID(i))
		}
	}
	if !e.orgActive(t, 7) {
		t.Errorf("a backfill deleted organization 7")
	}
	// A rerun applies nothing twice.
	out = e.mustBackfill(t, "-kinds", "organizations,memberships")
	wantLine(t, out, "backfill: done, memberships offsets 0 to 3: 3 memberships (applied 0, stale 0, deleted 0, duplicate 3, failed 0)")
	if strings.Contains(out, " users (") {
		t.Errorf("-kinds organizations,memberships read users:\n%s", out)
	}
}

func TestBackfill_ResumesOneKindsListAtAnOffset(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.shortRetries()
	e.clerkHas(t, []int{0, 1, 2, 3}, nil)
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		if r.Path == "/v1/organizations" && r.Offset == "2" {
			http.Error(w, `{"errors":[{"code":"internal_error"}]}`, http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		return 0
	})
	out, err := e.backfill(t, "-limit", "2")
	if err == nil || !strings.Contains(err.Error(), "organizations offset 2") || !strings.Contains(err.Error(), "-kinds organizations -offset 2") {
		t.Fatalf("backfill = %v, want an error naming the organizations' offset 2 and how to resume\n%s", err, out)
	}
	wantLine(t, out, "backfill: stopped at organizations offset 2 after 2 organizations (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, offsets 0 to 1: 1 user (applied 1, stale 0, deleted 0, duplicate 0, failed 0)")

	e.clerk.SetAnswer(nil)
	e.clerk.Requests()
	out = e.mustBackfill(t, "-limit", "2", "-kinds", "organizations", "-offset", "2")
	if got := clerktest.OffsetsOf(e.clerk.Requests(), "/v1/organizations"); got != "2,4" {
		t.Errorf("resumed run read organizations at offsets %s, want 2,4", got)
	}
	wantLine(t, out, "backfill: done, organizations offsets 2 to 4: 2 organizations (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	for i := range 4 {
		if !e.orgActive(t, i) {
			t.Errorf("organization %d not stored", i)
		}
	}
}

func TestReconcile_AnInstanceWithOrganizationsTurnedOffStillReconcilesUsers(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.created(t, 0)
	e.created(t, 1) // deleted in Clerk
	e.orgCreated(t, 0)
	e.memberCreated(t, membership{0, 0, 0})
	e.clerk.TurnOrganizationsOff()

	out := e.mustReconcile(t)
	if got, want := runSummary(t, out), "users in Clerk 1, local users 2, applied 0, stale 0, deleted 1, unchanged 1, failed 0"; got != want {
		t.Errorf("users: summary = %q, want %q", got, want)
	}
	wantLine(t, out, "reconcile: nothing deleted: organizations are not enabled in the Clerk instance")
	wantLine(t, out, "reconcile: nothing deleted: memberships are not enabled in the Clerk instance")
	if e.active(t, 1) || !e.orgActive(t, 0) || !e.memberActive(t, 0) {
		t.Errorf("user 1 active %v, organization 0 %v, membership 0 %v; want false, true, true", e.active(t, 1), e.orgActive(t, 0), e.memberActive(t, 0))
	}
	if got := recheckRequests(e.clerk.Requests()); len(got) != 0 {
		t.Errorf("re-checks = %v, want none", got)
	}
	out = e.mustBackfill(t)
	wantLine(t, out, "backfill: organizations are not enabled in the Clerk instance: none read")
}

// TestBackfillAndReconcile_ApplyInvitationsOfEveryStatusAsTheirWebhooks:
// Clerk's list of invitations (every status) is read a page at a time;
// each is applied as the webhook of its status would carry it, so that a
// webhook's newer state is never overwritten and a rerun applies nothing
// twice; an invitation of an organization deleted here is deleted.
func TestBackfillAndReconcile_ApplyInvitationsOfEveryStatusAsTheirWebhooks(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.clerkHas(t, []int{0}, nil)
	e.orgCreated(t, 0)
	statuses := []string{models.InvitationPending, models.InvitationAccepted, models.InvitationRevoked, models.InvitationExpired}
	for i, st := range statuses {
		e.clerk.AddInvitation(rawJSON(t, clerkInvitationData(i, 0, st, invitationUpdatedAt(i))))
	}
	// A webhook brought a newer state of invitation 0 than Clerk's list has.
	e.ingest(t, "msg_inv_revoked_0", webhook(t, models.TypeInvitationRevoked, invitationUpdatedAt(0)+5000,
		clerkInvitationData(0, 0, models.InvitationRevoked, invitationUpdatedAt(0)+5000)))

	out := e.mustBackfill(t, "-limit", "3", "-kinds", "invitations")
	if got := clerktest.OffsetsOf(e.clerk.Requests(), "/v1/organization_invitations"); got != "0,3" {
		t.Errorf("invitations read at offsets %s, want 0,3", got)
	}
	wantLine(t, out, "backfill: done, invitations offsets 0 to 4: 4 invitations (applied 3, stale 1, deleted 0, duplicate 0, failed 0)")
	wantTypes := []string{models.TypeInvitationCreated, models.TypeInvitationAccepted, models.TypeInvitationRevoked, models.TypeInvitationCreated}
	for i, st := range statuses {
		inv, err := e.store.Invitations().Get(context.Background(), invitationID(i))
		want := st
		if i == 0 {
			want = models.InvitationRevoked // the webhook's newer state stays
		}
		if err != nil || inv.Status != want || inv.OrgID != orgID(0) || inv.EmailAddress != fmt.Sprintf("invited%03d@example.org", i) {
			t.Errorf("invitation %d = %+v, %v; want %s", i, inv, err, want)
		}
		eventID := fmt.Sprintf("backfill_%s_%d", invitationID(i), invitationUpdatedAt(i))
		if ev, err := e.store.Events().Get(context.Background(), eventID); err != nil || ev.Type != wantTypes[i] || ev.SignatureValid != nil {
			t.Errorf("event %s = %+v, %v; want %s, unsigned", eventID, ev, err, wantTypes[i])
		}
	}
	out = e.mustBackfill(t, "-kinds", "invitations")
	wantLine(t, out, "backfill: done, invitations offsets 0 to 4: 4 invitations (applied 0, stale 0, deleted 0, duplicate 4, failed 0)")

	// The organization goes while webhooks are down: reconcile deletes it,
	// and its invitations with it.
	e.clerk.Remove(orgID(0))
	e.mustReconcile(t)
	for i := range statuses {
		if inv, err := e.store.Invitations().Get(context.Background(), invitationID(i)); err != nil || !inv.Deleted() || inv.EmailAddress != "" {
			t.Errorf("invitation %d after its organization's deletion = %+v, %v; want it deleted, without its email", i, inv, err)
		}
	}
}
