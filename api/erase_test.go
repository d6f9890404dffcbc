package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// personal is what the erased user's payloads say about the person.
var personal = []string{
	"sam.okafor@example.net", "+442079460958", "+12025550143", "+33142685300",
	"Okafor", "sam_okafor", "acct-4417", "198.51.100.7",
}

// personBody is the multi-phone fixture as user id, with an email too.
func personBody(t testing.TB, typ, id string, updatedAt int64) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, "user.updated.multi-phone.json"), &env); err != nil {
		t.Fatal(err)
	}
	env["type"] = typ
	d := env["data"].(map[string]any)
	d["id"], d["updated_at"] = id, updatedAt
	d["email_addresses"] = []any{map[string]any{"id": "idn_mail", "email_address": "Sam.Okafor@example.net", "object": "email_address"}}
	d["primary_email_address_id"] = "idn_mail"
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// leftovers returns every needle found anywhere in what the store keeps,
// read around its API (see repotest.Raw).
func (h *harness) leftovers(needles []string) []string {
	h.t.Helper()
	raw := repotest.Raw(h.t, h.store)
	var found []string
	for _, n := range needles {
		if strings.Contains(raw, strings.ToLower(n)) {
			found = append(found, n)
		}
	}
	return found
}

func TestErase_EndpointLeavesNoPersonalDataOfADeletedUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const id = "user_erase1"
	created, updated := newID(), newID()
	h.mustDeliver(created, personBody(t, "user.created", id, t0))
	h.mustDeliver(updated, personBody(t, "user.updated", id, t0+1000))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_keep", UpdatedAt: t0, Email: "keep@example.com", First: "Kept"}))
	if found := h.leftovers(personal); len(found) < len(personal) {
		t.Fatalf("before erasure the scan finds only %v: it cannot be trusted", found)
	}

	for _, tc := range []struct {
		path, key string
		want      int
	}{
		{"/v1/users/" + id + "/erase", testAPIKey, http.StatusForbidden},
		{"/v1/users/user_unknown/erase", testAdminKey, http.StatusNotFound},
		{"/v1/users/" + id + "/erase", testAdminKey, http.StatusConflict}, // still active
	} {
		if r := h.postAs(tc.path, tc.key); r.Code != tc.want {
			t.Errorf("POST %s = %s, want %d", tc.path, r, tc.want)
		}
	}
	if h.event(created)["erasedAt"] != nil {
		t.Fatal("a refused erase erased")
	}

	h.mustDeliver(newID(), deleteBody(t, id, t0+2000))
	r := h.postAs("/v1/users/"+id+"/erase", testAdminKey)
	if r.Code != http.StatusOK {
		t.Fatalf("erase = %s", r)
	}
	if got, want := r.JSON(t), map[string]any{"userId": id, "erasedEvents": 3.0, "pendingEvents": 0.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("erase = %v, want %v", got, want)
	}
	if found := h.leftovers(personal); len(found) > 0 {
		t.Errorf("personal data left after erasure: %v", found)
	}
	if found := h.leftovers([]string{"keep@example.com", "Kept"}); len(found) != 2 {
		t.Errorf("the active user's data: found %v, want it kept", found)
	}

	// The log still tells what happened, without the body.
	ev := h.get("/v1/events/"+created, testAdminKey).JSON(t)
	for k, want := range map[string]any{"erased": true, "status": "processed", "outcome": "applied", "type": "user.created", "eventType": "created", "userId": id} {
		if ev[k] != want {
			t.Errorf("erased event %s = %v, want %v", k, ev[k], want)
		}
	}
	if _, ok := ev["payload"]; ok || ev["receivedAt"] == nil || ev["processedAt"] == nil || ev["sourceTimestamp"] == nil {
		t.Errorf("erased event = %v, want times and no payload", ev)
	}

	// Replaying an erased event changes nothing.
	before := h.event(updated)
	if r := h.postAs("/v1/events/"+updated+"/replay", testAdminKey); r.Code != http.StatusConflict {
		t.Errorf("replay of an erased event = %s, want 409", r)
	}
	if after := h.event(updated); !reflect.DeepEqual(before, after) {
		t.Errorf("replay changed the erased event:\n%v\n%v", before, after)
	}
	// Erasing again finds nothing more.
	if r := h.postAs("/v1/users/"+id+"/erase", testAdminKey); r.Code != http.StatusOK || r.JSON(t)["erasedEvents"] != 0.0 {
		t.Errorf("second erase = %s, want 0 events", r)
	}
}

