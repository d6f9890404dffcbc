package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
)

// message is one outbound webhook a receiver verified and recorded.
type message struct {
	ID      string
	Body    []byte          // as it arrived
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
	Changed []string        `json:"changed"`
	Origin  string          `json:"origin"`
}

// appReceiver is an app's endpoint on loopback: it verifies every
// message with svix's own library and the secrets it was given, and
// records it.
type appReceiver struct {
	t       *testing.T
	url     string
	mu      stdsync.Mutex
	secrets []string
	got     []message
	status  int // what it answers; 0: 204
}

func newAppReceiver(t *testing.T) *appReceiver {
	r := &appReceiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.secrets) == 0 {
			t.Error("a message came before the receiver knew its secret")
		}
		for _, s := range r.secrets {
			wh, err := svix.NewWebhook(s)
			if err != nil {
				t.Error(err)
			} else if err := wh.Verify(body, req.Header); err != nil {
				t.Errorf("a message does not verify: %v", err)
			}
		}
		var m message
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		m.ID, m.Body = req.Header.Get("webhook-id"), body
		r.got = append(r.got, m)
		if r.status != 0 {
			w.WriteHeader(r.status)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hooks/usersync"
	return r
}

func (r *appReceiver) messages() []message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *appReceiver) setSecrets(s ...string) {
	r.mu.Lock()
	r.secrets = s
	r.mu.Unlock()
}

// send sends method path with a JSON body as an admin.
func (h *harness) send(method, path, body string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	req.Header.Set("Content-Type", "application/json")
	return h.do(req)
}

// register registers r's URL as an endpoint for types (none: every type)
// through the API, and gives r its secret.
func (h *harness) register(r *appReceiver, types ...string) string {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{"url": r.url, "eventTypes": types, "description": "the app"})
	resp := h.send(http.MethodPost, "/v1/endpoints", string(body))
	if resp.Code != http.StatusCreated {
		h.t.Fatalf("register: %s", resp)
	}
	j := resp.JSON(h.t)
	r.setSecrets(j["secret"].(string))
	h.step()
	return j["id"].(string)
}

// step runs the dispatcher's round.
func (h *harness) step() {
	h.t.Helper()
	if err := h.dispatcher.Step(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func TestOutbound_EndpointsAreRegisteredReadChangedAndDeletedByAdmins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	if r := h.get("/v1/endpoints", testAPIKey); r.Code != http.StatusForbidden && r.Code != http.StatusUnauthorized {
		t.Errorf("an API key lists endpoints: %s", r)
	}
	r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/hook", "eventTypes": ["user.created", "organization.*"]}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	created := r.JSON(t)
	id, secret := created["id"].(string), created["secret"].(string)
	if !strings.HasPrefix(id, "ep_") || !strings.HasPrefix(secret, "whsec_") || created["enabled"] != true {
		t.Fatalf("created = %v, want an ep_ id, a whsec_ secret, enabled", created)
	}
	for _, path := range []string{"/v1/endpoints", "/v1/endpoints/" + id} {
		r := h.get(path, testAdminKey)
		if r.Code != http.StatusOK || strings.Contains(string(r.Body), secret) || !strings.Contains(string(r.Body), id) {
			t.Errorf("GET %s = %s; want the endpoint without its secret", path, r)
		}
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/"+id, `{"eventTypes": ["user.*"], "enabled": false}`); r.Code != http.StatusOK ||
		r.JSON(t)["enabled"] != false {
		t.Errorf("patch: %s", r)
	}
	for _, bad := range []struct{ method, path, body, field string }{
		{http.MethodPost, "/v1/endpoints", `{"url": "ftp://example.com"}`, "url"},
		{http.MethodPost, "/v1/endpoints", `{"eventTypes": ["user.created"]}`, "url"},
		{http.MethodPost, "/v1/endpoints", `{"url": "https://example.com", "eventTypes": ["user.exploded"]}`, "eventTypes"},
		{http.MethodPost, "/v1/endpoints", `{"url": "https://example.com", "secret": "whsec_mine"}`, "body"},
		{http.MethodPatch, "/v1/endpoints/" + id, `{"description": "` + strings.Repeat("x", 600) + `"}`, "description"},
		{http.MethodPost, "/v1/endpoints/" + id + "/rotate-secret", `{"overlap": "30d"}`, "overlap"},
		{http.MethodPost, "/v1/endpoints/" + id + "/replay", `{"kind": "gadget", "objectId": "x"}`, "kind"},
		// Each list takes only its own parameters.
		{http.MethodGet, "/v1/endpoints/" + id + "/attempts?status=pending", "", "status"},
		{http.MethodGet, "/v1/endpoints/" + id + "/deliveries?failed=true", "", "failed"},
	} {
		r := h.send(bad.method, bad.path, bad.body)
		if r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), bad.field) {
			t.Errorf("%s %s %.60s = %s; want 400 naming %s", bad.method, bad.path, bad.body, r, bad.field)
		}
	}
	if r := h.send(http.MethodGet, "/v1/endpoints/ep_unknown", ""); r.Code != http.StatusNotFound {
		t.Errorf("an unknown endpoint = %s, want 404", r)
	}
	// An endpoint from the configuration is read-only here.
	cfg := models.Endpoint{ID: "cfg_crm", URL: "https://example.com/crm", Enabled: true, Secret: secret, FromConfig: true}
	if err := h.store.Outbound().CreateEndpoint(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodPatch, http.MethodDelete} {
		if r := h.send(method, "/v1/endpoints/cfg_crm", `{"enabled": false}`); r.Code != http.StatusConflict ||
			!strings.Contains(string(r.Body), "USERSYNC_ENDPOINTS_FILE") {
			t.Errorf("%s of a configured endpoint = %s; want 409 naming the setting", method, r)
		}
	}
	if r := h.send(http.MethodDelete, "/v1/endpoints/"+id, ""); r.Code != http.StatusNoContent {
		t.Errorf("delete: %s", r)
	}
	if r := h.get("/v1/endpoints/"+id, testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("a deleted endpoint reads: %s", r)
	}
}

