package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestAPI_AQueryThatDoesNotDecodeOrRepeatsAParameterIs400(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_q", UpdatedAt: t0, Email: "q@example.com"}))
	h.mustDeliver(newID(), deleteBody(t, "user_q", t0+1000))
	tests := []struct {
		name, path, wantMsg string
	}{
		{"a bare percent in a value", "/v1/users?email=100%@example.com", `query parameter "email" is not valid percent-encoding`},
		{"a bad escape in a name", "/v1/users?e%zzmail=x", "a query parameter's name is not valid percent-encoding"},
		{"a repeated flag", "/v1/users?includeDeleted=false&includeDeleted=true", `query parameter "includeDeleted" is given more than once`},
		{"a repeated limit", "/v1/users?limit=1&limit=200", `query parameter "limit" is given more than once`},
		{"a repeated name, one escaped", "/v1/users?limit=1&l%69mit=2", `query parameter "limit" is given more than once`},
		{"a semicolon", "/v1/users?limit=1;includeDeleted=true", "semicolon"},
		{"a bad escape on events", "/v1/events?userId=user_%G1", `query parameter "userId" is not valid percent-encoding`},
		{"a repeated status on events", "/v1/events?status=failed&status=processed", `query parameter "status" is given more than once`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(tc.path, testAdminKey)
			if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("GET %s = %s, want 400 invalid_request saying %q", tc.path, r, tc.wantMsg)
			}
		})
	}
	// What decodes, once, is served as before.
	if r := h.get("/v1/users?includeDeleted=true&email=q%40example.com", testAdminKey); r.Code != http.StatusOK {
		t.Errorf("a clean query = %s, want 200", r)
	}
}

// An application that interpolates a missing value sends ?email=: that
// must not answer every user.
func TestAPI_AnEmptyFilterIs400NamingItAndAnEmptyCursorIsTheFirstPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_e1", UpdatedAt: t0, Email: "e1@example.com"}))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_e2", UpdatedAt: t0, Email: "e2@example.com"}))
	for _, tc := range []struct{ path, param string }{
		{"/v1/users?email=", "email"},
		{"/v1/users?updatedSince=", "updatedSince"},
		{"/v1/organizations?slug=", "slug"},
		{"/v1/organizations?updatedSince=", "updatedSince"},
		{"/v1/events?userId=", "userId"},
		{"/v1/events?objectId=", "objectId"},
		{"/v1/events?eventType=", "eventType"},
		{"/v1/events?kind=", "kind"},
		{"/v1/events?status=", "status"},
		{"/v1/events?status=failed&userId=", "userId"},
		{"/v1/memberships?updatedSince=", "updatedSince"},
	} {
		r := h.get(tc.path, testAdminKey)
		code, msg := errorOf(t, r)
		if r.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, `"`+tc.param+`" is empty`) {
			t.Errorf("GET %s = %s, want 400 naming %s", tc.path, r, tc.param)
		}
	}
	for _, path := range []string{"/v1/users?cursor=", "/v1/users?limit=1&cursor="} {
		r := h.get(path, testAPIKey)
		if r.Code != http.StatusOK {
			t.Fatalf("GET %s = %s, want the first page", path, r)
		}
		if data := r.JSON(t)["data"].([]any); len(data) == 0 || data[0].(map[string]any)["userId"] != "user_e1" {
			t.Errorf("GET %s = %s, want the first page", path, r)
		}
	}
}

func TestAPI_ABadCursorIs400SayingSo(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/v1/users?cursor=zz", "/v1/events?cursor=nonsense", "/v1/users?updatedSince=2026-01-01T00:00:00Z&cursor=nonsense"} {
		r := h.get(path, testAdminKey)
		if code, msg := errorOf(t, r); r.Code != http.StatusBadRequest || code != "invalid_request" || msg != "cursor is not one this API returned" {
			t.Errorf("GET %s = %s, want 400 saying the cursor is not one this API returned", path, r)
		}
	}
}
