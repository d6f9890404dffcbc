package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises of session events: a user's lastActiveAt follows the
// newest activity of its sessions in every order of arrival, never moves
// a deleted user, and moves neither updatedAt nor the outbox; the user
// state a session embeds applies under the user rule when strictly newer,
// and creates a user the copy does not know.

// session is a session event of userID whose activity is at t0+active,
// embedding user (nil: none, or an incomplete one).
func session(userID, eventID string, active time.Duration, user *models.UserChange) models.SessionChange {
	if user != nil {
		u := *user
		u.EventID = eventID // the embedded state's version is the event's id
		user = &u
	}
	return models.SessionChange{UserID: userID, EventID: eventID, ActiveAt: t0.Add(active), User: user}
}

// sessionEvent is the stored event that carries ch.
func sessionEvent(ch models.SessionChange) models.Event {
	ts := models.EventTime(ch)
	return models.Event{EventID: ch.EventID, Type: models.TypeSessionCreated, EventType: models.EventSession,
		UserID: ch.UserID, RawBody: []byte(`{}`), Source: models.SourceClerk, SourceTimestamp: &ts,
		ReceivedAt: t0, Status: models.StatusStored}
}

// userEvent is the stored event that carries the user change ch.
func userEvent(ch models.UserChange) models.Event {
	et := models.EventUpdated
	if ch.Deleted {
		et = models.EventDeleted
	}
	return eventOf(ch, et)
}

// deliverAt delivers ch in its event at now and returns its outcome.
func deliverAt(t *testing.T, s repository.Store, ch models.Change, now time.Time) models.Outcome {
	t.Helper()
	var ev models.Event
	switch c := ch.(type) {
	case models.SessionChange:
		ev = sessionEvent(c)
	case models.UserChange:
		ev = userEvent(c)
	}
	d, err := s.Deliver(context.Background(), ev, ch, now)
	if err != nil {
		t.Fatalf("Deliver(%s): %v", ch.Version().EventID, err)
	}
	return d.Outcome
}

func sameTime(a, b *time.Time) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Equal(*b))
}

func timeString(p *time.Time) string {
	if p == nil {
		return "null"
	}
	return p.UTC().Format(time.RFC3339Nano)
}

// sessionOrders runs every order of arrival of steps, each on a user of its
// own (the steps name "user_s"), and calls check with the user's id and the
// outbox entries of that user recorded meanwhile. User states are
// delivered at userNow, session events at sessionNow: a user's updatedAt
// says which wrote it last.
func sessionOrders(t *testing.T, s repository.Store, steps []func(userID string) models.Change,
	check func(t *testing.T, userID string, outbox []models.Outboxed)) {
	s.Outbound().SetRecording(true)
	for i, order := range permutations(steps) {
		userID := fmt.Sprintf("user_s%d", i)
		before := outboxOf(t, s)
		var names []string
		for _, step := range order {
			ch := step(userID)
			now := userNow
			if _, ok := ch.(models.SessionChange); ok {
				now = sessionNow
			}
			names = append(names, strings.TrimSuffix(ch.Version().EventID, "_"+userID))
			deliverAt(t, s, ch, now)
		}
		var mine []models.Outboxed
		for _, e := range outboxSince(t, s, before) {
			if e.Pending.ObjectID == userID {
				mine = append(mine, e)
			}
		}
		t.Run(fmt.Sprint(names), func(t *testing.T) { check(t, userID, mine) })
	}
}

// sid is the event id of step name for userID: each order of arrival
// delivers events of its own.
func sid(userID, name string) string { return name + "_" + userID }

var (
	userNow    = t0.Add(time.Hour)
	sessionNow = t0.Add(2 * time.Hour)
)

func testSessionLastActiveFollowsTheNewestActivity(t *testing.T, s repository.Store) {
	// The user's own state at 5s; sessions at 10s, 30s and 20s, the last
	// embedding the user's state at 5s (an equal time: the stored state
	// stays, whichever event id is larger).
	created := change("", "msg_created", 5*time.Second, "")
	steps := []func(string) models.Change{
		func(id string) models.Change {
			c := created
			c.UserID, c.EventID = id, sid(id, "msg_created")
			return c
		},
		func(id string) models.Change { return session(id, sid(id, "msg_s10"), 10*time.Second, nil) },
		func(id string) models.Change { return session(id, sid(id, "msg_s30"), 30*time.Second, nil) },
		func(id string) models.Change {
			c := created
			c.UserID, c.DisplayName = id, "From a session"
			return session(id, sid(id, "msg_s20"), 20*time.Second, &c)
		},
	}
	sessionOrders(t, s, steps, func(t *testing.T, userID string, outbox []models.Outboxed) {
		u := get(t, s, userID)
		if want := t0.Add(30 * time.Second); !sameTime(u.LastActiveAt, &want) {
			t.Errorf("lastActiveAt = %s, want %s (the newest session's activity)", timeString(u.LastActiveAt), timeString(&want))
		}
		switch {
		case u.LastEventID == sid(userID, "msg_created"):
			if u.DisplayName != created.DisplayName {
				t.Errorf("displayName = %q, want the user event's %q", u.DisplayName, created.DisplayName)
			}
			if !u.UpdatedAt.Equal(userNow) {
				t.Errorf("updatedAt = %s, want %s: a session's activity moved it", u.UpdatedAt, userNow)
			}
		case u.LastEventID == sid(userID, "msg_s20"):
			// The session came first and created the user; the user event
			// of an equal time and a smaller id is then stale.
			if !u.UpdatedAt.Equal(sessionNow) {
				t.Errorf("updatedAt = %s, want %s (the session's state)", u.UpdatedAt, sessionNow)
			}
		default:
			t.Errorf("the user's state is from %s", u.LastEventID)
		}
		for _, e := range outbox {
			if e.Pending.Version.EventID != u.LastEventID && e.Pending.Version.EventID != sid(userID, "msg_created") {
				t.Errorf("outbox holds %s's change: an activity is sent outbound", e.Pending.Version.EventID)
			}
		}
	})
}

