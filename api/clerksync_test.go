package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// syncHarness is a server whose POST /v1/users/{userId}/sync reads from a
// fake Clerk with the given users.
func syncHarness(t *testing.T, users ...clerkUser) (*harness, *clerktest.Server) {
	t.Helper()
	return syncHarnessWith(t, api.Limits{}, users...)
}

// syncHarnessWith is syncHarness with limits.
func syncHarnessWith(t *testing.T, limits api.Limits, users ...clerkUser) (*harness, *clerktest.Server) {
	t.Helper()
	var raws []json.RawMessage
	for _, u := range users {
		raws = append(raws, clerkData(t, u))
	}
	fake := clerktest.New(t, raws)
	cl, err := clerk.New(fake.URL, "sk_test_syncKey")
	if err != nil {
		t.Fatal(err)
	}
	store := repotest.NewStore(t)
	svc := sync.New(store.Events(), store, nil)
	e, err := api.New(api.Config{
		Sync: svc, Users: store.Users(), Organizations: store.Organizations(), Memberships: store.Memberships(),
		Events: store.Events(), DB: store, Logger: repotest.Discard(),
		WebhookSecrets: []string{testSecret}, APIKeys: []string{testAPIKey}, AdminKeys: []string{testAdminKey},
		ClerkSync: &sync.Fetcher{Service: svc, Clerk: cl}, Limits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &harness{t: t, store: store, url: srv.URL}, fake
}

// clerkData is u as Clerk's Backend API serves it: the data of a webhook.
func clerkData(t testing.TB, u clerkUser) json.RawMessage {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(userBody(t, "user.updated", u), &env); err != nil {
		t.Fatal(err)
	}
	return env.Data
}

func (h *harness) syncUser(userID, key string, query ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/users/"+userID+"/sync"+strings.Join(query, ""), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return h.do(req)
}

func clerkUserReads(reqs []clerktest.Request) int {
	n := 0
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, "/v1/users/") {
			n++
		}
	}
	return n
}

func TestSyncUser_CreatesAUserTheWebhookHasNotDeliveredYet(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t, clerkUser{ID: "user_signup", UpdatedAt: 1_760_000_000_000, Email: "New@Example.org", First: "New", Last: "Person"})
	r := h.syncUser("user_signup", testAPIKey)
	if r.Code != http.StatusOK {
		t.Fatalf("POST sync = %s", r)
	}
	got := h.get("/v1/users/user_signup", testAPIKey)
	if got.Code != http.StatusOK || !bytes.Equal(bytes.TrimSpace(r.Body), bytes.TrimSpace(got.Body)) {
		t.Errorf("POST sync answered %s, GET answers %s: want the same", r, got)
	}
	if u := r.JSON(t); u["email"] != "new@example.org" || u["displayName"] != "New Person" {
		t.Errorf("user = %v, want Clerk's state", u)
	}
	if n := clerkUserReads(fake.Requests()); n != 1 {
		t.Errorf("Clerk was asked %d times, want once", n)
	}
	// The webhook's user.created, arriving later, changes nothing.
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_signup", UpdatedAt: 1_760_000_000_000, Email: "New@Example.org", First: "New", Last: "Person"}))
	if u := h.user("user_signup"); u["displayName"] != "New Person" {
		t.Errorf("after the webhook: %v", u)
	}
}

func TestSyncUser_AUserClerkDoesNotKnowIs404AndChangesNothing(t *testing.T) {
	t.Parallel()
	h, _ := syncHarness(t)
	r := h.syncUser("user_unknown", testAPIKey)
	if r.Code != http.StatusNotFound {
		t.Errorf("POST sync of an unknown user = %s, want 404", r)
	}
	if n := h.countUsers() + h.countEvents(); n != 0 {
		t.Errorf("%d documents written, want none", n)
	}
}

func TestSyncUser_ADeletedUserChangesNothing(t *testing.T) {
	t.Parallel()
	u := clerkUser{ID: "user_gone", UpdatedAt: 1_760_000_000_000, Email: "gone@example.org", First: "Gone"}
	// Clerk still serves a state (say, the delete has not reached its list).
	h, fake := syncHarness(t, u)
	h.mustDeliver(newID(), userBody(t, "user.created", u))
	h.mustDeliver(newID(), deleteBody(t, "user_gone", u.UpdatedAt+1000))
	before := h.user("user_gone")
	events := h.countEvents()

	if r := h.syncUser("user_gone", testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("POST sync of a deleted user = %s, want 404 as GET answers", r)
	}
	if r := h.syncUser("user_gone", testAdminKey, "?includeDeleted=true"); r.Code != http.StatusOK || r.JSON(t)["deletedAt"] == nil {
		t.Errorf("POST sync of a deleted user by an admin with includeDeleted = %s, want the tombstone", r)
	}
	after := h.user("user_gone")
	if after["deletedAt"] == nil || after["updatedAt"] != before["updatedAt"] {
		t.Errorf("user after sync = %v, want it unchanged (%v)", after, before)
	}
	if n := h.countEvents(); n != events {
		t.Errorf("%d events, want %d: nothing stored", n, events)
	}
	if n := clerkUserReads(fake.Requests()); n != 0 {
		t.Errorf("Clerk was asked %d times about a deleted user, want never", n)
	}
}

func TestSyncUser_NeverOverwritesANewerState(t *testing.T) {
	t.Parallel()
	old := clerkUser{ID: "user_race", UpdatedAt: 1_760_000_000_000, Email: "race@example.org", First: "Old"}
	h, _ := syncHarness(t, old)
	newer := old
	newer.UpdatedAt, newer.First = old.UpdatedAt+5000, "Newer"
	h.mustDeliver(newID(), userBody(t, "user.updated", newer))
	r := h.syncUser("user_race", testAPIKey)
	if r.Code != http.StatusOK || r.JSON(t)["displayName"] != "Newer" {
		t.Errorf("POST sync = %s, want the newer state kept", r)
	}
}

func TestSyncUser_WithoutClerkSecretKeyIs501NamingIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.syncUser("user_x", testAPIKey)
	if r.Code != http.StatusNotImplemented || !strings.Contains(string(r.Body), "CLERK_SECRET_KEY") ||
		!strings.Contains(string(r.Body), "not_configured") {
		t.Errorf("POST sync without a Clerk key = %s, want 501 not_configured naming CLERK_SECRET_KEY", r)
	}
	if r := h.syncUser("user_x", "wrong"); r.Code != http.StatusUnauthorized {
		t.Errorf("POST sync with a wrong key = %s, want 401", r)
	}
}

func TestSyncUser_ClerkDownIs503(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t, clerkUser{ID: "user_down", UpdatedAt: 1_760_000_000_000})
	fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		http.Error(w, `{"errors":[{"code":"unauthorized"}]}`, http.StatusUnauthorized)
		return http.StatusUnauthorized
	})
	if r := h.syncUser("user_down", testAPIKey); r.Code != http.StatusServiceUnavailable || strings.Contains(string(r.Body), "sk_test_syncKey") {
		t.Errorf("POST sync while Clerk refuses = %s, want 503 without the key", r)
	}
}
