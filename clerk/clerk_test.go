package clerk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
)

const testKey = "sk_test_clerkClientKey"

func newClient(t *testing.T, users ...string) (*Client, *clerktest.Server) {
	t.Helper()
	var raws []json.RawMessage
	for _, id := range users {
		raws = append(raws, json.RawMessage(`{"id":"`+id+`","updated_at":1760000000000}`))
	}
	fake := clerktest.New(t, raws)
	c, err := New(fake.URL, testKey)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry.Backoff = time.Millisecond
	return c, fake
}

func TestGetUser_AnswersAUserOr404AsNotFound(t *testing.T) {
	c, fake := newClient(t, "user_a")
	ctx := context.Background()
	raw, err := c.GetUser(ctx, "user_a")
	if err != nil || string(raw) != `{"id":"user_a","updated_at":1760000000000}` {
		t.Errorf("GetUser(user_a) = %s, %v; want the user as served", raw, err)
	}
	if _, err := c.GetUser(ctx, "user_b"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("GetUser(user_b) = %v, want not found", err)
	}
	for _, id := range []string{"", "user_a/../x", "user_?x", "..", ".", "user_..", "user_a.b", "user_", "nope_a", "user_a%2Fb"} {
		if _, err := c.GetUser(ctx, id); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("GetUser(%q) = %v, want invalid", id, err)
		}
	}
	if got := len(fake.Requests()); got != 2 {
		t.Errorf("%d requests, want 2 (none for ids that are not ids)", got)
	}
}

func TestGetUser_RetriesA500AndWaitsOutA429(t *testing.T) {
	c, fake := newClient(t, "user_a")
	fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		switch before {
		case 0:
			http.Error(w, "{}", http.StatusInternalServerError)
			return http.StatusInternalServerError
		case 1:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "{}", http.StatusTooManyRequests)
			return http.StatusTooManyRequests
		}
		return 0
	})
	var retries []Retry
	c.OnRetry = func(r Retry) { retries = append(retries, r) }
	if _, err := c.GetUser(context.Background(), "user_a"); err != nil {
		t.Fatalf("GetUser = %v, want the user after a 500 and a 429", err)
	}
	if len(retries) != 2 || retries[0].Throttled || !retries[1].Throttled || retries[1].Wait != 0 || retries[0].What != "user user_a" {
		t.Errorf("retries = %+v, want a retry after the 500, then the 429's Retry-After of 0", retries)
	}
}

func TestGetUser_ConcurrentCallsForOneUserMakeOneRequest(t *testing.T) {
	c, fake := newClient(t, "user_a")
	const callers = 8
	var joined stdsync.WaitGroup
	joined.Add(callers - 1)
	c.flight.joined = joined.Done
	release := make(chan struct{})
	fake.SetAnswer(func(http.ResponseWriter, clerktest.Request, int) int {
		<-release // hold the first read until every caller waits on it
		return 0
	})
	var wg stdsync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := c.GetUser(context.Background(), "user_a")
			errs <- err
		})
	}
	joined.Wait()
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests to Clerk for %d concurrent calls, want 1", n, callers)
	}
}

func TestLimiter_AllowsItsBurstThenMakesCallersWait(t *testing.T) {
	l := NewLimiter(3, time.Hour)
	for i := range 3 {
		if err := l.Wait(context.Background()); err != nil {
			t.Fatalf("Wait %d = %v, want a token of the burst", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The next token is 20 minutes away: longer than the caller waits,
	// which is told at once, not after a minute.
	if err := l.Wait(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("Wait beyond the burst = %v (context: %v), want an error before the deadline", err, ctx.Err())
	}
}

func TestGetUser_AReadEveryCallerLeftIsCancelled(t *testing.T) {
	c, fake := newClient(t, "user_a")
	entered, cancelled := make(chan struct{}, 2), make(chan struct{}, 2)
	fake.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		entered <- struct{}{}
		<-r.Done // Clerk is slow: the read waits until it is given up
		cancelled <- struct{}{}
		return http.StatusGatewayTimeout
	})
	var joined stdsync.WaitGroup
	joined.Add(1)
	c.flight.joined = joined.Done
	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { _, err := c.GetUser(ctx1, "user_a"); errs <- err }()
	<-entered
	go func() { _, err := c.GetUser(ctx2, "user_a"); errs <- err }()
	joined.Wait()
	cancel1() // one caller leaves: the read goes on for the other
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("GetUser of the caller who left = %v, want canceled", err)
	}
	select {
	case <-cancelled:
		t.Fatal("the read was cancelled while a caller still waited")
	default:
	}
	cancel2() // the last one leaves: the read stops
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the read went on after every caller had left")
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("GetUser of the last caller = %v, want canceled", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests to Clerk, want 1", n)
	}
}

