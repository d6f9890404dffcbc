package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestUsers_PaginationReturnsEveryActiveUserExactlyOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const total, deleted, limit = 23, 4, 5
	for i := range total {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_p%02d", i), UpdatedAt: t0, Email: fmt.Sprintf("p%02d@example.com", i)}))
	}
	for i := range deleted {
		h.mustDeliver(newID(), deleteBody(t, fmt.Sprintf("user_p%02d", i*5), t0+1000))
	}
	list := func(key, query string) (seen map[string]int, pages int) {
		seen = map[string]int{}
		cursor := ""
		for {
			pages++
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if query != "" {
				q.Set("includeDeleted", "true")
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := h.get("/v1/users?"+q.Encode(), key)
			if r.Code != http.StatusOK {
				t.Fatalf("page %d: %s", pages, r)
			}
			body := r.JSON(t)
			data := body["data"].([]any)
			if len(data) > limit {
				t.Fatalf("page %d has %d users, limit %d", pages, len(data), limit)
			}
			for _, u := range data {
				u := u.(map[string]any)
				seen[u["userId"].(string)]++
				if query == "" && u["deletedAt"] != nil {
					t.Errorf("deleted user %v listed without includeDeleted", u["userId"])
				}
			}
			next, _ := body["nextCursor"].(string)
			if next == "" {
				return seen, pages
			}
			if pages > total {
				t.Fatal("pagination does not end")
			}
			cursor = next
		}
	}
	seen, pages := list(testAPIKey, "")
	if len(seen) != total-deleted || pages < 3 {
		t.Errorf("listed %d active users in %d pages, want %d in at least 3", len(seen), pages, total-deleted)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", id, n)
		}
	}
	all, _ := list(testAdminKey, "includeDeleted")
	if len(all) != total {
		t.Errorf("includeDeleted listed %d users, want %d", len(all), total)
	}
}

func TestUsers_EmailFilterFindsTheActiveUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_f1", UpdatedAt: t0, Email: "Find.Me@Example.com"}))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_f2", UpdatedAt: t0, Email: "other@example.com"}))
	r := h.get("/v1/users?email="+url.QueryEscape("find.me@EXAMPLE.com"), testAPIKey)
	data := r.JSON(t)["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["userId"] != "user_f1" {
		t.Errorf("email filter = %s, want user_f1 alone", r)
	}
}

func TestUsers_KeysAndAdminRights(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_k", UpdatedAt: t0}))
	h.mustDeliver(newID(), deleteBody(t, "user_k", t0+1))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_active", UpdatedAt: t0}))
	tests := []struct {
		path, key string
		want      int
		code      string
	}{
		{"/v1/users", "", 401, "unauthorized"},
		{"/v1/users", "nope", 401, "unauthorized"},
		{"/v1/users", testAPIKey, 200, ""},
		{"/v1/users?includeDeleted=true", testAPIKey, 403, "forbidden"},
		{"/v1/users?includeDeleted=true", testAdminKey, 200, ""},
		{"/v1/users/user_active", testAPIKey, 200, ""},
		{"/v1/users/user_k", testAPIKey, 404, "not_found"},
		{"/v1/users/user_k", testAdminKey, 404, "not_found"},
		{"/v1/users/user_k?includeDeleted=true", testAPIKey, 403, "forbidden"},
		{"/v1/users/user_k?includeDeleted=true", testAdminKey, 200, ""},
		{"/v1/users/user_nobody", testAPIKey, 404, "not_found"},
		{"/v1/users?limit=0", testAPIKey, 400, "invalid_request"},
		{"/v1/users?limit=201", testAPIKey, 400, "invalid_request"},
		{"/v1/users?limit=ten", testAPIKey, 400, "invalid_request"},
		{"/v1/users?includeDeleted=maybe", testAdminKey, 400, "invalid_request"},
		{"/v1/users?cursor=bogus", testAPIKey, 400, "invalid_request"},
		{"/v1/nothing", testAPIKey, 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.path+" "+tc.key, func(t *testing.T) {
			r := h.get(tc.path, tc.key)
			if r.Code != tc.want {
				t.Fatalf("GET %s = %s, want %d", tc.path, r, tc.want)
			}
			if tc.code == "" {
				return
			}
			e, _ := r.JSON(t)["error"].(map[string]any)
			if e == nil || e["code"] != tc.code || e["message"] == "" || e["requestId"] == "" {
				t.Errorf("error body = %s, want code %q with a message and request id", r.Body, tc.code)
			}
		})
	}
}

