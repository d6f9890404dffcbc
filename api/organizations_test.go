package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

const (
	fxOrg    = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fxMember = "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fxUser   = "user_2h8op3Isl1QR7tKu5FGNfaLKEoU"
)

// editFixture is a fixture of models/testdata with fn's changes.
func editFixture(t *testing.T, name string, fn func(env, data map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, name), &env); err != nil {
		t.Fatal(err)
	}
	fn(env, env["data"].(map[string]any))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// list reads one page at path as key and returns its data.
func (h *harness) list(path, key string) []map[string]any {
	h.t.Helper()
	r := h.get(path, key)
	if r.Code != http.StatusOK {
		h.t.Fatalf("GET %s: %s", path, r)
	}
	var body struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		h.t.Fatal(err)
	}
	return body.Data
}

// TestOrganizations_EveryTypeFromClerksFixturesIsIngested delivers Clerk's
// examples of the six organization and membership events (the membership
// first, as can happen) and an invitation, stored and applied as its own
// kind.
func TestOrganizations_EveryTypeFromClerksFixturesIsIngested(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, tc := range []struct {
		file, status, outcome string
	}{
		{"openapi.organizationMembership.created.json", "processed", "applied"},
		{"openapi.organization.created.json", "processed", "stale"}, // older than the nested state, on a tie of times
		{"openapi.organizationMembership.updated.json", "processed", "applied"},
		// The same updated_at as the state the membership nests: the later
		// event id wins the tie (Clerk keeps updated_at when only
		// members_count moves).
		{"openapi.organization.updated.json", "processed", "applied"},
		{"openapi.organizationInvitation.accepted.json", "processed", "applied"},
	} {
		id := newID()
		if strings.HasSuffix(tc.file, "organization.created.json") {
			id = "msg_0" // below the membership's event id: the tie of times goes to the nested state
		}
		got := h.mustDeliver(id, fixture(t, tc.file))
		if got["status"] != tc.status || fmt.Sprint(got["outcome"]) != fmt.Sprint(orNil(tc.outcome)) {
			t.Errorf("%s: answer %v, want %s/%s", tc.file, got, tc.status, tc.outcome)
		}
	}
	if n := h.countEvents(); n != 5 {
		t.Errorf("%d events stored, want 5", n)
	}
	org := h.get("/v1/organizations/"+fxOrg, testAPIKey).JSON(t)
	if org["name"] != "Acme Corp Updated" || org["slug"] != "acme-corp-updated" || org["membersCount"] != 3.0 || org["deletedAt"] != nil {
		t.Errorf("organization = %v", org)
	}
	ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey)
	if len(ms) != 1 || ms[0]["membershipId"] != fxMember || ms[0]["role"] != "org:admin" || ms[0]["userId"] != fxUser ||
		ms[0]["organization"] != nil {
		t.Errorf("memberships = %v", ms)
	}
	mine := h.list("/v1/users/"+fxUser+"/memberships", testAPIKey)
	if len(mine) != 1 || mine[0]["organization"].(map[string]any)["name"] != "Acme Corp Updated" {
		t.Errorf("the user's memberships = %v, want its organization's summary", mine)
	}
	ev := h.get("/v1/events/"+fxMemberEvent(t, h), testAdminKey).JSON(t)
	if ev["userId"] != fxUser || ev["objectId"] != fxMember || ev["eventType"] != "updated" {
		t.Errorf("membership event = %v, want its member and membership", ev)
	}

	// Deletions: the membership's (by its id, at the envelope's time), then
	// the organization's.
	h.mustDeliver(newID(), editFixture(t, "openapi.organizationMembership.deleted.json", func(env, _ map[string]any) {
		env["timestamp"] = time.Now().Add(-time.Minute).UnixMilli()
	}))
	if ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey); len(ms) != 0 {
		t.Errorf("memberships after the deletion = %v", ms)
	}
	got := h.mustDeliver(newID(), editFixture(t, "openapi.organization.deleted.json", func(env, _ map[string]any) {
		env["timestamp"] = time.Now().Add(-time.Second).UnixMilli()
	}))
	if got["outcome"] != "applied" {
		t.Errorf("organization.deleted = %v", got)
	}
	if r := h.get("/v1/organizations/"+fxOrg, testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("a deleted organization: %s, want 404", r)
	}
	late := h.mustDeliver(newID(), editFixture(t, "openapi.organization.updated.json", func(_, d map[string]any) {
		d["updated_at"] = time.Now().UnixMilli()
	}))
	if late["outcome"] != "deleted" {
		t.Errorf("a later update of a deleted organization = %v, want deleted", late)
	}
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// fxMemberEvent finds the id of the stored organizationMembership.updated.
func fxMemberEvent(t *testing.T, h *harness) string {
	t.Helper()
	for _, ev := range h.list("/v1/events?limit=200", testAdminKey) {
		if ev["type"] == "organizationMembership.updated" {
			return ev["id"].(string)
		}
	}
	t.Fatal("no organizationMembership.updated in the log")
	return ""
}

