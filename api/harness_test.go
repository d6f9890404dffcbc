package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/internal/service"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func TestMain(m *testing.M) { repotest.Main(m) }

const (
	testSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	otherSecret  = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	testAPIKey   = "usk_test_api"
	testAdminKey = "usk_test_admin"
)

// harness is a usersync server on the real router and a real engine.
type harness struct {
	t     *testing.T
	store repotest.Store
	url   string
	// dispatcher sends outbound webhooks (harnessOptions.outbound): a
	// test steps it.
	dispatcher *outbound.Dispatcher
	svc        *sync.Service
}

type harnessOptions struct {
	logger  *slog.Logger
	store   repotest.Store
	secrets []string
	// beforeApply, if set, runs before each change is applied, once its
	// event is stored (repotest.Hook): an error is the apply's failure.
	beforeApply func(ctx context.Context, ch models.Change) error
	// wrapReader stands between the server and the store's user reads.
	wrapReader func(api.UserReader) api.UserReader
	limits     api.Limits
	settle     time.Duration // of the change feed; 0: the default
	grace      time.Duration // of a pending billing plan; 0: the default
	proxies    peer.Proxies
	metrics    *api.Metrics
	// outbound turns outbound webhooks on, endpoints on loopback allowed,
	// with the dispatcher's clock (nil: the real one).
	outbound bool
	now      func() time.Time
	// denyPrivate refuses endpoints on private addresses, as production
	// does by default.
	denyPrivate bool
	// allowHTTP lets endpoints be on plain http to public addresses
	// (USERSYNC_ENDPOINTS_ALLOW_HTTP).
	allowHTTP bool
	// clerk, if set, serves the sync routes from this Clerk.
	clerk *clerk.Client
}