func testSessionNeverMovesADeletedUser(t *testing.T, s repository.Store) {
	steps := []func(string) models.Change{
		func(id string) models.Change { return change(id, sid(id, "msg_created"), 5*time.Second, "") },
		func(id string) models.Change { return session(id, sid(id, "msg_s10"), 10*time.Second, nil) },
		func(id string) models.Change { return deletion(id, sid(id, "msg_deleted"), 15*time.Second) },
		func(id string) models.Change {
			u := change(id, "", 40*time.Second, "")
			return session(id, sid(id, "msg_s40"), 40*time.Second, &u)
		},
	}
	sessionOrders(t, s, steps, func(t *testing.T, userID string, outbox []models.Outboxed) {
		u := get(t, s, userID)
		if !u.Deleted() || u.LastActiveAt != nil || u.LastEventID != sid(userID, "msg_deleted") {
			t.Errorf("user = deleted %v, lastActiveAt %s, state of %s; want the tombstone of msg_deleted with no lastActiveAt",
				u.Deleted(), timeString(u.LastActiveAt), u.LastEventID)
		}
	})
	// A session event that finds its user deleted records deleted.
	deliverAt(t, s, deletion("user_gone", "msg_gone", time.Second), userNow)
	if got := deliverAt(t, s, session("user_gone", "msg_gone_s", 2*time.Second, nil), sessionNow); got != models.OutcomeDeleted {
		t.Errorf("a session of a deleted user: outcome %s, want %s", got, models.OutcomeDeleted)
	}
}