// TestOrganizations_APIKeysNeverSeePrivateMetadata: private_metadata of
// organizations and memberships stays in the event payload, which only
// admins read.
func TestOrganizations_APIKeysNeverSeePrivateMetadata(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = feedSettle })
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	h.mustDeliver(newID(), fixture(t, "openapi.organization.updated.json")) // private_metadata: internal_id ORG-123
	h.mustDeliver(newID(), editFixture(t, "openapi.organizationMembership.updated.json", func(_, d map[string]any) {
		d["private_metadata"] = map[string]any{"salary": "SECRET-MEMBER-42"}
		d["organization"].(map[string]any)["private_metadata"] = map[string]any{"internal_id": "ORG-123"}
		d["public_metadata"] = map[string]any{"team": "blue"}
	}))
	settled()
	for _, path := range []string{
		"/v1/organizations", "/v1/organizations/" + fxOrg, "/v1/organizations?slug=acme-corp-updated",
		"/v1/organizations?updatedSince=" + url.QueryEscape(since),
		"/v1/organizations/" + fxOrg + "/memberships", "/v1/users/" + fxUser + "/memberships",
		"/v1/memberships?updatedSince=" + url.QueryEscape(since),
	} {
		r := h.get(path, testAPIKey)
		if r.Code != http.StatusOK {
			t.Errorf("GET %s: %s", path, r)
			continue
		}
		if body := string(r.Body); strings.Contains(body, "ORG-123") || strings.Contains(body, "SECRET-MEMBER-42") || strings.Contains(body, "private") {
			t.Errorf("GET %s shows private metadata: %s", path, body)
		}
	}
	if ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey); len(ms) != 1 || ms[0]["metadata"].(map[string]any)["team"] != "blue" {
		t.Errorf("memberships = %v, want the public metadata", ms)
	}
}

// TestOrganizations_IncludeDeletedIsForAdmins: deleted organizations and
// memberships are 404 or absent for API keys; an admin sees them with
// includeDeleted, and an API key asking for them is refused.
func TestOrganizations_IncludeDeletedIsForAdmins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.created.json"))
	h.mustDeliver(newID(), editFixture(t, "openapi.organization.deleted.json", func(env, _ map[string]any) {
		env["timestamp"] = time.Now().UnixMilli()
	}))
	for _, path := range []string{
		"/v1/organizations?includeDeleted=true", "/v1/organizations/" + fxOrg + "?includeDeleted=true",
		"/v1/organizations/" + fxOrg + "/memberships?includeDeleted=true", "/v1/users/" + fxUser + "/memberships?includeDeleted=true",
	} {
		if r := h.get(path, testAPIKey); r.Code != http.StatusForbidden {
			t.Errorf("GET %s with an API key: %s, want 403", path, r)
		}
	}
	if r := h.get("/v1/organizations/"+fxOrg, testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("a deleted organization: %s, want 404", r)
	}
	if orgs := h.list("/v1/organizations", testAPIKey); len(orgs) != 0 {
		t.Errorf("active organizations = %v", orgs)
	}
	// The membership went with its organization, though no event said so.
	if ms := h.list("/v1/users/"+fxUser+"/memberships", testAPIKey); len(ms) != 0 {
		t.Errorf("the user's memberships = %v, want none", ms)
	}
	org := h.get("/v1/organizations/"+fxOrg+"?includeDeleted=true", testAdminKey).JSON(t)
	if org["deletedAt"] == nil || org["name"] != nil {
		t.Errorf("the deleted organization for an admin = %v, want its tombstone", org)
	}
	ms := h.list("/v1/organizations/"+fxOrg+"/memberships?includeDeleted=true", testAdminKey)
	if len(ms) != 1 || ms[0]["deletedAt"] == nil || ms[0]["role"] != nil {
		t.Errorf("memberships for an admin = %v, want the tombstone", ms)
	}
}

