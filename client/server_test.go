package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/internal/service"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func TestMain(m *testing.M) { repotest.Main(m) }

const (
	clerkSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	apiKey      = "usk_client_api"
	adminKey    = "usk_client_admin"
	// settle is the change feed's hold-back in these tests: a change is
	// read a moment after it applied, not 30 s.
	settle = 5 * time.Millisecond
)

// server is a usersync in the test's process, wired as serve wires it,
// on the embedded store (or MongoDB at MONGODB_URI), with outbound
// webhooks (the test steps the dispatcher) and a stand-in Clerk behind
// the sync routes.
type server struct {
	t          *testing.T
	url        string
	dispatcher *outbound.Dispatcher
	clerk      *clerktest.Server
}

func newServer(t *testing.T) *server {
	t.Helper()
	store := repotest.NewStore(t)
	svc := service.Sync(store, service.Options{})
	d, ob := service.Outbound(store, svc, service.OutboundOptions{AllowPrivate: true, Owner: "client-test",
		Jitter: func() float64 { return 0.5 }, Timeout: 5 * time.Second})
	fake := clerktest.New(t, nil)
	cl, err := clerk.New(fake.URL, "sk_test_clientKey")
	if err != nil {
		t.Fatal(err)
	}
	e, err := api.New(service.API(store, svc, api.Config{
		Logger:         repotest.Discard(),
		WebhookSecrets: []string{clerkSecret},
		APIKeys:        []string{apiKey},
		AdminKeys:      []string{adminKey},
		ChangeSettle:   settle,
		Outbound:       ob,
		ClerkSync:      &sync.Fetcher{Service: svc, Clerk: cl},
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &server{t: t, url: srv.URL, dispatcher: d, clerk: fake}
}

var msgSeq atomic.Int64

// deliver signs body as Svix would now and posts it to the webhook; the
// delivery must apply.
func (s *server) deliver(body []byte) {
	s.t.Helper()
	id := "msg_client_" + strconv.FormatInt(msgSeq.Add(1), 10)
	wh, err := svix.NewWebhook(clerkSecret)
	if err != nil {
		s.t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, s.url+"/webhooks/clerk", bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	if r := s.admin(req); r.StatusCode != http.StatusOK {
		s.t.Fatalf("deliver %.80s: %d", body, r.StatusCode)
	}
}

// settled waits until what was delivered is in the change feeds.
func (s *server) settled() { time.Sleep(3 * settle) }

// admin sends req as an admin, and reads its JSON answer into out, if
// any.
func (s *server) admin(req *http.Request, out ...any) *http.Response {
	s.t.Helper()
	if req.Header.Get("Authorization") == "" && !strings.HasPrefix(req.URL.Path, "/webhooks/") {
		req.Header.Set("Authorization", "Bearer "+adminKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	for _, o := range out {
		if err := json.NewDecoder(res.Body).Decode(o); err != nil {
			s.t.Fatal(err)
		}
	}
	return res
}

// register registers url as an endpoint of every type, and returns its
// id and secret.
func (s *server) register(url string) (id, secret string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/endpoints", strings.NewReader(`{"url": "`+url+`"}`))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	var ep struct{ ID, Secret string }
	if r := s.admin(req, &ep); r.StatusCode != http.StatusCreated {
		s.t.Fatalf("register: %d", r.StatusCode)
	}
	s.step()
	return ep.ID, ep.Secret
}

// step runs the dispatcher's round: what waits is sent.
func (s *server) step() {
	s.t.Helper()
	if err := s.dispatcher.Step(context.Background()); err != nil {
		s.t.Fatal(err)
	}
}

// fixture reads a Clerk payload of models/testdata.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "models", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit is the fixture name with fn's changes to its decoded data.
func edit(t *testing.T, name string, fn func(d map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, name), &env); err != nil {
		t.Fatal(err)
	}
	fn(env["data"].(map[string]any))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dataOf is the data of a Clerk event body: the object as Clerk's Backend
// API serves it.
func dataOf(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var env struct{ Data json.RawMessage }
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	return env.Data
}