func TestErase_ByAgeInTheBackgroundLoopOnlyOnceEventsAreProcessed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const id = "user_erase2"
	clock := time.Now()
	svc := sync.New(h.store.Events(), h.store, nil)
	rec := &sync.Recovery{Service: svc, Store: h.store.Events(), Eraser: h.store, EraseAfter: 30 * 24 * time.Hour,
		Grace: time.Minute, Now: func() time.Time { return clock }}
	erase := func(want models.Erasure) {
		t.Helper()
		got, err := rec.EraseOnce(ctx)
		if err != nil || got != want {
			t.Fatalf("EraseOnce = %+v, %v; want %+v", got, err, want)
		}
	}

	h.mustDeliver(newID(), personBody(t, "user.created", id, t0))
	h.mustDeliver(newID(), deleteBody(t, id, clock.Add(-24*time.Hour).UnixMilli()))
	// An update stored before a crash, never applied.
	stuck := personBody(t, "user.updated", id, t0+1000)
	if _, _, err := h.store.Events().Record(ctx, models.Event{
		EventID: "msg_stuck", Type: models.TypeUserUpdated, EventType: models.EventUpdated, UserID: id,
		RawBody: stuck, Source: models.SourceClerk, ReceivedAt: clock.Add(-time.Hour).UTC(), Status: models.StatusStored,
	}); err != nil {
		t.Fatal(err)
	}

	erase(models.Erasure{}) // deleted a day ago: not yet
	rec.EraseAfter = 0
	clock = clock.Add(31 * 24 * time.Hour)
	erase(models.Erasure{}) // 0: never
	rec.EraseAfter = 30 * 24 * time.Hour
	erase(models.Erasure{Events: 2, Pending: 1})
	if h.event("msg_stuck")["rawBody"] == nil {
		t.Fatal("a stored event was erased before it was processed")
	}
	if _, err := rec.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := h.event("msg_stuck"); ev["status"] != "processed" || ev["outcome"] != "deleted" {
		t.Fatalf("swept event = %v", ev)
	}
	erase(models.Erasure{Users: 1, Events: 1})
	if found := h.leftovers(personal); len(found) > 0 {
		t.Errorf("personal data left after erasure: %v", found)
	}
	erase(models.Erasure{}) // nothing left to do

	// The sweep, the replay command and the API process events through
	// Process: an erased event is refused and left as it is.
	before := h.event("msg_stuck")
	ev, err := h.store.Events().Get(ctx, "msg_stuck")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Process(ctx, ev); !errors.Is(err, models.ErrConflict) {
		t.Errorf("Process(erased event) = %v, want a conflict", err)
	}
	if after := h.event("msg_stuck"); !reflect.DeepEqual(before, after) {
		t.Errorf("Process changed the erased event:\n%v\n%v", before, after)
	}

	// A late delivery for the erased user is erased at once.
	late := newID()
	if res := h.mustDeliver(late, personBody(t, "user.updated", id, t0+5000)); res["outcome"] != "deleted" {
		t.Fatalf("late delivery = %v", res)
	}
	if found := h.leftovers(personal); len(found) > 0 {
		t.Errorf("personal data left after erasing a late event: %v", found)
	}
	if res, err := h.store.EraseDeletedBefore(context.Background(), time.Now().Add(time.Hour), time.Now()); err != nil || res != (models.Erasure{}) {
		t.Errorf("a pass after erasing everything = %+v, %v; want nothing left to erase", res, err)
	}
}

func TestErase_EndpointLeavesPendingEventsToTheLoopEvenForARecentDelete(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	const id = "user_erase3"
	svc := sync.New(h.store.Events(), h.store, nil)
	rec := &sync.Recovery{Service: svc, Store: h.store.Events(), Eraser: h.store, EraseAfter: 30 * 24 * time.Hour}

	h.mustDeliver(newID(), personBody(t, "user.created", id, t0))
	h.mustDeliver(newID(), deleteBody(t, id, time.Now().UnixMilli())) // deleted just now
	if _, _, err := h.store.Events().Record(ctx, models.Event{
		EventID: "msg_stuck3", Type: models.TypeUserUpdated, EventType: models.EventUpdated, UserID: id,
		RawBody: personBody(t, "user.updated", id, t0+1000), Source: models.SourceClerk,
		ReceivedAt: time.Now().Add(-time.Hour).UTC(), Status: models.StatusStored,
	}); err != nil {
		t.Fatal(err)
	}
	r := h.postAs("/v1/users/"+id+"/erase", testAdminKey)
	if got := r.JSON(t); r.Code != http.StatusOK || got["erasedEvents"] != 2.0 || got["pendingEvents"] != 1.0 {
		t.Fatalf("erase = %s, want 2 erased and 1 pending", r)
	}
	rec.Grace = time.Minute
	if _, err := rec.SweepOnce(ctx); err != nil { // applies it: deleted
		t.Fatal(err)
	}
	if got, err := rec.EraseOnce(ctx); err != nil || got != (models.Erasure{Users: 1, Events: 1}) {
		t.Errorf("EraseOnce = %+v, %v; want the pending event erased although the user was deleted just now", got, err)
	}
	if found := h.leftovers(personal); len(found) > 0 {
		t.Errorf("personal data left: %v", found)
	}
}