// TestMemberships_TheMemberComesFromTheUsersCurrentRecord: a membership
// shows its member from the membership's public_user_data until usersync
// has the user, then from the user's record, and a user.updated shows at
// once.
func TestMemberships_TheMemberComesFromTheUsersCurrentRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.created.json"))
	member := func() map[string]any {
		t.Helper()
		ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey)
		if len(ms) != 1 {
			t.Fatalf("memberships = %v", ms)
		}
		return ms[0]["member"].(map[string]any)
	}
	if m := member(); m["firstName"] != "Jane" || m["identifier"] != "jane.doe@acme.com" || m["source"] != "membership" {
		t.Errorf("member before user.created = %v, want public_user_data", m)
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fxUser, UpdatedAt: t0, Email: "janet@example.com", First: "Janet", Last: "Smith"}))
	if m := member(); m["firstName"] != "Janet" || m["lastName"] != "Smith" || m["identifier"] != "janet@example.com" || m["source"] != "user" {
		t.Errorf("member after user.created = %v, want the user's record", m)
	}
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: fxUser, UpdatedAt: t0 + 1000, Email: "janet@new.example.com", First: "Janet", Last: "Jones"}))
	if m := member(); m["lastName"] != "Jones" || m["identifier"] != "janet@new.example.com" {
		t.Errorf("member after user.updated = %v, want the new name", m)
	}
	// The user's deletion deletes the membership.
	h.mustDeliver(newID(), deleteBody(t, fxUser, t0+2000))
	if ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey); len(ms) != 0 {
		t.Errorf("memberships of a deleted user = %v", ms)
	}
}

// TestUsers_DeprovisionedLeaveTheActiveListBannedAndLockedStayFlagged:
// Directory Sync off-boards a user with user.updated {deprovisioned:
// true}; the user leaves the active list, is 404 for an API key, and its
// memberships stop counting; an admin still sees it. A banned or locked
// user stays, flagged.
func TestUsers_DeprovisionedLeaveTheActiveListBannedAndLockedStayFlagged(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.created.json"))
	body := func(id string, at int64, flag string) []byte {
		var env map[string]any
		if err := json.Unmarshal(userBody(t, "user.updated", clerkUser{ID: id, UpdatedAt: at, Email: id + "@example.com"}), &env); err != nil {
			t.Fatal(err)
		}
		if flag != "" {
			env["data"].(map[string]any)[flag] = true
		}
		b, _ := json.Marshal(env)
		return b
	}
	h.mustDeliver(newID(), body(fxUser, t0, "deprovisioned"))
	h.mustDeliver(newID(), body("user_banned", t0, "banned"))
	h.mustDeliver(newID(), body("user_locked", t0, "locked"))
	listed := map[string]map[string]any{}
	for _, u := range h.list("/v1/users?limit=200", testAPIKey) {
		listed[u["userId"].(string)] = u
	}
	if _, ok := listed[fxUser]; ok || listed["user_banned"]["banned"] != true || listed["user_locked"]["locked"] != true {
		t.Errorf("active users = %v, want the banned and locked ones flagged, not the deprovisioned one", listed)
	}
	if r := h.get("/v1/users/"+fxUser, testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("a deprovisioned user for an API key: %s, want 404", r)
	}
	if u := h.user(fxUser); u == nil || u["deprovisioned"] != true || u["deletedAt"] != nil {
		t.Errorf("the deprovisioned user for an admin = %v", u)
	}
	if ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey); len(ms) != 0 {
		t.Errorf("memberships of a deprovisioned user = %v, want none active", ms)
	}
	ms := h.list("/v1/organizations/"+fxOrg+"/memberships?includeDeleted=true", testAdminKey)
	if len(ms) != 1 || ms[0]["member"].(map[string]any)["deprovisioned"] != true || ms[0]["deletedAt"] != nil {
		t.Errorf("memberships for an admin = %v, want the membership, flagged", ms)
	}
	// Provisioned again: back in the lists.
	h.mustDeliver(newID(), body(fxUser, t0+1000, ""))
	if ms := h.list("/v1/organizations/"+fxOrg+"/memberships", testAPIKey); len(ms) != 1 {
		t.Errorf("memberships of a user provisioned again = %v", ms)
	}
}

