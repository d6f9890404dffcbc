package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	stdsync "sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// batchEvent is the stored event that carries ch.
func batchEvent(ch models.Change, typ string) models.Event {
	userID, objectID := ch.IDs()
	ts := ch.Version().SourceTime
	return models.Event{EventID: ch.Version().EventID, Type: typ, EventType: models.EventTypeOf(typ), UserID: userID,
		ObjectID: objectID, RawBody: []byte(`{}`), Source: models.SourceClerk, SourceTimestamp: &ts,
		ReceivedAt: time.Now().UTC().Truncate(time.Millisecond), Status: models.StatusStored}
}

func userState(id, eventID string, at time.Time, email string) models.UserChange {
	return models.UserChange{UserID: id, EventID: eventID, SourceTime: at, Email: email, DisplayName: id, Metadata: json.RawMessage(`{}`)}
}

// TestDeliver_ABatchTakesWhatItCanAndTheRestGoesOnAlone writes deliveries
// as one batch: the new states of distinct users and an organization
// share one insert of their events, one write per collection and one
// mark; a duplicate, a second state of one user, an email another user
// holds, a membership and a deletion leave the batch where it refused
// them and are applied once, alone, as a single delivery applies them.
func TestDeliver_ABatchTakesWhatItCanAndTheRestGoesOnAlone(t *testing.T) {
	ctx := context.Background()
	var mu stdsync.Mutex
	var cmds []string
	s := mongotest.OpenWith(t, mongo.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch e.CommandName {
			case "insert", "update", "find", "findAndModify", "delete":
				cmds = append(cmds, e.CommandName)
			}
		},
	}})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		c := cmds
		cmds = nil
		return c
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now().UTC()
	alone := func(ch models.Change, typ string) {
		t.Helper()
		if _, err := s.Deliver(ctx, batchEvent(ch, typ), ch, now); err != nil {
			t.Fatal(err)
		}
	}
	dup := userState("user_dup", "msg_dup", t0, "dup@example.com")
	alone(dup, models.TypeUserCreated)
	alone(userState("user_holder", "msg_holder", t0.Add(5*time.Second), "held@example.com"), models.TypeUserCreated)

	org := models.OrganizationChange{OrgID: "org_x", EventID: "msg_org", SourceTime: t0, Metadata: json.RawMessage(`{}`),
		OrganizationProfile: models.OrganizationProfile{Name: "X"}}
	member := models.MembershipChange{MembershipID: "orgmem_ax", OrgID: "org_x", UserID: "user_a", EventID: "msg_mem",
		SourceTime: t0, Role: "admin", Metadata: json.RawMessage(`{}`)}
	invite := models.InvitationChange{InvitationID: "orginv_ax", OrgID: "org_x", EventID: "msg_inv", SourceTime: t0,
		EmailAddress: "invited@example.com", Status: models.InvitationPending, Metadata: json.RawMessage(`{}`)}
	chs := []models.Change{
		userState("user_a", "msg_a1", t0, "a@example.com"),
		userState("user_b", "msg_b1", t0, "b@example.com"),
		dup, // again: a duplicate
		userState("user_a", "msg_a2", t0.Add(time.Second), "a2@example.com"),      // a second state of user_a
		userState("user_c", "msg_c1", t0.Add(10*time.Second), "held@example.com"), // takes the holder's email
		org,
		member,
		models.UserChange{UserID: "user_d", EventID: "msg_d", SourceTime: t0, Deleted: true},
		invite,
	}
	types := []string{models.TypeUserCreated, models.TypeUserCreated, models.TypeUserCreated, models.TypeUserUpdated,
		models.TypeUserCreated, models.TypeOrganizationCreated, models.TypeMembershipCreated, models.TypeUserDeleted,
		models.TypeInvitationCreated}
	evs := make([]models.Event, len(chs))
	for i, ch := range chs {
		evs[i] = batchEvent(ch, types[i])
	}
	take()
	b := mongo.WriteBatch(ctx, s, evs, chs, now)
	inserts := 0
	for _, c := range take() {
		if c == "insert" {
			inserts++
		}
	}
	if inserts != 1 {
		t.Errorf("the batch sent %d inserts, want its events in 1", inserts)
	}
	ds, errs := b.Finish()
	for i, d := range ds {
		if errs[i] != nil {
			t.Errorf("delivery %d (%s): %v", i, evs[i].EventID, errs[i])
			continue
		}
		wantCreated, wantOutcome := i != 2, models.OutcomeApplied
		if i == 2 {
			wantOutcome = "" // a duplicate: found, not applied again
		}
		if d.Created != wantCreated || d.Outcome != wantOutcome || d.Event.Status != models.StatusProcessed {
			t.Errorf("delivery %d (%s) = created %v, outcome %q, %s; want created %v, outcome %q, processed",
				i, evs[i].EventID, d.Created, d.Outcome, d.Event.Status, wantCreated, wantOutcome)
		}
		if got, err := s.Events().Get(ctx, evs[i].EventID); err != nil || got.Status != models.StatusProcessed || got.Attempts != 1 {
			t.Errorf("event %s = %s after %d attempts, %v; want processed after 1", evs[i].EventID, got.Status, got.Attempts, err)
		}
	}
	for id, want := range map[string]string{"user_a": "a2@example.com", "user_b": "b@example.com", "user_c": "held@example.com", "user_holder": ""} {
		if u, err := s.Users().Get(ctx, id); err != nil || u.Email != want {
			t.Errorf("%s's email = %q, %v; want %q", id, u.Email, err, want)
		}
	}
	if u, err := s.Users().Get(ctx, "user_d"); err != nil || !u.Deleted() {
		t.Errorf("user_d = %+v, %v; want a tombstone", u, err)
	}
	if m, err := s.Memberships().Get(ctx, "orgmem_ax"); err != nil || m.Deleted() || m.Role != "admin" {
		t.Errorf("membership = %+v, %v; want it active, admin", m, err)
	}
	if i, err := s.Invitations().Get(ctx, "orginv_ax"); err != nil || i.Deleted() || i.EmailAddress != "invited@example.com" {
		t.Errorf("invitation = %+v, %v; want it pending, with its email", i, err)
	}
	if o, err := s.Organizations().Get(ctx, "org_x"); err != nil || o.Name != "X" {
		t.Errorf("organization = %+v, %v", o, err)
	}
}