func TestUsers_ShapeIsTheDataModel(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "user.created.multi-email.json"))
	u := h.get("/v1/users/user_2SS3GNsVEHibIcFNY6OA4j9lef2", testAPIKey).JSON(t)
	fields := []string{"userId", "email", "displayName", "metadata",
		"firstName", "lastName", "username", "imageUrl", "phoneNumber", "externalId", "lastSignInAt", "lastActiveAt", "banned", "locked",
		"deprovisioned", "sourceCreatedAt", "createdAt", "updatedAt", "deletedAt"}
	for _, k := range fields {
		if _, ok := u[k]; !ok {
			t.Errorf("user has no %q: %v", k, u)
		}
	}
	if len(u) != len(fields) {
		t.Errorf("user has fields %v, want exactly the data model's", u)
	}
	for _, k := range []string{"createdAt", "updatedAt"} {
		if s, _ := u[k].(string); len(s) != len("2006-01-02T15:04:05.000Z") || s[len(s)-1] != 'Z' {
			t.Errorf("%s = %q, want RFC 3339 UTC with milliseconds", k, u[k])
		}
	}
}

func TestHealth_HealthzAndReadyz(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := h.get(path, ""); r.Code != http.StatusOK {
			t.Errorf("GET %s = %s", path, r)
		}
	}
}

// TestUsers_LookAlikeEmailDoesNotTakeTheOwners: an address written with a
// letter that Unicode folds to an ASCII one (the Kelvin sign K, U+212A;
// İ, U+0130) is another address: a newer user holding it does not take
// the email of the user who holds the plain one, and the email filter
// finds the owner alone.
func TestUsers_LookAlikeEmailDoesNotTakeTheOwners(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i, c := range []struct{ owner, lookAlike, stored string }{
		{"Kate@example.com", "\u212Aate@example.com", "\u212Aate@example.com"},
		{"istanbul@example.com", "\u0130stanbul@example.com", "\u0130stanbul@example.com"},
	} {
		owner, other := fmt.Sprintf("user_owner%d", i), fmt.Sprintf("user_lookalike%d", i)
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: owner, UpdatedAt: t0, Email: c.owner}))
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: other, UpdatedAt: t0 + 1000, Email: c.lookAlike}))
		plain := strings.ToLower(c.owner)
		if got := h.user(owner)["email"]; got != plain {
			t.Errorf("%s after the look-alike %q: email %v, want %q", owner, c.lookAlike, got, plain)
		}
		if got := h.user(other)["email"]; got != c.stored {
			t.Errorf("%s: email %v, want %q as written", other, got, c.stored)
		}
		for filter, want := range map[string]string{plain: owner, strings.ToUpper(plain): owner, c.lookAlike: other} {
			r := h.get("/v1/users?email="+url.QueryEscape(filter), testAPIKey)
			data := r.JSON(t)["data"].([]any)
			if len(data) != 1 || data[0].(map[string]any)["userId"] != want {
				t.Errorf("email filter %q = %s, want %s alone", filter, r, want)
			}
		}
	}
}

// A user's JSON has Clerk's creation time (sourceCreatedAt, from the
// payload, as organizations and memberships have it) apart from usersync's
// first write (createdAt); a tombstone has none of Clerk's data.
func TestUsers_SourceCreatedAtIsClerksCreationTimeAndCreatedAtUsersyncsFirstWrite(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	before := time.Now().UTC().Add(-time.Second)
	h.mustDeliver(newID(), fixture(t, "user.created.json")) // created_at 1654012591514
	u := h.user("user_29w83sxmDNGwOuEthce5gg56FcC")
	if u["sourceCreatedAt"] != "2022-05-31T15:56:31.514Z" {
		t.Errorf("sourceCreatedAt = %v, want Clerk's created_at 2022-05-31T15:56:31.514Z", u["sourceCreatedAt"])
	}
	if created, err := time.Parse(time.RFC3339, fmt.Sprint(u["createdAt"])); err != nil || created.Before(before) {
		t.Errorf("createdAt = %v, want usersync's first write (now)", u["createdAt"])
	}
	// A state without created_at, and the tombstone: null.
	var env map[string]any
	if err := json.Unmarshal(userBody(t, "user.created", clerkUser{ID: "user_nocreated", UpdatedAt: t0}), &env); err != nil {
		t.Fatal(err)
	}
	delete(env["data"].(map[string]any), "created_at")
	body, _ := json.Marshal(env)
	h.mustDeliver(newID(), body)
	if u := h.user("user_nocreated"); u["sourceCreatedAt"] != nil {
		t.Errorf("a state without created_at: sourceCreatedAt = %v, want null", u["sourceCreatedAt"])
	}
	h.mustDeliver(newID(), deleteBody(t, "user_29w83sxmDNGwOuEthce5gg56FcC", time.Now().UnixMilli()))
	if u := h.user("user_29w83sxmDNGwOuEthce5gg56FcC"); u["sourceCreatedAt"] != nil {
		t.Errorf("a tombstone: sourceCreatedAt = %v, want null", u["sourceCreatedAt"])
	}
}