func testSessionCreatesAnUnknownUserOnlyFromItsState(t *testing.T, s repository.Store) {
	s.Outbound().SetRecording(true)
	ctx := context.Background()
	before := outboxOf(t, s)
	// No user state (null, absent or incomplete): nothing to create.
	if got := deliverAt(t, s, session("user_nostate", "msg_n1", 10*time.Second, nil), sessionNow); got != models.OutcomeIgnored {
		t.Errorf("a session of an unknown user with no state: outcome %s, want %s", got, models.OutcomeIgnored)
	}
	if _, err := s.Users().Get(ctx, "user_nostate"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("Get(user_nostate) = %v, want not found: a session with no user state created it", err)
	}
	// Its activity waits in the event log: the user's creation reads it.
	deliverAt(t, s, change("user_nostate", "msg_n0", time.Second, ""), userNow)
	if u, want := get(t, s, "user_nostate"), t0.Add(10*time.Second); !sameTime(u.LastActiveAt, &want) {
		t.Errorf("lastActiveAt after the user's creation = %s, want the earlier session's %s", timeString(u.LastActiveAt), timeString(&want))
	}

	// A complete embedded state creates the user, with the activity.
	st := change("user_fromsession", "", 3*time.Second, "fs@example.com")
	if got := deliverAt(t, s, session("user_fromsession", "msg_f1", 20*time.Second, &st), sessionNow); got != models.OutcomeApplied {
		t.Errorf("a session of an unknown user with its state: outcome %s, want %s", got, models.OutcomeApplied)
	}
	u := get(t, s, "user_fromsession")
	if want := t0.Add(20 * time.Second); u.Email != "fs@example.com" || u.LastEventID != "msg_f1" ||
		!u.SourceUpdatedAt.Equal(t0.Add(3*time.Second)) || !sameTime(u.LastActiveAt, &want) {
		t.Errorf("user = %s, state of %s at %s, lastActiveAt %s; want fs@example.com of msg_f1 at %s, active %s",
			u.Email, u.LastEventID, u.SourceUpdatedAt, timeString(u.LastActiveAt), t0.Add(3*time.Second), timeString(&want))
	}
	var entries []models.Outboxed
	for _, e := range outboxSince(t, s, before) {
		if e.Pending.ObjectID == "user_fromsession" {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 || entries[0].Pending.Version.EventID != "msg_f1" || !entries[0].Pending.Version.SourceTime.Equal(t0.Add(3*time.Second)) {
		t.Errorf("outbox of the user created by a session = %+v, want one entry of msg_f1 at the user's updated_at", entries)
	}

	// A newer embedded state updates the user and is sent; an older one
	// moves only the activity, and is not.
	newer := change("user_fromsession", "", 4*time.Second, "fs2@example.com")
	if got := deliverAt(t, s, session("user_fromsession", "msg_f2", 25*time.Second, &newer), sessionNow); got != models.OutcomeApplied {
		t.Errorf("a newer embedded state: outcome %s, want %s", got, models.OutcomeApplied)
	}
	older := change("user_fromsession", "", 2*time.Second, "old@example.com")
	if got := deliverAt(t, s, session("user_fromsession", "msg_f3", 30*time.Second, &older), sessionNow); got != models.OutcomeActivity {
		t.Errorf("an older embedded state with a newer activity: outcome %s, want %s", got, models.OutcomeActivity)
	}
	if got := deliverAt(t, s, session("user_fromsession", "msg_f4", 29*time.Second, nil), sessionNow); got != models.OutcomeStale {
		t.Errorf("an older activity: outcome %s, want %s", got, models.OutcomeStale)
	}
	u = get(t, s, "user_fromsession")
	if want := t0.Add(30 * time.Second); u.Email != "fs2@example.com" || !sameTime(u.LastActiveAt, &want) {
		t.Errorf("user = %s, lastActiveAt %s; want fs2@example.com, %s", u.Email, timeString(u.LastActiveAt), timeString(&want))
	}
	var sent []string
	for _, e := range outboxSince(t, s, before) {
		if e.Pending.ObjectID == "user_fromsession" {
			sent = append(sent, e.Pending.Version.EventID)
		}
	}
	if fmt.Sprint(sent) != "[msg_f1 msg_f2]" && fmt.Sprint(sent) != "[msg_f2 msg_f1]" {
		t.Errorf("outbox of the user = %v, want msg_f1 and msg_f2 only", sent)
	}
}

func testSessionEventsAreErasedWithTheirUser(t *testing.T, s repository.Store) {
	ctx := context.Background()
	var ids []string
	deliverBody := func(ch models.Change) {
		ev := userEvent(models.UserChange{})
		switch c := ch.(type) {
		case models.SessionChange:
			ev = sessionEvent(c)
		case models.UserChange:
			ev = userEvent(c)
		}
		ev.RawBody = []byte(`{"data":{"latest_activity":{"ip_address":"192.0.2.1","city":"Lyon"}}}`)
		d, err := s.Deliver(ctx, ev, ch, sessionNow)
		if err != nil {
			t.Fatalf("Deliver(%s): %v", ev.EventID, err)
		}
		ids = append(ids, d.Event.ID)
	}
	// A session before the user is known, one of the user, its deletion,
	// and one after it.
	deliverBody(session("user_ses", "msg_es1", time.Second, nil))
	deliverBody(change("user_ses", "msg_es2", 2*time.Second, ""))
	deliverBody(session("user_ses", "msg_es3", 3*time.Second, nil))
	deliverBody(deletion("user_ses", "msg_es4", 4*time.Second))
	deliverBody(session("user_ses", "msg_es5", 5*time.Second, nil))
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Users != 1 || res.Events != len(ids) {
		t.Errorf("erasure = %+v, %v; want 1 user, %d events", res, err, len(ids))
	}
	for _, id := range ids {
		if ev := getEvent(t, s, id); len(ev.RawBody) != 0 || ev.ErasedAt == nil {
			t.Errorf("event %s (%s) after erasure: body %q", id, ev.Type, ev.RawBody)
		}
	}
}

func testSessionStoredEventIsReappliedAsDelivered(t *testing.T, s repository.Store) {
	ctx := context.Background()
	deliverAt(t, s, change("user_sr", "msg_sr0", time.Second, ""), userNow)
	// Stored, not applied (a crash after the store, or a failed apply):
	// the sweep or a replay applies it as its delivery would have.
	ch := session("user_sr", "msg_sr1", 10*time.Second, nil)
	ev := record(t, s, sessionEvent(ch))
	d, err := s.Reapply(ctx, ev, ch, sessionNow)
	if err != nil || d.Outcome != models.OutcomeActivity || d.Event.Status != models.StatusProcessed {
		t.Fatalf("Reapply = %s, %s, %v; want processed, outcome %s", d.Outcome, d.Event.Status, err, models.OutcomeActivity)
	}
	if got := getEvent(t, s, ev.ID); got.Status != models.StatusProcessed || got.Outcome != models.OutcomeActivity {
		t.Errorf("the event = %s, %s; want processed, %s", got.Status, got.Outcome, models.OutcomeActivity)
	}
	if u, want := get(t, s, "user_sr"), t0.Add(10*time.Second); !sameTime(u.LastActiveAt, &want) || !u.UpdatedAt.Equal(userNow) {
		t.Errorf("user = last active %s, updated %s; want %s, %s", timeString(u.LastActiveAt), u.UpdatedAt, timeString(&want), userNow)
	}
}