// TestMemberships_ChangeFeedShowsACascadedDeletion: the membership feed
// serves the tombstone a cascade wrote, with the ids an application needs.
func TestMemberships_ChangeFeedShowsACascadedDeletion(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = feedSettle })
	since := time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano)
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.created.json"))
	h.mustDeliver(newID(), deleteBody(t, fxUser, time.Now().UnixMilli()))
	settled()
	feed := h.list("/v1/memberships?updatedSince="+url.QueryEscape(since), testAPIKey)
	if len(feed) != 1 || feed[0]["membershipId"] != fxMember || feed[0]["organizationId"] != fxOrg || feed[0]["userId"] != fxUser ||
		feed[0]["deletedAt"] == nil || feed[0]["role"] != nil {
		t.Errorf("membership feed = %v, want the cascaded tombstone", feed)
	}
	if r := h.get("/v1/memberships", testAPIKey); r.Code != http.StatusBadRequest {
		t.Errorf("the feed without updatedSince: %s, want 400", r)
	}
}

// TestErase_AMembersDataGoesWithTheDeletedUser: a membership's events
// carry the member's personal data (public_user_data); they are the
// user's events (userId), so erasing the deleted user erases them, and the
// membership deleted with the user keeps none of it.
func TestErase_AMembersDataGoesWithTheDeletedUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	member := []string{"jane.doe@acme.com", "Jane", "img.clerk.com/yyyyy"}
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.created.json"))
	h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership.updated.json"))
	if found := h.leftovers(member); len(found) < len(member) {
		t.Fatalf("before erasure the scan finds only %v: it cannot be trusted", found)
	}
	h.mustDeliver(newID(), deleteBody(t, fxUser, time.Now().UnixMilli()))
	r := h.postAs("/v1/users/"+fxUser+"/erase", testAdminKey)
	if r.Code != http.StatusOK {
		t.Fatalf("erase: %s", r)
	}
	if got := r.JSON(t); got["erasedEvents"] != 3.0 || got["pendingEvents"] != 0.0 {
		t.Errorf("erase = %v, want the deletion and both membership events erased", got)
	}
	if found := h.leftovers(member); len(found) > 0 {
		t.Errorf("after erasure the store still holds %v", found)
	}
}

