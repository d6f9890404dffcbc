package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// sessionBody is a session event of type typ for the user of u, active at
// activeAt (Unix ms), embedding u's state as user.updated would carry it
// (nil: "user": null); edit, if set, edits the embedded user.
func sessionBody(t testing.TB, typ string, u *clerkUser, userID string, activeAt int64, edit func(user map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, "session.created.json"), &env); err != nil {
		t.Fatal(err)
	}
	env["type"], env["timestamp"] = typ, activeAt+40
	d := env["data"].(map[string]any)
	d["user_id"], d["last_active_at"], d["created_at"], d["updated_at"] = userID, activeAt, activeAt-1000, activeAt
	d["user"] = nil
	if u != nil {
		var ue map[string]any
		if err := json.Unmarshal(userBody(t, "user.updated", *u), &ue); err != nil {
			t.Fatal(err)
		}
		user := ue["data"].(map[string]any)
		user["banned"], user["locked"] = false, false // Clerk's user object today carries both
		if edit != nil {
			edit(user)
		}
		d["user"] = user
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSessions_ASignInMovesLastActiveAtAndSendsNothing: a session event
// whose user state is not newer moves only lastActiveAt (never
// backwards), which the user's JSON shows, with updatedAt, the change feed
// and outbound webhooks unmoved; one whose user state is newer applies it,
// sent as user.updated from the session, lastActiveAt not named changed.
func TestSessions_ASignInMovesLastActiveAtAndSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	h.register(app)
	base := time.Now().Add(-time.Hour).UnixMilli()
	u := clerkUser{ID: "user_sess1", UpdatedAt: base, Email: "s1@example.com", First: "Ada"}
	h.mustDeliver("msg_sess1_created", userBody(t, "user.created", u))
	h.step()
	before := h.user("user_sess1")
	if before["lastActiveAt"] != nil {
		t.Fatalf("lastActiveAt of a user no session told of = %v, want null", before["lastActiveAt"])
	}
	for _, step := range []struct {
		id, typ string
		active  int64
		want    string
	}{
		{"msg_sess1_a", "session.created", base + 5000, "activity"},
		{"msg_sess1_b", "session.ended", base + 3000, "stale"}, // an older activity: never backwards
		{"msg_sess1_c", "session.revoked", base + 9000, "activity"},
	} {
		got := h.mustDeliver(step.id, sessionBody(t, step.typ, &u, u.ID, step.active, nil))
		if got["outcome"] != step.want || got["status"] != "processed" {
			t.Errorf("%s at +%d ms: %v, want processed, outcome %s", step.typ, step.active-base, got, step.want)
		}
	}
	after := h.user("user_sess1")
	if want := time.UnixMilli(base + 9000).UTC().Format("2006-01-02T15:04:05.000Z07:00"); after["lastActiveAt"] != want {
		t.Errorf("lastActiveAt = %v, want %s", after["lastActiveAt"], want)
	}
	if after["updatedAt"] != before["updatedAt"] {
		t.Errorf("updatedAt moved from %v to %v: a sign-in is not a change of the user", before["updatedAt"], after["updatedAt"])
	}
	h.step()
	if ms := app.messages(); len(ms) != 1 {
		t.Errorf("messages = %d, want the creation only: a sign-in sends nothing", len(ms))
	}
	if ev := h.event("msg_sess1_a"); ev["userId"] != "user_sess1" || ev["type"] != "session.created" || ev["outcome"] != "activity" {
		t.Errorf("the stored session event = %v, want its user, type and outcome", ev)
	}

	// A newer state of the user in a session event applies and is sent.
	u.UpdatedAt, u.First = base+10000, "Ada L."
	if got := h.mustDeliver("msg_sess1_d", sessionBody(t, "session.created", &u, u.ID, base+11000, nil)); got["outcome"] != "applied" {
		t.Errorf("a session with a newer user state: %v, want applied", got)
	}
	h.step()
	ms := app.messages()
	if len(ms) != 2 || ms[1].Type != "user.updated" || ms[1].Origin != "session" || !slices.Equal(ms[1].Changed, []string{"displayName", "firstName"}) {
		t.Fatalf("messages = %+v (the last changed %v), want a user.updated from the session naming displayName and firstName changed only", ms, ms[len(ms)-1].Changed)
	}
	if !sameJSON(t, ms[1].Data, h.admin("/v1/users/user_sess1?includeDeleted=true")) {
		t.Errorf("data = %s, want the admin's read of the user", ms[1].Data)
	}
}

