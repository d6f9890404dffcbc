package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk/clerktest"
)

// clerkOrg is Clerk's organization fixture as its Backend API serves it,
// as orgID, with fn's changes.
func clerkOrg(t *testing.T, orgID string, fn func(data map[string]any)) json.RawMessage {
	t.Helper()
	var data json.RawMessage
	body := editFixture(t, "openapi.organization.updated.json", func(_, d map[string]any) {
		d["id"] = orgID
		if fn != nil {
			fn(d)
		}
	})
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	data = env.Data
	return data
}

func (h *harness) syncOrg(orgID, key string, query ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/organizations/"+orgID+"/sync"+strings.Join(query, ""), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return h.do(req)
}

func clerkOrgReads(reqs []clerktest.Request) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, "/v1/organizations/") {
			n++
		}
	}
	return n
}

func TestSyncOrganization_CreatesAnOrganizationTheWebhookHasNotDeliveredYet(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	fake.AddOrganization(clerkOrg(t, "org_new", nil))
	r := h.syncOrg("org_new", testAPIKey)
	if r.Code != http.StatusOK {
		t.Fatalf("POST sync = %s", r)
	}
	got := h.get("/v1/organizations/org_new", testAPIKey)
	if got.Code != http.StatusOK || !bytes.Equal(bytes.TrimSpace(r.Body), bytes.TrimSpace(got.Body)) {
		t.Errorf("POST sync answered %s, GET answers %s: want the same", r, got)
	}
	if o := r.JSON(t); o["name"] != "Acme Corp Updated" || o["membersCount"] != 3.0 || o["metadata"].(map[string]any)["department"] != "engineering" {
		t.Errorf("organization = %v, want Clerk's state", o)
	}
	if strings.Contains(string(r.Body), "ORG-123") {
		t.Errorf("the answer shows private_metadata: %s", r)
	}
	reqs := fake.Requests()
	if n := clerkOrgReads(reqs); n != 1 || reqs[0].IncludeMembersCount != "true" {
		t.Errorf("Clerk was asked %d times (include_members_count %q), want once, with the members' count", n, reqs[0].IncludeMembersCount)
	}
	// The webhook's organization.updated of the same state, arriving
	// later, changes nothing.
	before := h.get("/v1/organizations/org_new", testAPIKey).JSON(t)
	h.mustDeliver(newID(), editFixture(t, "openapi.organization.updated.json", func(_, d map[string]any) { d["id"] = "org_new" }))
	if after := h.get("/v1/organizations/org_new", testAPIKey).JSON(t); after["name"] != before["name"] || after["membersCount"] != before["membersCount"] {
		t.Errorf("after the webhook: %v, want %v", after, before)
	}
}

func TestSyncOrganization_AnIdNotOfClerksShapeNeverReachesClerk(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	fake.AddOrganization(clerkOrg(t, "org_acme", func(d map[string]any) { d["slug"] = "acme" }))
	// Clerk's GET /organizations/{id} takes a slug too: a slug is not sent.
	for _, id := range []string{"acme", "acme-corp-updated", "org_", "org_a.b", "org_a/b", "org_a?x=1", "..", "user_abc", "orgmem_abc", "org_" + strings.Repeat("a", 200)} {
		r := h.syncOrg(url.PathEscape(id), testAPIKey)
		if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, "orgId") {
			t.Errorf("POST sync of %q = %s, want 400 naming orgId", id, r)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("Clerk was asked %d times, want never", n)
	}
}

func TestSyncOrganization_AnOrganizationClerkDoesNotKnowIs404AndIsNotAskedAgainForAWhile(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	for i := range 20 {
		if r := h.syncOrg("org_unknown", testAPIKey); r.Code != http.StatusNotFound {
			t.Errorf("POST sync %d of an unknown organization = %s, want 404", i, r)
		}
	}
	if n := clerkOrgReads(fake.Requests()); n != 1 {
		t.Errorf("Clerk was asked %d times about one unknown organization, want once", n)
	}
	if n := h.countEvents(); n != 0 {
		t.Errorf("%d events written, want none", n)
	}
	if r := h.get("/v1/organizations/org_unknown?includeDeleted=true", testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("GET of the unknown organization = %s, want 404: nothing written", r)
	}
}

