package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk/clerktest"
)

func TestSyncUser_AnIdNotOfClerksShapeNeverReachesClerk(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	for _, id := range []string{".", "..", "user_..", "user_a.b", "user_a/b", "user_a?x=1", "user_", "nope_123", "user_a b", "user_" + strings.Repeat("a", 200)} {
		r := h.syncUser(url.PathEscape(id), testAPIKey)
		if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, "userId") {
			t.Errorf("POST sync of %q = %s, want 400 naming userId", id, r)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("Clerk was asked %d times, want never", n)
	}
}

func TestSyncUser_AnIdClerkDoesNotKnowIsNotAskedAgainForAWhile(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t)
	for i := range 20 {
		if r := h.syncUser("user_unknown", testAPIKey); r.Code != http.StatusNotFound {
			t.Errorf("POST sync %d of an unknown user = %s, want 404", i, r)
		}
	}
	if n := clerkUserReads(fake.Requests()); n != 1 {
		t.Errorf("Clerk was asked %d times about one unknown user, want once", n)
	}
}

// holdClerk makes the fake Clerk hold every read of a user until the
// reader gives it up or release is closed; entered gets each read's path.
func holdClerk(fake *clerktest.Server) (entered chan string, release chan struct{}) {
	entered, release = make(chan string, 100), make(chan struct{})
	fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		entered <- r.Path
		select {
		case <-r.Done:
			return http.StatusGatewayTimeout
		case <-release:
			return 0
		}
	})
	return entered, release
}

func TestSyncUser_ACallerThatLeavesStopsTheReadFromClerk(t *testing.T) {
	t.Parallel()
	h, fake := syncHarness(t, clerkUser{ID: "user_slow", UpdatedAt: t0})
	entered, done := make(chan string, 1), make(chan struct{})
	fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		entered <- r.Path
		<-r.Done
		close(done)
		return http.StatusGatewayTimeout
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/users/user_slow/sync", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	cancel() // the caller leaves
	select {
	case <-done:
	case <-time.After(20 * time.Second): // Clerk's own read would go on for 30 s
		t.Fatal("the read from Clerk went on after its only caller had left")
	}
}

func TestSyncUser_OneKeyHasABoundedNumberOfSyncsInFlight(t *testing.T) {
	t.Parallel()
	const perKey = 3
	var users []clerkUser
	for i := range perKey + 2 {
		users = append(users, clerkUser{ID: fmt.Sprintf("user_held%d", i), UpdatedAt: t0})
	}
	h, fake := syncHarnessWith(t, api.Limits{SyncsPerKey: perKey}, users...)
	entered, release := holdClerk(fake)
	codes := make(chan int, perKey+1)
	for i := range perKey {
		go func() { codes <- h.syncUserAsync(fmt.Sprintf("user_held%d", i), testAPIKey) }()
	}
	for range perKey {
		<-entered
	}
	r := h.syncUser(fmt.Sprintf("user_held%d", perKey), testAPIKey)
	if code, _ := errorOf(t, r); r.Code != http.StatusTooManyRequests || code != "too_many_requests" || r.Header.Get("Retry-After") == "" {
		t.Errorf("a sync beyond the key's %d = %s, want 429 too_many_requests with Retry-After", perKey, r)
	}
	// Another key has its own places.
	go func() { codes <- h.syncUserAsync(fmt.Sprintf("user_held%d", perKey+1), testAdminKey) }()
	<-entered
	close(release)
	for range perKey + 1 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("a held sync = %d, want 200", c)
		}
	}
	if r := h.syncUser(fmt.Sprintf("user_held%d", perKey), testAPIKey); r.Code != http.StatusOK {
		t.Errorf("the refused sync, again once the others are done = %s, want 200", r)
	}
}

// syncUserAsync is syncUser for another goroutine: it returns the status.
func (h *harness) syncUserAsync(userID, key string) int {
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/users/"+userID+"/sync", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestSyncUser_AUserClerkSendsThatCannotBeAppliedIs502(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		user func(id string) string
	}{
		{"another user", func(string) string { return `{"id":"user_other","updated_at":1760000000000}` }},
		{"no updated_at", func(id string) string { return `{"id":"` + id + `"}` }},
		{"metadata over 64 KiB", func(id string) string {
			pad, _ := json.Marshal(strings.Repeat("x", 70_000))
			return `{"id":"` + id + `","updated_at":1760000000000,"public_metadata":{"pad":` + string(pad) + `}}`
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, fake := syncHarness(t)
			fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.user(strings.TrimPrefix(r.Path, "/v1/users/"))))
				return http.StatusOK
			})
			r := h.syncUser("user_odd", testAPIKey)
			if code, msg := errorOf(t, r); r.Code != http.StatusBadGateway || code != "bad_gateway" || !strings.Contains(msg, `"user_odd"`) {
				t.Errorf("POST sync = %s, want 502 bad_gateway naming the user", r)
			}
		})
	}
}