func newHarness(t *testing.T, opts ...func(*harnessOptions)) *harness {
	t.Helper()
	o := harnessOptions{secrets: []string{testSecret}}
	for _, f := range opts {
		f(&o)
	}
	if o.store == nil {
		o.store = repotest.NewStore(t)
	}
	if o.logger == nil {
		o.logger = repotest.Discard()
	}
	var reader api.UserReader = o.store.Users()
	if o.wrapReader != nil {
		reader = o.wrapReader(reader)
	}
	var so service.Options
	if o.beforeApply != nil {
		so.WrapStore = func(s repository.Store) sync.Store { return repotest.Hook(s, o.beforeApply) }
	}
	svc := service.Sync(o.store, so)
	var d *outbound.Dispatcher
	var ob *api.Outbound
	if o.outbound {
		d, ob = service.Outbound(o.store, svc, service.OutboundOptions{AllowPrivate: !o.denyPrivate, AllowHTTP: o.allowHTTP, Owner: "harness", Now: o.now,
			Jitter: func() float64 { return 0.5 }, Timeout: 5 * time.Second, BillingGrace: o.grace})
	}
	e, err := api.New(service.API(o.store, svc, api.Config{
		Users:          reader,
		Logger:         o.logger,
		WebhookSecrets: o.secrets,
		APIKeys:        []string{testAPIKey},
		AdminKeys:      []string{testAdminKey},
		Limits:         o.limits,
		ChangeSettle:   o.settle,
		BillingGrace:   o.grace,
		TrustedProxies: o.proxies,
		Metrics:        o.metrics,
		Outbound:       ob,
		ClerkSync:      clerkSyncer(svc, o.clerk),
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &harness{t: t, store: o.store, url: srv.URL, dispatcher: d, svc: svc}
}

// newMetricsHarness is a harness on a store of its own, with the metrics
// it serves, which the test feeds and reads.
func newMetricsHarness(t *testing.T) (*harness, *api.Metrics) {
	t.Helper()
	var metrics *api.Metrics
	h := newHarness(t, func(o *harnessOptions) {
		o.store = repotest.NewStore(t)
		metrics = api.NewMetrics(o.store.Events())
		o.metrics = metrics
	})
	return h, metrics
}

// response is what a request got back.
type response struct {
	Code   int
	Body   []byte
	Header http.Header
}

// JSON decodes the body into a map.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Code, bytes.TrimSpace(r.Body)) }

func (h *harness) do(req *http.Request) response {
	h.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{Code: resp.StatusCode, Body: b, Header: resp.Header}
}

// sign returns Svix headers for body signed with secret at ts.
func sign(t testing.TB, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("svix-id", id)
	h.Set("svix-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("svix-signature", sig)
	return h
}

// post sends body to the webhook with the given headers.
func (h *harness) post(body []byte, hdr http.Header) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/webhooks/clerk", bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return h.do(req)
}

// deliver signs body as Svix would now and posts it.
func (h *harness) deliver(id string, body []byte) response {
	h.t.Helper()
	return h.post(body, sign(h.t, testSecret, id, time.Now(), body))
}

// mustDeliver delivers and fails the test unless the answer is 200.
func (h *harness) mustDeliver(id string, body []byte) map[string]any {
	h.t.Helper()
	r := h.deliver(id, body)
	if r.Code != http.StatusOK {
		h.t.Fatalf("deliver %s: %s", id, r)
	}
	return r.JSON(h.t)
}

func (h *harness) get(path, key string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return h.do(req)
}

// user reads a user as an admin, deleted or not; nil when it is unknown.
func (h *harness) user(userID string) map[string]any {
	h.t.Helper()
	r := h.get("/v1/users/"+userID+"?includeDeleted=true", testAdminKey)
	if r.Code == http.StatusNotFound {
		return nil
	}
	if r.Code != http.StatusOK {
		h.t.Fatalf("get user %s: %s", userID, r)
	}
	return r.JSON(h.t)
}

// countEvents counts the stored events, through the event log.
func (h *harness) countEvents() int {
	h.t.Helper()
	n := 0
	f := models.EventFilter{Limit: 500}
	for {
		page, err := h.store.Events().List(context.Background(), f)
		if err != nil {
			h.t.Fatal(err)
		}
		n += len(page.Events)
		if page.NextCursor == "" {
			return n
		}
		f.After = page.NextCursor
	}
}

// countUsers counts the users, deleted ones included.
func (h *harness) countUsers() int {
	h.t.Helper()
	n := 0
	f := models.UserFilter{Limit: 500, IncludeDeleted: true}
	for {
		page, err := h.store.Users().List(context.Background(), f)
		if err != nil {
			h.t.Fatal(err)
		}
		n += len(page.Users)
		if page.NextCursor == "" {
			return n
		}
		f.After = page.NextCursor
	}
}

// event reads the stored event with eventId id, as a map of the fields
// of user_events (a field the event lacks is absent).
func (h *harness) event(id string) map[string]any {
	h.t.Helper()
	ev, err := h.store.Events().Get(context.Background(), id)
	if err != nil {
		h.t.Fatalf("event %s: %v", id, err)
	}
	m := map[string]any{"eventId": ev.EventID, "status": string(ev.Status), "attempts": int32(ev.Attempts),
		"type": ev.Type, "receivedAt": ev.ReceivedAt}
	put := func(k string, v any, ok bool) {
		if ok {
			m[k] = v
		}
	}
	put("outcome", string(ev.Outcome), ev.Outcome != "")
	put("error", ev.Error, ev.Error != "")
	put("rawBody", string(ev.RawBody), ev.RawBody != nil)
	put("userId", ev.UserID, ev.UserID != "")
	put("erasedAt", ev.ErasedAt, ev.ErasedAt != nil)
	put("processedAt", ev.ProcessedAt, ev.ProcessedAt != nil)
	put("sourceTimestamp", ev.SourceTimestamp, ev.SourceTimestamp != nil)
	put("retryAt", ev.RetryAt, ev.RetryAt != nil)
	return m
}

// fixture reads a Clerk payload from models/testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "models", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clerkUser describes a user event body built from the user.updated fixture.
type clerkUser struct {
	ID        string
	UpdatedAt int64 // Unix ms
	Email     string
	First     any // string or nil
	Last      any
	Meta      any
	Private   string // private_metadata {"pad": Private}, when not ""
}

func userBody(t testing.TB, typ string, u clerkUser) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, "user.updated.json"), &env); err != nil {
		t.Fatal(err)
	}
	env["type"] = typ
	env["timestamp"] = u.UpdatedAt + 40
	d := env["data"].(map[string]any)
	d["id"] = u.ID
	d["updated_at"] = u.UpdatedAt
	d["first_name"], d["last_name"] = u.First, u.Last
	d["email_addresses"] = []any{}
	d["primary_email_address_id"] = nil
	if u.Email != "" {
		d["email_addresses"] = []any{map[string]any{"id": "idn_" + u.ID, "email_address": u.Email, "object": "email_address"}}
		d["primary_email_address_id"] = "idn_" + u.ID
	}
	if u.Meta != nil {
		d["public_metadata"] = u.Meta
	}
	if u.Private != "" {
		d["private_metadata"] = map[string]any{"pad": u.Private}
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deleteBody(t testing.TB, userID string, ts int64) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"object": "event", "type": "user.deleted", "timestamp": ts,
		"data": map[string]any{"id": userID, "object": "user", "deleted": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var msgSeq atomic.Int64

// newID returns a fresh svix-id.
func newID() string { return fmt.Sprintf("msg_%d_%d", time.Now().UnixNano(), msgSeq.Add(1)) }

// clerkSyncer serves the sync routes from cl; nil without one (the routes
// answer 501).
func clerkSyncer(svc *sync.Service, cl *clerk.Client) api.ClerkSyncer {
	if cl == nil {
		return nil
	}
	return &sync.Fetcher{Service: svc, Clerk: cl}
}
