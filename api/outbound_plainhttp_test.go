package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestEndpoints_APublicAddressOnPlainHTTPIsRefusedUnlessAllowed: a new
// endpoint on http:// to a public address is refused, naming the setting
// that allows it; https, a loopback address (allowed as private) and a
// name (judged where it is dialled) are registered, and with
// USERSYNC_ENDPOINTS_ALLOW_HTTP the public address is too.
func TestEndpoints_APublicAddressOnPlainHTTPIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "http://93.184.216.34/hooks"}`)
	if r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), "USERSYNC_ENDPOINTS_ALLOW_HTTP") {
		t.Errorf("a public address on plain http: %s, want 400 naming the setting", r)
	}
	for _, url := range []string{"https://93.184.216.34/hooks", "http://127.0.0.1:9/hooks", "http://hooks.example.com/in"} {
		r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "`+url+`"}`)
		if r.Code != http.StatusCreated || r.JSON(t)["plainHttpKept"] != false {
			t.Errorf("%s: %s, want 201, not kept on plain http", url, r)
		}
	}
	open := newHarness(t, func(o *harnessOptions) { o.outbound, o.allowHTTP = true, true })
	if r := open.send(http.MethodPost, "/v1/endpoints", `{"url": "http://93.184.216.34/hooks"}`); r.Code != http.StatusCreated {
		t.Errorf("a public address on plain http, allowed: %s, want 201", r)
	}
}

// TestEndpoints_AnEndpointStoredOnPlainHTTPKeepsWorkingUntilItsURLChanges:
// an endpoint whose http:// URL was stored before plain http was judged,
// or that the endpoints file gives, is shown as kept on plain http, and
// can be changed and enabled; a new URL is judged as any.
func TestEndpoints_AnEndpointStoredOnPlainHTTPKeepsWorkingUntilItsURLChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, e := range []models.Endpoint{
		{ID: "ep_old", URL: "http://93.184.216.34/hooks", Secret: testSecret, Enabled: true, LegacyURL: true, CreatedAt: now, UpdatedAt: now},
		{ID: "cfg_crm", URL: "http://crm.example.com/hooks", Secret: testSecret, Enabled: true, FromConfig: true, CreatedAt: now, UpdatedAt: now},
	} {
		if err := h.store.Outbound().CreateEndpoint(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"ep_old", "cfg_crm"} {
		if r := h.send(http.MethodGet, "/v1/endpoints/"+id, ""); r.Code != http.StatusOK || r.JSON(t)["plainHttpKept"] != true {
			t.Errorf("GET %s: %s, want it kept on plain http", id, r)
		}
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/ep_old", `{"enabled": false}`); r.Code != http.StatusOK {
		t.Errorf("disabling it: %s, want 200", r)
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/ep_old", `{"enabled": true, "description": "the CRM"}`); r.Code != http.StatusOK {
		t.Errorf("enabling it: %s, want 200", r)
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/ep_old", `{"url": "http://93.184.216.35/hooks"}`); r.Code != http.StatusBadRequest {
		t.Errorf("a new public address on plain http: %s, want 400", r)
	}
	r := h.send(http.MethodPatch, "/v1/endpoints/ep_old", `{"url": "https://93.184.216.34/hooks"}`)
	if r.Code != http.StatusOK || r.JSON(t)["plainHttpKept"] != false {
		t.Errorf("moving it to https: %s, want 200, no longer kept", r)
	}
	if e, err := h.store.Outbound().Endpoint(ctx, "ep_old"); err != nil || e.LegacyURL {
		t.Errorf("after its URL changed: %+v, %v; want it no longer legacy", e, err)
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/ep_old", `{"url": "http://93.184.216.34/hooks"}`); r.Code != http.StatusBadRequest {
		t.Errorf("back to plain http: %s, want 400: the URL is judged as a new one", r)
	}
}
