package outbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

func TestMain(m *testing.M) { repotest.Main(m) }

// clock is a fake clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)     { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// got is one message a receiver verified.
type got struct {
	ID      string
	Path    string
	Type    string          `json:"type"`
	Data    json.RawMessage `json:"data"`
	Changed []string        `json:"changed"`
	Origin  string          `json:"origin"`
}

// receiver is an HTTP endpoint on loopback that verifies each message
// with svix's own library and records it; answer decides the status.
type receiver struct {
	t       *testing.T
	secrets []string
	srv     *httptest.Server
	mu      sync.Mutex
	got     []got
	answer  func(n int, w http.ResponseWriter) // n: the request's number, from 1
	n       int
}

func newReceiver(t *testing.T, secrets ...string) *receiver {
	r := &receiver{t: t, secrets: secrets}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		for _, s := range r.secrets {
			wh, err := svix.NewWebhook(s)
			if err != nil {
				t.Error(err)
				return
			}
			// The fake clock is in the past: svix's tolerance of five
			// minutes is the real clock's business.
			if err := wh.VerifyIgnoringTimestamp(body, req.Header); err != nil {
				t.Errorf("a message does not verify with a secret: %v", err)
			}
		}
		var g got
		if err := json.Unmarshal(body, &g); err != nil {
			t.Errorf("body %s: %v", body, err)
		}
		g.ID, g.Path = req.Header.Get("webhook-id"), req.URL.Path
		r.mu.Lock()
		r.n++
		n := r.n
		answer := r.answer
		r.got = append(r.got, g)
		r.mu.Unlock()
		if answer != nil {
			answer(n, w)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) messages() []got {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// render shows a user as a REST read does, in short.
func render(s repository.Store) outbound.Renderer {
	return func(ctx context.Context, k models.Kind, id string) (json.RawMessage, bool, error) {
		switch k {
		case models.KindUser:
			u, err := s.Users().Get(ctx, id)
			if err != nil {
				return nil, false, err
			}
			b, err := json.Marshal(map[string]any{"userId": u.UserID, "email": u.Email, "displayName": u.DisplayName,
				"updatedAt": u.UpdatedAt, "deleted": u.Deleted()})
			return b, u.Deleted(), err
		case models.KindOrganization:
			o, err := s.Organizations().Get(ctx, id)
			if err != nil {
				return nil, false, err
			}
			b, err := json.Marshal(map[string]any{"organizationId": o.OrgID, "deleted": o.DeletedAt != nil})
			return b, o.DeletedAt != nil, err
		case models.KindMembership:
			m, err := s.Memberships().Get(ctx, id)
			if err != nil {
				return nil, false, err
			}
			b, err := json.Marshal(map[string]any{"membershipId": m.MembershipID, "deleted": m.DeletedAt != nil})
			return b, m.DeletedAt != nil, err
		}
		return nil, false, models.ErrNotFound
	}
}

type fixture struct {
	store repository.Store
	clock *clock
	d     *outbound.Dispatcher
	rcv   *receiver
	ep    models.Endpoint
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func newFixture(t *testing.T, secrets ...string) *fixture {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, repotest.DataDir(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	if len(secrets) == 0 {
		secret, err := outbound.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		secrets = []string{secret}
	}
	f := &fixture{store: s, clock: &clock{now: t0}, rcv: newReceiver(t, secrets...)}
	f.ep = models.Endpoint{ID: "ep_test", URL: f.rcv.srv.URL + "/hook", Enabled: true, Secret: secrets[0], CreatedAt: t0, UpdatedAt: t0}
	if err := s.Outbound().CreateEndpoint(ctx, f.ep); err != nil {
		t.Fatal(err)
	}
	f.d = outbound.NewDispatcher(outbound.Options{Store: s, Render: render(s), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true, Timeout: 5 * time.Second}),
		Now:    f.clock.Now, Jitter: func() float64 { return 0.5 }})
	if err := f.d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) step(t *testing.T) {
	t.Helper()
	if err := f.d.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// change changes the test's endpoint in the store, as an admin does, and
// in f.ep.
func (f *fixture) change(t *testing.T, fn func(*models.Endpoint)) {
	t.Helper()
	e, err := repository.ChangeEndpoint(context.Background(), f.store.Outbound(), f.ep.ID, func(e *models.Endpoint) error {
		fn(e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.ep = e
}

func (f *fixture) deliver(t *testing.T, ch models.Change, typ string) models.Delivered {
	t.Helper()
	userID, objectID := ch.IDs()
	ev := models.Event{EventID: ch.Version().EventID, Type: typ, EventType: models.EventTypeOf(typ), UserID: userID,
		ObjectID: objectID, RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: f.clock.Now()}
	d, err := f.store.Deliver(context.Background(), ev, ch, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func user(id, event string, at time.Duration, email string) models.UserChange {
	return models.UserChange{UserID: id, EventID: event, SourceTime: t0.Add(at), Email: email, DisplayName: "N",
		Metadata: json.RawMessage(`{}`)}
}

func types(ms []got) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return out
}

func TestDispatch_EachChangeThatAppliedIsSentOnceSignedWithWhatChanged(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t)
	// A duplicate, a stale state, and a state whose shape is the same
	// (times aside): nothing new is sent.
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.deliver(t, user("user_1", "msg_0", 0, "old@example.com"), models.TypeUserUpdated)
	f.step(t)
	f.deliver(t, user("user_1", "msg_same", 2*time.Second, "a@example.com"), models.TypeUserUpdated)
	f.step(t)
	f.deliver(t, user("user_1", "msg_2", 3*time.Second, "b@example.com"), models.TypeUserUpdated)
	f.step(t)
	f.deliver(t, models.UserChange{UserID: "user_1", EventID: "msg_3", SourceTime: t0.Add(4 * time.Second), Deleted: true}, models.TypeUserDeleted)
	f.step(t)
	f.step(t)
	ms := f.rcv.messages()
	if want := []string{"user.created", "user.updated", "user.deleted"}; !slices.Equal(types(ms), want) {
		t.Fatalf("types = %v, want %v", types(ms), want)
	}
	if !slices.Equal(ms[0].Changed, []string{"deleted", "displayName", "email", "userId"}) || ms[0].Origin != models.OriginWebhook {
		t.Errorf("the creation names %v from %q, want every field, from a webhook", ms[0].Changed, ms[0].Origin)
	}
	if !slices.Equal(ms[1].Changed, []string{"email"}) {
		t.Errorf("the update names %v, want [email]", ms[1].Changed)
	}
	if ms[0].ID == ms[1].ID || ms[1].ID == ms[2].ID {
		t.Errorf("webhook ids %s %s %s: each change has its own", ms[0].ID, ms[1].ID, ms[2].ID)
	}
}

func TestDispatch_ANewerChangeWaitingIsSentInPlaceOfOlderOnesNeverAfter(t *testing.T) {
	f := newFixture(t)
	f.rcv.answer = func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t) // fails: retried in 5 s
	f.deliver(t, user("user_1", "msg_2", 2*time.Second, "b@example.com"), models.TypeUserUpdated)
	f.deliver(t, user("user_1", "msg_3", 3*time.Second, "c@example.com"), models.TypeUserUpdated)
	f.step(t) // not due yet
	if n := len(f.rcv.messages()); n != 1 {
		t.Fatalf("%d messages before the retry is due, want 1", n)
	}
	f.clock.Add(10 * time.Second)
	f.step(t)
	ms := f.rcv.messages()
	if len(ms) != 2 || ms[1].Type != "user.created" || !json.Valid(ms[1].Data) {
		t.Fatalf("messages = %+v, want the newest state as the creation", ms)
	}
	var data struct{ Email string }
	_ = json.Unmarshal(ms[1].Data, &data)
	if data.Email != "c@example.com" || ms[1].ID == ms[0].ID {
		t.Errorf("sent %s as %s, want the newest state under the newest change's id", data.Email, ms[1].ID)
	}
}

func TestDispatch_TheRetryScheduleRunsOnAFakeClockThenTheDeliveryFails(t *testing.T) {
	f := newFixture(t)
	f.rcv.answer = func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) }
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t)
	for i, wait := range outbound.Schedule[1:] {
		f.clock.Add(wait - time.Millisecond) // jitter 0.5 is no jitter
		f.step(t)
		if n := len(f.rcv.messages()); n != i+1 {
			t.Fatalf("attempt %d came early (%d messages)", i+2, n)
		}
		f.clock.Add(time.Millisecond)
		f.step(t)
		if n := len(f.rcv.messages()); n != i+2 {
			t.Fatalf("attempt %d did not come on time (%d messages)", i+2, n)
		}
	}
	d, err := f.store.Outbound().Delivery(context.Background(), "ep_test", models.KindUser, "user_1")
	if err != nil || d.Status != models.DeliveryFailed || d.LastStatus != 500 {
		t.Fatalf("after the schedule: %+v, %v; want failed", d, err)
	}
	ms := f.rcv.messages()
	for _, m := range ms {
		if m.ID != ms[0].ID {
			t.Fatalf("a retry changed the webhook-id: %s then %s", ms[0].ID, m.ID)
		}
	}
	// The endpoint failed every delivery for a day: still enabled. For
	// longer than models.MaxFailingFor: disabled.
	f.deliver(t, user("user_2", "msg_u2", time.Second, "u2@example.com"), models.TypeUserCreated)
	f.step(t)
	if ep, _ := f.store.Outbound().Endpoint(context.Background(), "ep_test"); !ep.Enabled || ep.FailingSince == nil {
		t.Fatalf("endpoint = %+v, want enabled, failing since the first failure", ep)
	}
	f.clock.Add(models.MaxFailingFor)
	f.deliver(t, user("user_3", "msg_u3", time.Second, "u3@example.com"), models.TypeUserCreated)
	f.step(t)
	if ep, _ := f.store.Outbound().Endpoint(context.Background(), "ep_test"); ep.Enabled || ep.Disabled != models.DisabledFailing {
		t.Errorf("endpoint = %+v, want disabled as failing", ep)
	}
}

func TestDispatch_A410DisablesTheEndpointAndA429sRetryAfterIsHonoured(t *testing.T) {
	f := newFixture(t)
	f.rcv.answer = func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "600")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusGone)
	}
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t)
	f.clock.Add(5 * time.Minute) // the schedule's next step, but Retry-After says 10 min
	f.step(t)
	if n := len(f.rcv.messages()); n != 1 {
		t.Fatalf("%d messages: Retry-After was not honoured", n)
	}
	f.clock.Add(5 * time.Minute)
	f.step(t)
	if n := len(f.rcv.messages()); n != 2 {
		t.Fatalf("%d messages: the retry after Retry-After did not come", n)
	}
	ep, _ := f.store.Outbound().Endpoint(context.Background(), "ep_test")
	if ep.Enabled || ep.Disabled != models.DisabledGone {
		t.Fatalf("endpoint = %+v, want disabled as gone", ep)
	}
	f.deliver(t, user("user_2", "msg_2", time.Second, "b@example.com"), models.TypeUserCreated)
	f.step(t)
	if n := len(f.rcv.messages()); n != 2 {
		t.Errorf("a disabled endpoint got a message (%d)", n)
	}
}

