package api_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestAPI_AWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tests := []struct {
		method, path, key string
		allow             []string
	}{
		{http.MethodDelete, "/v1/users", testAPIKey, []string{"GET"}},
		{http.MethodPost, "/v1/users", "", []string{"GET"}}, // no key: the method is wrong whoever asks
		{http.MethodPut, "/v1/users/user_1", testAPIKey, []string{"GET"}},
		{http.MethodGet, "/v1/users/user_1/sync", testAPIKey, []string{"POST"}},
		{http.MethodGet, "/v1/users/user_1/erase", testAdminKey, []string{"POST"}},
		{http.MethodPost, "/v1/events", testAdminKey, []string{"GET"}},
		{http.MethodDelete, "/v1/events/msg_1", testAdminKey, []string{"GET"}},
		{http.MethodGet, "/v1/events/msg_1/replay", testAdminKey, []string{"POST"}},
		{http.MethodGet, "/webhooks/clerk", "", []string{"POST"}},
		{http.MethodPut, "/webhooks/clerk/", "", []string{"POST"}},
	}
	for _, tc := range tests {
		req, err := http.NewRequest(tc.method, h.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		r := h.do(req)
		code, _ := errorOf(t, r)
		allow := r.Header.Get("Allow")
		if r.Code != http.StatusMethodNotAllowed || code != "method_not_allowed" {
			t.Errorf("%s %s = %s, want 405 method_not_allowed", tc.method, tc.path, r)
		}
		for _, m := range tc.allow {
			if !strings.Contains(allow, m) {
				t.Errorf("%s %s: Allow = %q, want %s in it", tc.method, tc.path, allow, m)
			}
		}
	}
	// A path that is not a route is still 404, and a route still needs its key.
	if r := h.get("/v1/nothing", testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("GET /v1/nothing = %s, want 404", r)
	}
	if r := h.get("/v1/users", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("GET /v1/users without a key = %s, want 401", r)
	}
	if r := h.get("/v1/events", testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("GET /v1/events with an API key = %s, want 403", r)
	}
}
