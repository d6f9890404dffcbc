package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// What a hostile caller or an unlucky day did to outbound webhooks, each
// answered where it happened: the endpoints' limit in the write, a
// rotation's two secrets at most, descriptions that show what they hold,
// and an erased user's deletion told to an app that was down.

// TestOutbound_AnErasedUsersDeletionReachesAnEndpointThatWasDown: an app
// that received a user's creation (with the email) and was down when the
// deletion came is told of it once it is back, even though an admin
// erased the user meanwhile: the tombstone, with no personal data.
func TestOutbound_AnErasedUsersDeletionReachesAnEndpointThatWasDown(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	h := newHarness(t, func(o *harnessOptions) {
		o.outbound = true
		o.now = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	app := newAppReceiver(t)
	h.register(app, "user.*")
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_erased", UpdatedAt: t0, Email: "gone@example.com"}))
	h.step()
	app.setStatus(http.StatusServiceUnavailable) // the app goes down
	h.mustDeliver(newID(), deleteBody(t, "user_erased", t0+1000))
	h.step()
	if ms := app.messages(); len(ms) != 2 || ms[1].Type != "user.deleted" {
		t.Fatalf("messages = %+v, want the creation, then the deletion tried once", ms)
	}
	if r := h.send(http.MethodPost, "/v1/users/user_erased/erase", ""); r.Code != http.StatusOK {
		t.Fatalf("erase: %s", r)
	}
	app.setStatus(0)              // back
	clock.Add(int64(time.Minute)) // past the first retry's 5 s
	h.step()
	ms := app.messages()
	if len(ms) != 3 || ms[2].Type != "user.deleted" || ms[2].ID != ms[1].ID {
		t.Fatalf("messages = %+v, want the deletion again, with its webhook-id", ms)
	}
	var data map[string]any
	if err := json.Unmarshal(ms[2].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data["userId"] != "user_erased" || data["deletedAt"] == nil || strings.Contains(string(ms[2].Data), "gone@example.com") {
		t.Errorf("the deletion after the erasure = %s; want the tombstone, without the email", ms[2].Data)
	}
}

// TestOutbound_AtMostFiftyEndpointsHoweverManyCreatesRace: 64 creates at
// once store the 50 usersync keeps, and refuse the others with a 409.
func TestOutbound_AtMostFiftyEndpointsHoweverManyCreatesRace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	var created, refused atomic.Int32
	var wg stdsync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/hook"}`); r.Code {
			case http.StatusCreated:
				created.Add(1)
			case http.StatusConflict:
				refused.Add(1)
				if !strings.Contains(string(r.Body), "delete one first") {
					t.Errorf("the refusal does not say what to do: %s", r)
				}
			default:
				t.Errorf("create = %s", r)
			}
		}()
	}
	wg.Wait()
	var list struct {
		Endpoints []map[string]any `json:"endpoints"`
	}
	if err := json.Unmarshal(h.get("/v1/endpoints", testAdminKey).Body, &list); err != nil {
		t.Fatal(err)
	}
	if created.Load() != models.MaxEndpoints || refused.Load() != 64-models.MaxEndpoints || len(list.Endpoints) != models.MaxEndpoints {
		t.Errorf("%d created, %d refused, %d stored; want %d, %d, %d", created.Load(), refused.Load(), len(list.Endpoints),
			models.MaxEndpoints, 64-models.MaxEndpoints, models.MaxEndpoints)
	}
}

// TestOutbound_ASecondRotationInsideTheOverlapIsRefusedUnlessItReplacesBoth:
// an endpoint keeps two secrets at most. A rotation while the previous
// secret still signs is refused with the time its overlap ends; one with
// no overlap (a secret that leaked) replaces both at once.
func TestOutbound_ASecondRotationInsideTheOverlapIsRefusedUnlessItReplacesBoth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app)
	first := h.send(http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", `{"overlap": "1h"}`)
	if first.Code != http.StatusOK {
		t.Fatalf("first rotation: %s", first)
	}
	until := first.JSON(t)["previousSecretUntil"].(string)
	r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", `{"overlap": "1h"}`)
	if r.Code != http.StatusConflict || !strings.Contains(string(r.Body), until) || !strings.Contains(string(r.Body), "two secrets") {
		t.Errorf("a second rotation inside the overlap = %s; want 409 naming %s", r, until)
	}
	r = h.send(http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", `{"overlap": "0s"}`)
	if r.Code != http.StatusOK || r.JSON(t)["previousSecretUntil"] != nil {
		t.Fatalf("a rotation with no overlap inside one = %s; want both replaced", r)
	}
	app.setSecrets(r.JSON(t)["secret"].(string)) // the only one that signs now
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_rot", UpdatedAt: t0}))
	h.step()
	if ms := app.messages(); len(ms) != 1 {
		t.Errorf("messages = %+v, want one, signed with the new secret alone", ms)
	}
}

// TestOutbound_ADescriptionWithControlCharactersIsRefused: a description
// shows what it holds, in the console and the logs: no control
// characters, no bidirectional overrides.
func TestOutbound_ADescriptionWithControlCharactersIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	for _, d := range []string{`a\nb`, `bell\u0007`, `safe\u202Egnp.exe`, `iso\u2066late`, `mark\u200F`, `del\u007F`} {
		r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/hook", "description": "`+d+`"}`)
		if r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), "description") {
			t.Errorf("description %s = %s; want 400 naming description", d, r)
		}
	}
	if r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "https://example.com/hook", "description": "CRM — prod, ünïcode ok"}`); r.Code != http.StatusCreated {
		t.Errorf("a plain description = %s", r)
	}
}