// TestDeliver_ConcurrentDeliveriesInBatchesEndInTheNewestState delivers
// the states of a few users from many goroutines at once, in a shuffled
// order and each twice, so that batches carry several states of one
// user, duplicates and stale states: every user ends in its newest state
// and every event is processed once.
func TestDeliver_ConcurrentDeliveriesInBatchesEndInTheNewestState(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now().UTC()
	type delivery struct {
		ev models.Event
		ch models.Change
	}
	var all []delivery
	for u := range 6 {
		for v := range 6 {
			id := fmt.Sprintf("user_cc%d", u)
			ch := userState(id, fmt.Sprintf("msg_cc%d_%d", u, v), t0.Add(time.Duration(v)*time.Second), fmt.Sprintf("cc%d.%d@example.com", u, v))
			d := delivery{batchEvent(ch, models.TypeUserUpdated), ch}
			all = append(all, d, d)
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	var wg stdsync.WaitGroup
	errs := make(chan error, len(all))
	for _, d := range all {
		wg.Go(func() {
			if _, err := s.Deliver(ctx, d.ev, d.ch, now); err != nil {
				errs <- fmt.Errorf("%s: %w", d.ev.EventID, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for u := range 6 {
		id := fmt.Sprintf("user_cc%d", u)
		if got, err := s.Users().Get(ctx, id); err != nil || got.LastEventID != fmt.Sprintf("msg_cc%d_5", u) || got.Email != fmt.Sprintf("cc%d.5@example.com", u) {
			t.Errorf("%s = %s %s, %v; want its newest state", id, got.LastEventID, got.Email, err)
		}
		for v := range 6 {
			if ev, err := s.Events().Get(ctx, fmt.Sprintf("msg_cc%d_%d", u, v)); err != nil || ev.Status != models.StatusProcessed || ev.Attempts != 1 {
				t.Errorf("event %d of %s = %s after %d attempts, %v; want processed after 1", v, id, ev.Status, ev.Attempts, err)
			}
		}
	}
}

// TestDeliver_AKindNoBatchWritesGoesAloneWithoutTheBatchsFind: a
// membership's delivery, whose change no batch can write, makes its own
// writes at once; in a batch it would only add the batch's find.
func TestDeliver_AKindNoBatchWritesGoesAloneWithoutTheBatchsFind(t *testing.T) {
	ctx := context.Background()
	var mu stdsync.Mutex
	var cmds []string
	s := mongotest.OpenWith(t, mongo.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			defer mu.Unlock()
			cmds = append(cmds, e.CommandName)
		},
	}})
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	member := models.MembershipChange{MembershipID: "orgmem_alone", OrgID: "org_alone", UserID: "user_alone", EventID: "msg_alone",
		SourceTime: t0, Role: "admin", Metadata: json.RawMessage(`{}`)}
	mu.Lock()
	cmds = nil
	mu.Unlock()
	d, err := s.Deliver(ctx, batchEvent(member, models.TypeMembershipCreated), member, time.Now().UTC())
	if err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("Deliver = %+v, %v", d, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(cmds) == 0 || cmds[0] != "insert" {
		t.Errorf("commands %v; want the event's insert first, no batch's find", cmds)
	}
}

// TestDeliver_ASessionsActivityIsOneWriteOfTheBatch writes session events
// as one batch: the activity of known users shares the batch's one find
// of their users and its one write of the users collection (an older
// activity writes nothing); a session of an unknown user, of a deleted
// one and one whose embedded state is newer go on alone, each with its
// outcome; a user created in the batch gets the activity of its session,
// which went alone.
func TestDeliver_ASessionsActivityIsOneWriteOfTheBatch(t *testing.T) {
	ctx := context.Background()
	var mu stdsync.Mutex
	var cmds []string
	s := mongotest.OpenWith(t, mongo.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch e.CommandName {
			case "insert", "update", "find", "findAndModify", "delete":
				cmds = append(cmds, e.CommandName)
			}
		},
	}})
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		c := cmds
		cmds = nil
		return c
	}
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now().UTC()
	for _, ch := range []models.Change{
		userState("user_s1", "msg_s1", t0, ""),
		userState("user_s2", "msg_s2", t0, ""),
		models.SessionChange{UserID: "user_s2", EventID: "msg_s2a", ActiveAt: t0.Add(time.Hour)},
		userState("user_s3", "msg_s3", t0, ""),
		models.UserChange{UserID: "user_gone", EventID: "msg_gone", SourceTime: t0, Deleted: true},
	} {
		typ := models.TypeUserCreated
		if _, ok := ch.(models.SessionChange); ok {
			typ = models.TypeSessionCreated
		}
		if _, err := s.Deliver(ctx, batchEvent(ch, typ), ch, now); err != nil {
			t.Fatal(err)
		}
	}
	newer := userState("user_s3", "msg_s3b", t0.Add(time.Second), "s3@example.com")
	chs := []models.Change{
		models.SessionChange{UserID: "user_s1", EventID: "msg_b1", ActiveAt: t0.Add(time.Minute)},
		models.SessionChange{UserID: "user_s2", EventID: "msg_b2", ActiveAt: t0.Add(time.Minute)}, // older than its hour
		models.SessionChange{UserID: "user_new", EventID: "msg_b3", ActiveAt: t0.Add(2 * time.Minute)},
		userState("user_new", "msg_b4", t0, ""),
		models.SessionChange{UserID: "user_gone", EventID: "msg_b5", ActiveAt: t0.Add(time.Minute)},
		models.SessionChange{UserID: "user_s3", EventID: "msg_s3b", ActiveAt: t0.Add(time.Minute), User: &newer},
	}
	// user_new's session, unknown to the batch's read, goes on alone after
	// the batch created the user: its activity then moves it.
	want := []models.Outcome{models.OutcomeActivity, models.OutcomeStale, models.OutcomeActivity, models.OutcomeApplied,
		models.OutcomeDeleted, models.OutcomeApplied}
	evs := make([]models.Event, len(chs))
	for i, ch := range chs {
		typ := models.TypeSessionCreated
		if _, ok := ch.(models.UserChange); ok {
			typ = models.TypeUserCreated
		}
		evs[i] = batchEvent(ch, typ)
		ts := models.EventTime(ch)
		evs[i].SourceTimestamp = &ts
	}
	take()
	b := mongo.WriteBatch(ctx, s, evs, chs, now)
	var updates, finds int
	for _, c := range take() {
		switch c {
		case "update":
			updates++
		case "find":
			finds++
		}
	}
	if updates != 1 || finds != 3 {
		t.Errorf("the batch sent %d updates and %d finds, want 1 write of the users and 3 finds (the events, the sessions' users, the new user's session events)", updates, finds)
	}
	ds, errs := b.Finish()
	for i, d := range ds {
		if errs[i] != nil || d.Outcome != want[i] || d.Event.Status != models.StatusProcessed {
			t.Errorf("delivery %d (%s) = outcome %q, %s, %v; want %q, processed", i, evs[i].EventID, d.Outcome, d.Event.Status, errs[i], want[i])
		}
	}
	for id, wantActive := range map[string]time.Time{"user_s1": t0.Add(time.Minute), "user_s2": t0.Add(time.Hour),
		"user_new": t0.Add(2 * time.Minute), "user_s3": t0.Add(time.Minute)} {
		if u, err := s.Users().Get(ctx, id); err != nil || u.LastActiveAt == nil || !u.LastActiveAt.Equal(wantActive) {
			t.Errorf("%s's lastActiveAt = %v, %v; want %s", id, u.LastActiveAt, err, wantActive)
		}
	}
	if u, err := s.Users().Get(ctx, "user_gone"); err != nil || u.LastActiveAt != nil {
		t.Errorf("the deleted user's lastActiveAt = %v, %v; want none", u.LastActiveAt, err)
	}
	if u, err := s.Users().Get(ctx, "user_s3"); err != nil || u.Email != "s3@example.com" || u.LastEventID != "msg_s3b" {
		t.Errorf("user_s3 = %s of %s, %v; want the session's newer state", u.Email, u.LastEventID, err)
	}
}