func TestDispatch_DuringARotationBothSecretsSign(t *testing.T) {
	oldSecret, _ := outbound.NewSecret()
	newSecret, _ := outbound.NewSecret()
	f := newFixture(t, newSecret, oldSecret) // the receiver checks both
	until := t0.Add(time.Hour)
	f.change(t, func(e *models.Endpoint) { e.PreviousSecret, e.PreviousUntil = oldSecret, &until })
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t)
	if n := len(f.rcv.messages()); n != 1 {
		t.Fatalf("%d messages, want 1 verified with both secrets", n)
	}
	// After the overlap, the old secret no longer signs.
	f.rcv.secrets = []string{newSecret}
	f.clock.Add(2 * time.Hour)
	f.deliver(t, user("user_1", "msg_2", 2*time.Second, "b@example.com"), models.TypeUserUpdated)
	f.step(t)
	ms := f.rcv.messages()
	if len(ms) != 2 {
		t.Fatalf("%d messages", len(ms))
	}
}

func TestDispatch_ACascadeIsDeliveredAsTheDeletionsItMade(t *testing.T) {
	f := newFixture(t)
	org := models.OrganizationChange{OrgID: "org_1", EventID: "msg_o1", SourceTime: t0.Add(time.Second),
		Metadata: json.RawMessage(`{}`)}
	f.deliver(t, org, models.TypeOrganizationCreated)
	for _, id := range []string{"orgmem_1", "orgmem_2"} {
		f.deliver(t, models.MembershipChange{MembershipID: id, OrgID: "org_1", UserID: "user_" + id, EventID: "msg_" + id,
			SourceTime: t0.Add(time.Second), Role: "admin", Metadata: json.RawMessage(`{}`)}, models.TypeMembershipCreated)
	}
	f.step(t)
	f.deliver(t, models.OrganizationChange{OrgID: "org_1", EventID: "msg_o2", SourceTime: t0.Add(2 * time.Second), Deleted: true},
		models.TypeOrganizationDeleted)
	f.step(t)
	got := types(f.rcv.messages())
	want := []string{"organization.created", "organizationMembership.created", "organizationMembership.created",
		"organization.deleted", "organizationMembership.deleted", "organizationMembership.deleted"}
	slices.Sort(got[:3])
	slices.Sort(got[3:])
	slices.Sort(want[:3])
	slices.Sort(want[3:])
	if !slices.Equal(got, want) {
		t.Errorf("types = %v, want %v", got, want)
	}
	for _, m := range f.rcv.messages() {
		if m.Type == "organizationMembership.deleted" && m.Origin != models.OriginCascade {
			t.Errorf("a membership deleted by the cascade came from %q", m.Origin)
		}
	}
}