// TestMetrics_WebhookDeliveriesPerKind counts the deliveries of each kind
// of event by result.
func TestMetrics_WebhookDeliveriesPerKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dup := newID()
	h.mustDeliver(dup, fixture(t, "openapi.organizationMembership.created.json"))
	h.mustDeliver(dup, fixture(t, "openapi.organizationMembership.created.json"))
	h.mustDeliver(newID(), fixture(t, "openapi.organization.updated.json"))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_m", UpdatedAt: t0}))
	h.mustDeliver(newID(), []byte(`{"type":"role.created","object":"event","data":{"id":"role_1","object":"role"}}`))
	body := string(h.get("/metrics", "").Body)
	for _, want := range []string{
		`usersync_webhook_events_total{kind="membership",result="processed"} 1`,
		`usersync_webhook_events_total{kind="membership",result="duplicate"} 1`,
		`usersync_webhook_events_total{kind="organization",result="processed"} 1`,
		`usersync_webhook_events_total{kind="user",result="processed"} 1`,
		`usersync_webhook_requests_total{result="ignored"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// TestMemberships_AnInvalidPayloadIsA400ThatNamesTheField: a membership
// whose payload can never apply is stored as failed and answered 400,
// saying what is wrong in usersync's words.
func TestMemberships_AnInvalidPayloadIsA400ThatNamesTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID()
	r := h.deliver(id, editFixture(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) {
		delete(d["public_user_data"].(map[string]any), "user_id")
	}))
	if r.Code != http.StatusBadRequest {
		t.Fatalf("deliver: %s, want 400", r)
	}
	msg, _ := r.JSON(t)["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "data.public_user_data.user_id") {
		t.Errorf("message %q does not name the field", msg)
	}
	if ev := h.event(id); ev["status"] != "failed" {
		t.Errorf("event = %v, want failed", ev)
	}
}

// TestErase_AMembershipsMemberDataGoesOnScheduleWhileItsUserStays: the
// member's names, identifier and image in the events of a deleted
// membership are erased on USERSYNC_ERASE_AFTER's schedule, while the
// user, still active, keeps its own.
func TestErase_AMembershipsMemberDataGoesOnScheduleWhileItsUserStays(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fxUser, UpdatedAt: t0, Email: "kept@example.com", First: "Kept"}))
	member := []string{"jane.doe@acme.com", "Jane", "img.clerk.com/yyyyy"}
	for _, f := range []string{"created", "updated", "deleted"} {
		h.mustDeliver(newID(), fixture(t, "openapi.organizationMembership."+f+".json"))
	}
	if found := h.leftovers(member); len(found) < len(member) {
		t.Fatalf("before erasure the scan finds only %v: it cannot be trusted", found)
	}
	svc := sync.New(h.store.Events(), h.store, nil)
	rec := &sync.Recovery{Service: svc, Store: h.store.Events(), Eraser: h.store, EraseAfter: 30 * 24 * time.Hour,
		Grace: time.Minute, Now: time.Now}
	got, err := rec.EraseOnce(ctx)
	if err != nil || got != (models.Erasure{Memberships: 1, Events: 3}) {
		t.Fatalf("EraseOnce = %+v, %v; want the deleted membership's 3 events", got, err)
	}
	if found := h.leftovers(member); len(found) > 0 {
		t.Errorf("after erasure the store still holds %v", found)
	}
	if found := h.leftovers([]string{"kept@example.com", "Kept"}); len(found) != 2 {
		t.Errorf("the active user's own data went too: only %v left", found)
	}
	if u := h.get("/v1/users/"+fxUser, testAPIKey); u.Code != http.StatusOK {
		t.Errorf("the user after the membership's erasure: %s", u)
	}
}

// TestEvents_TheLogFiltersByKindAndObject: kind, a Clerk type (which
// names its kind) and objectId select events through the router; a type
// of another kind than kind is a 400 naming eventType.
func TestEvents_TheLogFiltersByKindAndObject(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_kind", UpdatedAt: t0}))
	for _, f := range []string{"organizationMembership.created", "organization.created", "organizationMembership.updated"} {
		h.mustDeliver(newID(), fixture(t, "openapi."+f+".json"))
	}
	types := func(path string) []string {
		var got []string
		for _, ev := range h.list(path, testAdminKey) {
			got = append(got, ev["type"].(string))
		}
		return got
	}
	for path, want := range map[string][]string{
		"/v1/events?kind=membership":                   {"organizationMembership.updated", "organizationMembership.created"},
		"/v1/events?kind=user":                         {"user.created"},
		"/v1/events?eventType=organization.created":    {"organization.created"},
		"/v1/events?kind=membership&eventType=created": {"organizationMembership.created"},
		"/v1/events?objectId=" + fxMember:              {"organizationMembership.updated", "organizationMembership.created"},
		"/v1/events?objectId=" + fxOrg:                 {"organization.created"},
	} {
		if got := types(path); !slices.Equal(got, want) {
			t.Errorf("GET %s = %v, want %v", path, got, want)
		}
	}
	for _, path := range []string{"/v1/events?kind=user&eventType=organization.created", "/v1/events?kind=orgs"} {
		if r := h.get(path, testAdminKey); r.Code != http.StatusBadRequest {
			t.Errorf("GET %s = %s, want 400", path, r)
		}
	}
}
