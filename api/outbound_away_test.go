package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	stdsync "sync"
	"testing"

	"github.com/usersync/usersync/models"
)

// What an endpoint gets after it was away: disabled, it keeps the newest
// state of each object, and the failed ones are sent again once it is
// enabled; a resync sends it every object it wants; a 410 keeps nothing.

// drain steps the dispatcher until a round sends nothing new, at most
// rounds times, and returns the messages received.
func (h *harness) drain(app *appReceiver, rounds int) []message {
	h.t.Helper()
	n := -1
	for range rounds {
		h.step()
		if got := len(app.messages()); got == n {
			break
		} else {
			n = got
		}
	}
	return app.messages()
}

// newestByObject is, per object id, the messages received of it.
func byObject(t *testing.T, ms []message, key string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, m := range ms {
		var d map[string]any
		if err := json.Unmarshal(m.Data, &d); err != nil {
			t.Fatal(err)
		}
		id, _ := d[key].(string)
		out[id] = append(out[id], d)
	}
	return out
}

func TestOutbound_ADisabledEndpointEnabledAgainReceivesEachObjectsNewestState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app, "user.*")
	if r := h.send(http.MethodPatch, "/v1/endpoints/"+id, `{"enabled": false}`); r.Code != http.StatusOK {
		t.Fatalf("disable: %s", r)
	}
	const users = 1000
	// Eight senders, as Clerk's deliveries come several at once; each
	// user's events in order, from one of them.
	var wg stdsync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < users; i += 8 {
				u := clerkUser{ID: fmt.Sprintf("user_away%04d", i), UpdatedAt: t0, First: "first"}
				bodies := [][]byte{userBody(t, "user.created", u)}
				if i%2 == 0 {
					u.UpdatedAt, u.First = t0+1000, "second"
					bodies = append(bodies, userBody(t, "user.updated", u))
				}
				for _, b := range bodies {
					if r := h.deliver(newID(), b); r.Code != http.StatusOK {
						t.Errorf("deliver %s's event: %s", u.ID, r)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if ms := h.drain(app, 3); len(ms) != 0 {
		t.Fatalf("a disabled endpoint received %d messages", len(ms))
	}
	if r := h.send(http.MethodGet, "/v1/endpoints/"+id, ""); r.JSON(t)["backlog"].(float64) != users {
		t.Errorf("the disabled endpoint keeps %v changes, want one per user, %d", r.JSON(t)["backlog"], users)
	}
	if r := h.send(http.MethodPatch, "/v1/endpoints/"+id, `{"enabled": true}`); r.Code != http.StatusOK {
		t.Fatalf("enable: %s", r)
	}
	got := byObject(t, h.drain(app, 200), "userId")
	if len(got) != users {
		t.Fatalf("%d users received, want %d", len(got), users)
	}
	for i := range users {
		uid := fmt.Sprintf("user_away%04d", i)
		want := "first"
		if i%2 == 0 {
			want = "second"
		}
		if ds := got[uid]; len(ds) != 1 || ds[0]["firstName"] != want {
			t.Fatalf("%s received %v, want its newest state (%s) once", uid, ds, want)
		}
	}
}

func TestOutbound_AnEndpointEnabledAgainIsSentWhatFailedWhileItWasAway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app, "user.*")
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_failed", UpdatedAt: t0}))
	app.setStatus(http.StatusInternalServerError)
	h.step()
	// Its schedule ends (eight attempts, about 28 hours): failed.
	ctx := context.Background()
	d, err := h.store.Outbound().Delivery(ctx, id, models.KindUser, "user_failed")
	if err != nil || d.Attempts != 1 {
		t.Fatalf("delivery = %+v, %v; want one attempt failed", d, err)
	}
	r := d
	r.Status, r.Attempts = models.DeliveryFailed, 8
	if err := h.store.Outbound().Settle(ctx, models.Settlement{Sent: d, Result: r, Attempt: models.Attempt{}}); err != nil {
		t.Fatal(err)
	}
	h.send(http.MethodPatch, "/v1/endpoints/"+id, `{"enabled": false}`)
	app.setStatus(0)
	before := len(app.messages())
	h.send(http.MethodPatch, "/v1/endpoints/"+id, `{"enabled": true}`)
	ms := h.drain(app, 5)
	if len(ms) != before+1 || ms[len(ms)-1].Type != "user.created" {
		t.Errorf("after enabling: %d new messages (%+v), want the failed creation once", len(ms)-before, ms[before:])
	}
}

func TestOutbound_AResyncSendsEveryWantedObjectOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	for i := range 30 {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_rs%02d", i), UpdatedAt: t0}))
	}
	h.mustDeliver(newID(), deleteBody(t, "user_rs00", t0+1000))
	app := newAppReceiver(t)
	id := h.register(app, "user.*") // after the users: it has none of them
	if r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/replay", `{"kind": "user", "objectId": "user_rs01"}`); r.Code != http.StatusNotFound ||
		!strings.Contains(string(r.Body), "resync") {
		t.Errorf("a replay of an object the endpoint never had = %s; want 404 pointing at resync", r)
	}
	r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/resync", "")
	if r.Code != http.StatusAccepted || r.JSON(t)["resync"] == nil {
		t.Fatalf("resync: %s", r)
	}
	got := byObject(t, h.drain(app, 50), "userId")
	if len(got) != 29 || got["user_rs00"] != nil {
		t.Fatalf("%d users received (%v); want the 29 active ones, not the deleted one", len(got), len(got["user_rs00"]))
	}
	for uid, ds := range got {
		if len(ds) != 1 {
			t.Errorf("%s received %d times, want once", uid, len(ds))
		}
	}
	for _, m := range app.messages() {
		if m.Origin != models.OriginResync || m.Type != "user.updated" || len(m.Changed) == 0 {
			t.Fatalf("a resync's message = %+v; want user.updated from resync, every field changed", m)
		}
	}
	ep := h.send(http.MethodGet, "/v1/endpoints/"+id, "").JSON(t)
	if rs := ep["resync"].(map[string]any); rs["doneAt"] == nil || rs["queued"].(float64) != 29 {
		t.Errorf("the endpoint's resync after it = %v; want done, 29 queued", rs)
	}
	// With the deleted objects: the tombstone too; the others again, whole.
	h.send(http.MethodPost, "/v1/endpoints/"+id+"/resync", `{"includeDeleted": true}`)
	ms := h.drain(app, 50)[29:]
	again := byObject(t, ms, "userId")
	if len(again) != 30 || len(again["user_rs00"]) != 1 || again["user_rs00"][0]["deletedAt"] == nil {
		t.Errorf("a resync with the deleted objects sent %d users; want 30, the deleted one as its tombstone", len(again))
	}
}

func TestOutbound_AnEndpointGoneKeepsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app, "user.*")
	app.setStatus(http.StatusGone)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_gone1", UpdatedAt: t0}))
	h.step()
	if ep := h.send(http.MethodGet, "/v1/endpoints/"+id, "").JSON(t); ep["enabled"] != false || ep["disabledReason"] != "gone" {
		t.Fatalf("after a 410: %v", ep)
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_gone2", UpdatedAt: t0}))
	h.step()
	if b := h.send(http.MethodGet, "/v1/endpoints/"+id, "").JSON(t)["backlog"]; b.(float64) != 0 {
		t.Errorf("an endpoint gone keeps %v changes, want none", b)
	}
}
