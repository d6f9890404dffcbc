package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestAPI_AQueryThatDoesNotDecodeOrRepeatsAParameterIs400(t *testing.T) {
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