func TestNew_RefusesToSendTheKeyUnencrypted(t *testing.T) {
	for _, tc := range []struct{ url, key, want string }{
		{"https://api.clerk.com/v1", "", "CLERK_SECRET_KEY"},
		{"http://api.clerk.com/v1", testKey, "CLERK_API_URL"},
		{"ftp://api.clerk.com/v1", testKey, "CLERK_API_URL"},
	} {
		if _, err := New(tc.url, tc.key); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q) = %v, want an error naming %s", tc.url, err, tc.want)
		}
	}
}

func TestListOrganizationsAndMemberships_PageClerksDataListsInCreationOrder(t *testing.T) {
	c, fake := newClient(t)
	for i := range 3 {
		fake.AddOrganization(json.RawMessage(`{"id":"org_` + string(rune('a'+i)) + `","updated_at":1760000000000,"members_count":1}`))
	}
	fake.AddMembership(json.RawMessage(`{"id":"orgmem_a","updated_at":1760000000000,"organization":{"id":"org_a"},"public_user_data":{"user_id":"user_a"}}`))
	ctx := context.Background()
	orgs, err := c.ListOrganizations(ctx, 1, 2)
	if err != nil || len(orgs) != 2 || !strings.Contains(string(orgs[0]), `"org_b"`) {
		t.Fatalf("ListOrganizations(1, 2) = %s, %v; want org_b and org_c", orgs, err)
	}
	members, err := c.ListMemberships(ctx, 0, 500)
	if err != nil || len(members) != 1 {
		t.Fatalf("ListMemberships = %s, %v; want the membership", members, err)
	}
	for _, r := range fake.Requests() {
		if r.OrderBy != "+created_at" || (r.Path == "/v1/organizations" && r.IncludeMembersCount != "true") {
			t.Errorf("%s: order_by %q, include_members_count %q; want +created_at, and true for organizations", r.Path, r.OrderBy, r.IncludeMembersCount)
		}
	}
	if got, err := c.UserMemberships(ctx, "user_a", 0, 500); err != nil || len(got) != 1 {
		t.Errorf("UserMemberships(user_a) = %s, %v; want its membership", got, err)
	}
	if _, err := c.UserMemberships(ctx, "user_unknown", 0, 500); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("UserMemberships(user_unknown) = %v, want not found", err)
	}
}

func TestGetOrganization_AsksOnlyForAnOrganizationID(t *testing.T) {
	c, fake := newClient(t)
	fake.AddOrganization(json.RawMessage(`{"id":"org_a","slug":"acme","updated_at":1760000000000}`))
	ctx := context.Background()
	if raw, err := c.GetOrganization(ctx, "org_a"); err != nil || !strings.Contains(string(raw), `"org_a"`) {
		t.Errorf("GetOrganization(org_a) = %s, %v; want the organization", raw, err)
	}
	if _, err := c.GetOrganization(ctx, "org_b"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("GetOrganization(org_b) = %v, want not found", err)
	}
	// Clerk's route takes a slug too: a slug is not an id, and is not sent.
	for _, id := range []string{"acme", "org_", "org_a/../x", "user_a", "org_a.b"} {
		if _, err := c.GetOrganization(ctx, id); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("GetOrganization(%q) = %v, want invalid", id, err)
		}
	}
	if got := len(fake.Requests()); got != 2 {
		t.Errorf("%d requests, want 2", got)
	}
}