func TestDispatch_OneInstanceAtATimeSends(t *testing.T) {
	f := newFixture(t)
	other := outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "other",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Now: f.clock.Now})
	f.step(t) // "test" takes the lease
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	if err := other.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.rcv.messages()); n != 0 {
		t.Fatalf("the instance without the lease sent %d messages", n)
	}
	f.step(t)
	if n := len(f.rcv.messages()); n != 1 {
		t.Fatalf("the lease holder sent %d messages, want 1", n)
	}
	// The holder stops (it no longer extends the lease): the other takes
	// over once the lease has run out.
	f.deliver(t, user("user_1", "msg_2", 2*time.Second, "b@example.com"), models.TypeUserUpdated)
	f.clock.Add(2 * time.Minute)
	if err := other.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.rcv.messages()); n != 2 {
		t.Errorf("after the lease ran out, the other instance sent %d messages in all, want 2", n)
	}
}

func TestDispatch_AnErasedObjectIsDroppedNotSent(t *testing.T) {
	f := newFixture(t)
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.deliver(t, models.UserChange{UserID: "user_1", EventID: "msg_2", SourceTime: t0.Add(2 * time.Second), Deleted: true}, models.TypeUserDeleted)
	if err := f.d.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.EraseUser(context.Background(), "user_1", f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	f.step(t)
	// The outbox was fanned out after the erasure: the deletion is sent
	// (the tombstone has no personal data); nothing else is.
	for _, m := range f.rcv.messages() {
		if m.Type != "user.deleted" {
			t.Errorf("sent %s of an erased user", m.Type)
		}
	}
}

func TestDispatch_AnObjectThatKeepsFailingBlocksNoOtherObject(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	bad := map[string]bool{}
	f.rcv.srv.Config.Handler = wrapFailing(f.rcv.srv.Config.Handler, func(userID string) bool {
		mu.Lock()
		defer mu.Unlock()
		return bad[userID]
	})
	mu.Lock()
	bad["user_bad"] = true
	mu.Unlock()
	f.deliver(t, user("user_bad", "msg_bad", time.Second, "bad@example.com"), models.TypeUserCreated)
	f.deliver(t, user("user_ok", "msg_ok", time.Second, "ok@example.com"), models.TypeUserCreated)
	f.step(t)
	f.deliver(t, user("user_ok2", "msg_ok2", time.Second, "ok2@example.com"), models.TypeUserCreated)
	f.step(t)
	ctx := context.Background()
	for id, want := range map[string]string{"user_bad": models.DeliveryPending, "user_ok": models.DeliveryDelivered, "user_ok2": models.DeliveryDelivered} {
		d, err := f.store.Outbound().Delivery(ctx, "ep_test", models.KindUser, id)
		if err != nil || d.Status != want {
			t.Errorf("%s: %+v, %v; want %s", id, d.Status, err, want)
		}
	}
}

// wrapFailing answers 500 to a delivery of a user fail names, and passes
// the others to next.
func wrapFailing(next http.Handler, fail func(userID string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Data struct {
				UserID string `json:"userId"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &m)
		if fail(m.Data.UserID) {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func TestDispatch_ARedirectIsAFailedAttemptNotFollowed(t *testing.T) {
	f := newFixture(t)
	f.rcv.answer = func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
		w.WriteHeader(http.StatusFound)
	}
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	f.step(t)
	as, _, err := f.store.Outbound().Attempts(context.Background(), models.AttemptFilter{EndpointID: "ep_test", Limit: 10})
	if err != nil || len(as) != 1 || as[0].Delivered || as[0].Status != http.StatusFound || !strings.Contains(as[0].Error, "redirect") {
		t.Fatalf("attempts = %+v, %v; want one failed 302, not followed", as, err)
	}
	if d, _ := f.store.Outbound().Delivery(context.Background(), "ep_test", models.KindUser, "user_1"); d.Status != models.DeliveryPending || d.Attempts != 1 {
		t.Errorf("delivery = %+v, want pending, retried on the schedule", d)
	}
}

func TestDispatch_OneEndpointsBacklogHoldsNoOtherEndpointUp(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	b := f.ep
	b.ID, b.URL, b.EventTypes = "ep_other", f.rcv.srv.URL+"/other", []string{"organization.*"}
	f.change(t, func(e *models.Endpoint) { e.EventTypes = []string{"user.*"} })
	if err := f.store.Outbound().CreateEndpoint(ctx, b); err != nil {
		t.Fatal(err)
	}
	f.d = outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Now: f.clock.Now,
		MaxInFlight: 2, PerEndpoint: 1})
	if err := f.d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // a backlog of users, due first
		f.deliver(t, user(fmt.Sprintf("user_%d", i), fmt.Sprintf("msg_u%d", i), time.Second, ""), models.TypeUserCreated)
	}
	f.step(t) // one user is sent (one at a time per endpoint), four wait
	f.clock.Add(time.Millisecond)
	f.deliver(t, models.OrganizationChange{OrgID: "org_1", EventID: "msg_o1", SourceTime: t0, Metadata: json.RawMessage(`{}`)},
		models.TypeOrganizationCreated)
	f.step(t)
	var paths []string
	for _, m := range f.rcv.messages() {
		paths = append(paths, m.Path)
	}
	if len(paths) != 3 || !slices.Contains(paths, "/other") {
		t.Errorf("the first round sent %v: the other endpoint waited behind the users' backlog", paths)
	}
}

// TestDispatch_AnEndpointCreatedSinceTheLastReadMissesNoChange: a round
// reads the endpoints before the outbox, but the relay reads them again, so a change
// recorded for an endpoint created since is sent to it.
func TestDispatch_AnEndpointCreatedSinceTheLastReadMissesNoChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.store.Outbound().DeleteEndpoint(ctx, f.ep.ID); err != nil {
		t.Fatal(err)
	}
	d := outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "run",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Poll: time.Hour})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	// Created (as the API does: recording on at once) after Run's read.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ok, _ := f.store.Leases().Acquire(ctx, outbound.LeaseName, "probe", time.Now(), time.Now()); !ok {
			break // Run holds the lease: it has read the endpoints (none)
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never took the lease")
		}
	}
	if err := f.store.Outbound().CreateEndpoint(ctx, f.ep); err != nil {
		t.Fatal(err)
	}
	f.store.Outbound().SetRecording(true)
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	d.Notify()
	for deadline := time.Now().Add(10 * time.Second); len(f.rcv.messages()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the change recorded for the new endpoint was never sent")
		}
	}
}

// racing is a store whose read of the endpoints has something happen
// while it runs (after it read them).
type racing struct {
	repository.Store
	ob racingOutbound
}

func (r racing) Outbound() repository.Outbound { return r.ob }

type racingOutbound struct {
	repository.Outbound
	during func()
}

func (r racingOutbound) Endpoints(ctx context.Context) ([]models.Endpoint, error) {
	eps, err := r.Outbound.Endpoints(ctx)
	if r.during != nil {
		r.during()
	}
	return eps, err
}

// TestDispatch_ARefreshUnderWayDoesNotTurnOffTheRecordingOfANewEndpoint:
// an endpoint created while a read of the endpoints is under way turns
// recording on (RecordNow), and that read, which did not see it, does not
// turn it off: the changes applied meanwhile are recorded.
func TestDispatch_ARefreshUnderWayDoesNotTurnOffTheRecordingOfANewEndpoint(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.store.Outbound().DeleteEndpoint(ctx, f.ep.ID); err != nil {
		t.Fatal(err)
	}
	var d *outbound.Dispatcher
	ob := racingOutbound{Outbound: f.store.Outbound()}
	ob.during = func() { d.RecordNow() } // the API, creating an endpoint, during the read
	d = outbound.NewDispatcher(outbound.Options{Store: racing{Store: f.store, ob: ob}, Render: render(f.store), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Now: f.clock.Now})
	if err := d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	f.deliver(t, user("user_1", "msg_1", time.Second, "a@example.com"), models.TypeUserCreated)
	if entries, err := f.store.Outbound().Outbox(ctx, 10); err != nil || len(entries) != 1 {
		t.Errorf("outbox = %+v, %v; want the change recorded", entries, err)
	}
}

// TestDispatch_AStoppedDispatcherReleasesItsLease: once Run ends (a
// graceful stop), its lease is free for another instance at once, not
// when it runs out.
func TestDispatch_AStoppedDispatcherReleasesItsLease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "run",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Now: f.clock.Now, Lease: time.Hour})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(runCtx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ok, _ := f.store.Leases().Acquire(ctx, outbound.LeaseName, "other", t0, t0); !ok {
			break // Run holds the lease
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never took the lease")
		}
	}
	cancel()
	<-done
	if ok, err := f.store.Leases().Acquire(ctx, outbound.LeaseName, "other", t0, t0.Add(time.Minute)); !ok || err != nil {
		t.Errorf("the lease after Run stopped = %v, %v; want it free", ok, err)
	}
}