func TestSyncOrganization_ADeletedOrganizationChangesNothing(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	// Clerk still serves a state (say, the delete has not reached its API).
	fake.AddOrganization(clerkOrg(t, fxOrg, nil))
	h.mustDeliver(newID(), fixture(t, "openapi.organization.created.json"))
	h.mustDeliver(newID(), fixture(t, "openapi.organization.deleted.json"))
	events := h.countEvents()

	if r := h.syncOrg(fxOrg, testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("POST sync of a deleted organization = %s, want 404 as GET answers", r)
	}
	if r := h.syncOrg(fxOrg, testAPIKey, "?includeDeleted=true"); r.Code != http.StatusForbidden {
		t.Errorf("POST sync with includeDeleted and an API key = %s, want 403", r)
	}
	if r := h.syncOrg(fxOrg, testAdminKey, "?includeDeleted=true"); r.Code != http.StatusOK || r.JSON(t)["deletedAt"] == nil {
		t.Errorf("POST sync of a deleted organization by an admin with includeDeleted = %s, want the tombstone", r)
	}
	if n := h.countEvents(); n != events {
		t.Errorf("%d events, want %d: nothing stored", n, events)
	}
	if n := clerkOrgReads(fake.Requests()); n != 0 {
		t.Errorf("Clerk was asked %d times about a deleted organization, want never", n)
	}
}

func TestSyncOrganization_WithoutClerkSecretKeyIs501NamingIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.syncOrg("org_x", testAPIKey)
	if r.Code != http.StatusNotImplemented || !strings.Contains(string(r.Body), "CLERK_SECRET_KEY") ||
		!strings.Contains(string(r.Body), "not_configured") {
		t.Errorf("POST sync without a Clerk key = %s, want 501 not_configured naming CLERK_SECRET_KEY", r)
	}
	if r := h.syncOrg("org_x", "wrong"); r.Code != http.StatusUnauthorized {
		t.Errorf("POST sync with a wrong key = %s, want 401", r)
	}
}

func TestSyncOrganization_AnOrganizationClerkSendsThatCannotBeAppliedIs502(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		org  func(id string) string
		want int
	}{
		{"another organization", func(string) string { return `{"id":"org_other","updated_at":1760000000000}` }, http.StatusBadGateway},
		{"no updated_at", func(id string) string { return `{"id":"` + id + `"}` }, http.StatusBadGateway},
		{"metadata that is not an object", func(id string) string {
			return `{"id":"` + id + `","updated_at":1760000000000,"public_metadata":["a"]}`
		}, http.StatusBadGateway},
		// Not an answer of Clerk's API at all (CLERK_API_URL is wrong, say):
		// Clerk did not answer.
		{"not a JSON object", func(string) string { return `[]` }, http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, fake := syncHarness(t)
			fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.org(strings.TrimPrefix(r.Path, "/v1/organizations/"))))
				return http.StatusOK
			})
			r := h.syncOrg("org_odd", testAPIKey)
			if code, msg := errorOf(t, r); r.Code != tc.want || (tc.want == http.StatusBadGateway && (code != "bad_gateway" || !strings.Contains(msg, `"org_odd"`))) {
				t.Errorf("POST sync = %s, want %d (502: bad_gateway naming the organization)", r, tc.want)
			}
			if n := h.countEvents(); tc.want == http.StatusServiceUnavailable && n != 0 {
				t.Errorf("%d events stored, want none", n)
			}
		})
	}
}

func TestSyncOrganization_SharesTheKeysPlacesWithTheUsersRoute(t *testing.T) {
	t.Parallel()
	h, fake := syncHarnessWith(t, api.Limits{SyncsPerKey: 1}, clerkUser{ID: "user_held", UpdatedAt: t0})
	fake.AddOrganization(clerkOrg(t, "org_waiting", nil))
	entered, release := holdClerk(fake)
	done := make(chan int, 1)
	go func() { done <- h.syncUserAsync("user_held", testAPIKey) }()
	<-entered
	r := h.syncOrg("org_waiting", testAPIKey)
	if code, _ := errorOf(t, r); r.Code != http.StatusTooManyRequests || code != "too_many_requests" {
		t.Errorf("an organization's sync while the key's one place holds a user's = %s, want 429", r)
	}
	close(release)
	if c := <-done; c != http.StatusOK {
		t.Errorf("the held user's sync = %d, want 200", c)
	}
	if r := h.syncOrg("org_waiting", testAPIKey); r.Code != http.StatusOK {
		t.Errorf("the organization's sync once the place is free = %s, want 200", r)
	}
}

func TestSyncOrganization_AnInstanceWithOrganizationsTurnedOffIs404(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	fake.TurnOrganizationsOff()
	r := h.syncOrg("org_any", testAPIKey)
	if _, msg := errorOf(t, r); r.Code != http.StatusNotFound || !strings.Contains(msg, "turned off") {
		t.Errorf("POST sync with organizations off in Clerk = %s, want 404 saying they are turned off", r)
	}
	if n := h.countEvents(); n != 0 {
		t.Errorf("%d events written, want none", n)
	}
}