func TestOutbound_APrivateAddressIsRefusedUnlessAllowed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound, o.denyPrivate = true, true })
	for _, url := range []string{"http://127.0.0.1:9/hook", "http://10.0.0.1/hook", "http://[::1]/hook", "http://localhost/hook"} {
		r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "`+url+`"}`)
		if r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), "USERSYNC_ENDPOINTS_ALLOW_PRIVATE") {
			t.Errorf("%s = %s; want 400 naming the setting", url, r)
		}
	}
}

// admin reads what GET path shows an admin.
func (h *harness) admin(path string) json.RawMessage {
	h.t.Helper()
	r := h.get(path, testAdminKey)
	if r.Code != http.StatusOK {
		h.t.Fatalf("GET %s: %s", path, r)
	}
	return r.Body
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestOutbound_AWebhookThatAppliedReachesTheAppOnceAsTheRESTAPIShowsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	h.register(app)
	base := time.Now().Add(-time.Hour).UnixMilli()
	created := userBody(t, "user.created", clerkUser{ID: "user_ob1", UpdatedAt: base, Email: "a@example.com", First: "Ada"})
	h.mustDeliver("msg_ob1", created)
	h.step()
	h.mustDeliver("msg_ob1", created)                                                                                                  // a duplicate
	h.mustDeliver("msg_ob0", userBody(t, "user.updated", clerkUser{ID: "user_ob1", UpdatedAt: base - 1000, Email: "old@example.com"})) // stale
	h.step()
	h.mustDeliver("msg_ob2", userBody(t, "user.updated", clerkUser{ID: "user_ob1", UpdatedAt: base + 1000, Email: "b@example.com", First: "Ada"}))
	h.step()
	ms := app.messages()
	if got := []string{ms[0].Type, ms[len(ms)-1].Type}; len(ms) != 2 || got[0] != "user.created" || got[1] != "user.updated" {
		t.Fatalf("messages = %+v, want the creation and the update, once each", ms)
	}
	if !sameJSON(t, ms[1].Data, h.admin("/v1/users/user_ob1?includeDeleted=true")) {
		t.Errorf("data = %s, want the admin's read of the user", ms[1].Data)
	}
	if !slices.Equal(ms[1].Changed, []string{"email"}) || ms[1].Origin != "webhook" {
		t.Errorf("the update says %v changed, from %q; want [email], from a webhook", ms[1].Changed, ms[1].Origin)
	}
	h.mustDeliver("msg_ob3", deleteBody(t, "user_ob1", base+2000))
	h.step()
	if ms := app.messages(); len(ms) != 3 || ms[2].Type != "user.deleted" {
		t.Errorf("messages = %+v, want the deletion last", ms)
	}
	// The deliveries and attempts, as the console reads them.
	eps := h.admin("/v1/endpoints")
	if !strings.Contains(string(eps), `"backlog":0`) {
		t.Errorf("endpoints = %s, want no backlog", eps)
	}
}

func TestOutbound_RotationSignsWithBothSecretsAndReplayResendsWhole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app, "user.*")
	oldSecret := app.secrets[0]
	r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", `{"overlap": "1h"}`)
	if r.Code != http.StatusOK {
		t.Fatalf("rotate: %s", r)
	}
	newSecret := r.JSON(t)["secret"].(string)
	app.setSecrets(oldSecret, newSecret) // every message must verify with both
	base := time.Now().Add(-time.Hour).UnixMilli()
	h.mustDeliver("msg_rot1", userBody(t, "user.created", clerkUser{ID: "user_rot", UpdatedAt: base, Email: "r@example.com"}))
	h.step()
	if n := len(app.messages()); n != 1 {
		t.Fatalf("%d messages, want 1", n)
	}
	r = h.send(http.MethodPost, "/v1/endpoints/"+id+"/replay", `{"kind": "user", "objectId": "user_rot"}`)
	if r.Code != http.StatusOK || r.JSON(t)["requeued"] != float64(1) {
		t.Fatalf("replay: %s", r)
	}
	h.step()
	ms := app.messages()
	if len(ms) != 2 || ms[1].ID != ms[0].ID || len(ms[1].Changed) < 3 {
		t.Errorf("messages = %+v, want the replay with the same webhook-id, whole", ms)
	}
	if r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/test", ""); r.Code != http.StatusOK || r.JSON(t)["delivered"] != true {
		t.Errorf("test message: %s", r)
	}
	if ms := app.messages(); len(ms) != 3 || ms[2].Type != "usersync.test" {
		t.Errorf("messages = %+v, want the test message last", ms)
	}
	as := h.admin("/v1/endpoints/" + id + "/attempts")
	if !strings.Contains(string(as), `"delivered":true`) || strings.Contains(string(as), newSecret) {
		t.Errorf("attempts = %s", as)
	}
}

// TestOutbound_EveryKindsChangeReachesTheAppAsItsRESTShape sends one
// webhook of each kind through the router and checks the receiver got its
// creation, once, with the object as the REST API shows it to an admin.
func TestOutbound_EveryKindsChangeReachesTheAppAsItsRESTShape(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	h.register(app)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for _, tc := range []struct {
		kind models.Kind
		body []byte
		typ  string // the outbound type expected
	}{
		{models.KindUser, userBody(t, "user.created", clerkUser{ID: "user_k1", UpdatedAt: at, Email: "k1@example.com"}), "user.created"},
		{models.KindOrganization, fixture(t, "openapi.organization.created.json"), "organization.created"},
		{models.KindMembership, fixture(t, "openapi.organizationMembership.created.json"), "organizationMembership.created"},
		{models.KindInvitation, fixture(t, "openapi.organizationInvitation.created.json"), "organizationInvitation.created"},
		{models.KindSubscriptionItem, billingBody(t, "subscriptionItem.canceled.json", "subscriptionItem.active", nil), "subscriptionItem.updated"},
		{models.KindSubscription, billingBody(t, "upstream.subscription.created.json", "", nil), "subscription.created"},
		{models.KindPaymentAttempt, attemptBody("paymentAttempt.created", "pa_k1", "cpa_K1", billingUser, at), "paymentAttempt.created"},
	} {
		before := len(app.messages())
		h.mustDeliver(newID(), tc.body)
		h.step()
		var got []message
		for _, m := range app.messages()[before:] {
			if strings.HasPrefix(m.Type, models.OutboundName(tc.kind)+".") {
				got = append(got, m)
			}
		}
		if len(got) != 1 || got[0].Type != tc.typ || len(got[0].Changed) == 0 || !json.Valid(got[0].Data) {
			t.Errorf("%s: messages = %+v, want one %s", tc.kind, got, tc.typ)
		}
	}
	seen := map[string]bool{}
	for _, m := range app.messages() {
		seen[strings.SplitN(m.Type, ".", 2)[0]] = true
	}
	for _, k := range models.Kinds {
		if !seen[models.OutboundName(k)] {
			t.Errorf("no message of kind %s: the test must cover every kind", k)
		}
	}
}

// TestOutbound_APlanChangeIsSentOnceBetweenSettledPlansInEitherOrder: a
// plan change's two events (the old item ended, the new one active), in
// either order, give the app one plan.changed, from the old plan to the
// new, and never a plan in between.
func TestOutbound_APlanChangeIsSentOnceBetweenSettledPlansInEitherOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][]string{{"1", "2"}, {"2", "1"}} {
		t.Run(order[0]+order[1], func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
			app := newAppReceiver(t)
			h.register(app, "plan.changed")
			h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
			// The pro item, active a day before the change.
			h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "subscriptionItem.active", func(d map[string]any) {
				d["status"], d["ended_at"] = "active", nil
				d["updated_at"] = d["updated_at"].(float64) - 86_400_000
			}))
			h.step()
			files := map[string]string{"1": "plan-change.1.subscriptionItem.ended.json", "2": "plan-change.2.subscriptionItem.active.json"}
			for _, o := range order {
				h.mustDeliver(newID(), billingBody(t, files[o], "", nil))
				h.step()
			}
			type plan struct {
				Plan struct {
					Slug string `json:"slug"`
				} `json:"plan"`
				Status string `json:"status"`
			}
			var got []string
			for _, m := range app.messages() {
				var d struct {
					Payer    payerOf `json:"payer"`
					Plan     *plan   `json:"plan"`
					Previous *plan   `json:"previous"`
				}
				if err := json.Unmarshal(m.Data, &d); err != nil || m.Type != "plan.changed" || d.Payer.ID != billingUser || d.Plan == nil {
					t.Fatalf("message %s %s: %v", m.Type, m.Data, err)
				}
				prev := "none"
				if d.Previous != nil {
					prev = d.Previous.Plan.Slug + " " + d.Previous.Status
				}
				got = append(got, prev+" → "+d.Plan.Plan.Slug+" "+d.Plan.Status)
			}
			if want := []string{"none → pro-plan active", "pro-plan active → team-plan active"}; !slices.Equal(got, want) {
				t.Errorf("plan.changed = %q, want %q", got, want)
			}
			// A payer's plan is replayed by the payer's id.
			id := h.admin("/v1/endpoints")
			var eps struct{ Endpoints []struct{ ID string } }
			_ = json.Unmarshal(id, &eps)
			r := h.send(http.MethodPost, "/v1/endpoints/"+eps.Endpoints[0].ID+"/replay", `{"kind": "plan", "objectId": "`+billingUser+`"}`)
			if r.Code != http.StatusOK || r.JSON(t)["requeued"] != float64(1) {
				t.Fatalf("replay of the plan: %s", r)
			}
			h.step()
			if ms := app.messages(); len(ms) != 3 || ms[2].ID != ms[1].ID {
				t.Errorf("after the replay: %d messages; want the last plan.changed again, with its webhook-id", len(ms))
			}
		})
	}
}

type payerOf struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

func TestOutbound_APlanLeftPendingPastTheGraceIsSentAsEnded(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	h := newHarness(t, func(o *harnessOptions) {
		o.outbound, o.grace = true, time.Minute
		o.now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	app := newAppReceiver(t)
	h.register(app, "plan.*")
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: t0}))
	h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "subscriptionItem.active", func(d map[string]any) {
		d["status"], d["ended_at"] = "active", nil
		d["updated_at"] = d["updated_at"].(float64) - 86_400_000
	}))
	h.step()
	h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "", nil)) // the new item never comes
	h.step()
	if n := len(app.messages()); n != 1 {
		t.Fatalf("%d plan.changed while the plan is pending, want only the first", n)
	}
	clock.Add(int64(2 * time.Minute))
	h.step()
	ms := app.messages()
	if len(ms) != 2 || !strings.Contains(string(ms[1].Data), `"status":"ended"`) {
		t.Fatalf("messages = %+v, want the plan ended once the grace passed", ms)
	}
}

func TestOutbound_SecretsNeverAppearInLogsOrMetrics(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	h := newHarness(t, func(o *harnessOptions) {
		o.outbound = true
		o.logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	app := newAppReceiver(t)
	app.status = http.StatusInternalServerError
	id := h.register(app)
	secrets := []string{app.secrets[0]}
	r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", "")
	secrets = append(secrets, r.JSON(t)["secret"].(string))
	app.setSecrets(secrets...)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_sec", UpdatedAt: t0, Email: "s@example.com"}))
	h.step()
	h.send(http.MethodPost, "/v1/endpoints/"+id+"/test", "")
	metrics := string(h.get("/metrics", "").Body)
	for _, s := range secrets {
		key := strings.TrimPrefix(s, "whsec_")
		if strings.Contains(logs.String(), key) || strings.Contains(metrics, key) {
			t.Errorf("a secret appears in the logs or the metrics")
		}
	}
	if !strings.Contains(logs.String(), "endpoint secret rotated") {
		t.Errorf("the rotation is not logged: %s", logs.String())
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu stdsync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