func TestListOrganizations_AnInstanceWithOrganizationsOffIsErrFeatureOff(t *testing.T) {
	c, fake := newClient(t, "user_a")
	fake.TurnOrganizationsOff()
	ctx := context.Background()
	if _, err := c.ListOrganizations(ctx, 0, 10); !errors.Is(err, models.ErrFeatureOff) {
		t.Errorf("ListOrganizations = %v, want ErrFeatureOff", err)
	}
	if _, err := c.GetOrganization(ctx, "org_a"); !errors.Is(err, models.ErrFeatureOff) {
		t.Errorf("GetOrganization = %v, want ErrFeatureOff", err)
	}
	// Any other 403 is a key's problem, not a feature turned off.
	fake.SetAnswer(func(w http.ResponseWriter, _ clerktest.Request, _ int) int {
		http.Error(w, `{"errors":[{"code":"authorization_invalid"}]}`, http.StatusForbidden)
		return http.StatusForbidden
	})
	if _, err := c.ListUsers(ctx, 0, 10); err == nil || errors.Is(err, models.ErrFeatureOff) || !strings.Contains(err.Error(), "CLERK_SECRET_KEY") {
		t.Errorf("ListUsers after a 403 = %v, want an error naming CLERK_SECRET_KEY", err)
	}
}

func TestListSubscriptionItems_PagesNewestFirstFreeOnesIncluded(t *testing.T) {
	c, fake := newClient(t)
	fake.SetSubscriptionItems([]json.RawMessage{
		json.RawMessage(`{"id":"csub_item_c","updated_at":3,"plan":{"amount":5000}}`),
		json.RawMessage(`{"id":"csub_item_b","updated_at":2,"plan":{"amount":0}}`),
		json.RawMessage(`{"id":"csub_item_a","updated_at":1,"plan":{"amount":2000}}`),
	})
	ctx := context.Background()
	items, err := c.ListSubscriptionItems(ctx, 1, 2)
	if err != nil || len(items) != 2 || !strings.Contains(string(items[0]), `"csub_item_b"`) {
		t.Fatalf("ListSubscriptionItems(1, 2) = %s, %v; want csub_item_b (free) and csub_item_a", items, err)
	}
	for _, r := range fake.Requests() {
		if r.Path != "/v1/billing/subscription_items" || r.IncludeFree != "true" || r.OrderBy != "" {
			t.Errorf("%s: include_free %q, order_by %q; want the items' list, true, none", r.Path, r.IncludeFree, r.OrderBy)
		}
	}
}

func TestListSubscriptionItems_AnInstanceWithoutBillingIsErrFeatureOff(t *testing.T) {
	c, fake := newClient(t, "user_a")
	fake.TurnBillingOff() // a 404
	ctx := context.Background()
	if _, err := c.ListSubscriptionItems(ctx, 0, 10); !errors.Is(err, models.ErrFeatureOff) || errors.Is(err, models.ErrNotFound) {
		t.Errorf("ListSubscriptionItems = %v, want ErrFeatureOff", err)
	}
	answer := func(code string) {
		fake.SetAnswer(func(w http.ResponseWriter, _ clerktest.Request, _ int) int {
			http.Error(w, `{"errors":[{"code":"`+code+`"}]}`, http.StatusForbidden)
			return http.StatusForbidden
		})
	}
	answer("billing_not_enabled_in_instance")
	if _, err := c.ListSubscriptionItems(ctx, 0, 10); !errors.Is(err, models.ErrFeatureOff) {
		t.Errorf("ListSubscriptionItems after a 403 of Billing = %v, want ErrFeatureOff", err)
	}
	// Any other 403 is a key's problem, not Billing turned off.
	answer("authorization_invalid")
	if _, err := c.ListSubscriptionItems(ctx, 0, 10); err == nil || errors.Is(err, models.ErrFeatureOff) || !strings.Contains(err.Error(), "CLERK_SECRET_KEY") {
		t.Errorf("ListSubscriptionItems after a 403 = %v, want an error naming CLERK_SECRET_KEY", err)
	}
	// A 404 of another route is not Billing's.
	fake.SetAnswer(nil)
	if _, err := c.GetUser(ctx, "user_b"); !errors.Is(err, models.ErrNotFound) || errors.Is(err, models.ErrFeatureOff) {
		t.Errorf("GetUser(user_b) = %v, want not found", err)
	}
}