// TestSessions_AnUnknownUserIsCreatedFromACompleteEmbeddedUserOnly: a
// session event of a user the copy does not know creates it from a
// complete embedded user, and not from a null or an incomplete one (its
// activity then waits for the user's own event).
func TestSessions_AnUnknownUserIsCreatedFromACompleteEmbeddedUserOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	base := time.Now().Add(-time.Hour).UnixMilli()
	u := clerkUser{ID: "user_sess2", UpdatedAt: base, Email: "s2@example.com", First: "Grace"}
	for id, body := range map[string][]byte{
		"msg_sess2_null": sessionBody(t, "session.created", nil, u.ID, base+1000, nil),
		"msg_sess2_incomplete": sessionBody(t, "session.pending", &u, u.ID, base+2000, func(user map[string]any) {
			delete(user, "email_addresses")
		}),
	} {
		if got := h.mustDeliver(id, body); got["outcome"] != "ignored" {
			t.Errorf("%s: %v, want outcome ignored", id, got)
		}
		if got := h.user(u.ID); got != nil {
			t.Fatalf("%s created the user: %v", id, got)
		}
	}
	if got := h.mustDeliver("msg_sess2_full", sessionBody(t, "session.created", &u, u.ID, base+500, nil)); got["outcome"] != "applied" {
		t.Errorf("a complete embedded user: %v, want applied", got)
	}
	got := h.user(u.ID)
	if want := time.UnixMilli(base + 2000).UTC().Format("2006-01-02T15:04:05.000Z07:00"); got == nil || got["email"] != "s2@example.com" ||
		got["firstName"] != "Grace" || got["lastActiveAt"] != want {
		t.Errorf("user = %v, want s2@example.com, Grace, last active %s (the newest of its sessions)", got, want)
	}
}

// TestSessions_AnInvalidSessionIsStoredFailedWithItsUser: a session
// event with no activity time is a 400, stored as failed under its user,
// so that erasure and the event log find it.
func TestSessions_AnInvalidSessionIsStoredFailedWithItsUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := sessionBody(t, "session.removed", nil, "user_sess3", 0, nil)
	if r := h.deliver("msg_sess3", body); r.Code != 400 {
		t.Fatalf("a session with no activity time: %s, want 400", r)
	}
	if ev := h.event("msg_sess3"); ev["status"] != "failed" || ev["userId"] != "user_sess3" {
		t.Errorf("stored event = %v, want failed, of user_sess3", ev)
	}
}

// TestSessions_AFailedSessionEventIsReplayedAsDelivered: a session event
// whose apply failed is stored, failed, under its user, and an admin's
// replay applies it on the delivery's path.
func TestSessions_AFailedSessionEventIsReplayedAsDelivered(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	h := newHarness(t, func(o *harnessOptions) {
		o.beforeApply = func(_ context.Context, ch models.Change) error {
			if _, ok := ch.(models.SessionChange); ok && failed.CompareAndSwap(false, true) {
				return errors.New("the disk hiccuped")
			}
			return nil
		}
	})
	base := time.Now().Add(-time.Hour).UnixMilli()
	u := clerkUser{ID: "user_sess4", UpdatedAt: base, Email: "s4@example.com", First: "Ada"}
	h.mustDeliver("msg_sess4_created", userBody(t, "user.created", u))
	if r := h.deliver("msg_sess4_a", sessionBody(t, "session.created", &u, u.ID, base+5000, nil)); r.Code < 500 {
		t.Fatalf("a session event whose apply failed: %s, want a 5xx", r)
	}
	if ev := h.event("msg_sess4_a"); ev["status"] != "failed" || ev["userId"] != "user_sess4" {
		t.Fatalf("stored event = %v, want failed, of user_sess4", ev)
	}
	if r := h.send("POST", "/v1/events/msg_sess4_a/replay", ""); r.Code != 200 || r.JSON(t)["outcome"] != "activity" {
		t.Errorf("replay = %s, want 200, outcome activity", r)
	}
	if want := time.UnixMilli(base + 5000).UTC().Format("2006-01-02T15:04:05.000Z07:00"); h.user(u.ID)["lastActiveAt"] != want {
		t.Errorf("lastActiveAt after the replay = %v, want %s", h.user(u.ID)["lastActiveAt"], want)
	}
}
