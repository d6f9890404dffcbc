package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises of a delivery (Store.Deliver and Reapply), for every kind
// of the kinds table: a new event is stored, applied and marked at once;
// a duplicate reports the first outcome and applies nothing; a change
// that cannot apply leaves its event stored; a crash between the steps is
// healed by the next delivery or the sweep.

// kindFixture makes the changes of one object of a kind.
type kindFixture struct {
	// state is a state of the object at t0+at, by eventID.
	state func(eventID string, at time.Duration) models.Change
	// deletion is its deletion at t0+at; nil for a kind Clerk never
	// deletes.
	deletion func(eventID string, at time.Duration) models.Change
	// broken is a state that can never be stored (metadata that is not a
	// JSON object); nil for a kind whose every decoded state can be.
	broken func(eventID string, at time.Duration) models.Change
	// version reads the object's stored version; nil for an unknown one.
	version func(ctx context.Context, s repository.Store) (*models.Version, error)
	// apply applies ch through the kind's own Apply; nil: through
	// Reapply of another event (applyAlone).
	apply func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error)
}

// kindFixtures are one object of every kind.
var kindFixtures = map[models.Kind]kindFixture{
	models.KindUser: {
		state:    func(id string, at time.Duration) models.Change { return change("user_dl", id, at, "dl@example.com") },
		deletion: func(id string, at time.Duration) models.Change { return deletion("user_dl", id, at) },
		broken: func(id string, at time.Duration) models.Change {
			ch := change("user_dl", id, at, "dl@example.com")
			ch.Metadata = json.RawMessage(`[1]`)
			return ch
		},
		version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
			return models.VersionOf(s.Users().Get(ctx, "user_dl"))
		},
		apply: func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
			return s.Users().Apply(ctx, ch.(models.UserChange), time.Now())
		},
	},
	models.KindOrganization: {
		state:    func(id string, at time.Duration) models.Change { return orgChange("org_dl", id, at, "Deliver") },
		deletion: func(id string, at time.Duration) models.Change { return orgDeletion("org_dl", id, at) },
		broken: func(id string, at time.Duration) models.Change {
			ch := orgChange("org_dl", id, at, "Deliver")
			ch.Metadata = json.RawMessage(`[1]`)
			return ch
		},
		version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
			return models.VersionOf(s.Organizations().Get(ctx, "org_dl"))
		},
		apply: func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
			return s.Organizations().Apply(ctx, ch.(models.OrganizationChange), time.Now())
		},
	},
	models.KindMembership: {
		state: func(id string, at time.Duration) models.Change {
			return memberChange("orgmem_dl", "org_dlm", "user_dlm", id, at, "admin")
		},
		deletion: func(id string, at time.Duration) models.Change {
			return memberDeletion("orgmem_dl", "org_dlm", "user_dlm", id, at)
		},
		broken: func(id string, at time.Duration) models.Change {
			ch := memberChange("orgmem_dl", "org_dlm", "user_dlm", id, at, "admin")
			ch.Metadata = json.RawMessage(`[1]`)
			return ch
		},
		version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
			return models.VersionOf(s.Memberships().Get(ctx, "orgmem_dl"))
		},
		apply: func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
			return s.Memberships().Apply(ctx, ch.(models.MembershipChange), time.Now())
		},
	},
}

// forEachKind runs test once for every kind of the kinds table, with its
// fixture; a kind without one fails: the suite must prove every kind.
func forEachKind(t *testing.T, test func(t *testing.T, k models.Kind, f kindFixture)) {
	for _, k := range models.Kinds {
		t.Run(string(k), func(t *testing.T) {
			f, ok := kindFixtures[k]
			if !ok {
				t.Fatalf("kind %s has no fixture in the behaviour suite", k)
			}
			test(t, k, f)
		})
	}
}

// eventOf is the stored event that carries ch.
func eventOf(ch models.Change, et models.EventType) models.Event {
	userID, objectID := ch.IDs()
	if ch.Kind() == models.KindUser {
		objectID = userID
	}
	ev := kindEvent(ch.Version().EventID, ch.Kind(), et, objectID, userID, 0)
	ts := ch.Version().SourceTime
	ev.SourceTimestamp = &ts
	return ev
}

// storedVersion reads the fixture's object's version, failing the test
// on an error.
func storedVersion(t *testing.T, s repository.Store, f kindFixture) *models.Version {
	t.Helper()
	v, err := f.version(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// applyAlone applies ch as its kind's write does, outside its own event:
// through Reapply of another event, stored for it.
func applyAlone(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
	carrier := eventOf(ch, models.EventUpdated)
	carrier.EventID += "_carrier"
	stored, _, err := s.Events().Record(ctx, carrier)
	if err != nil {
		return "", err
	}
	d, err := s.Reapply(ctx, stored, ch, time.Now())
	return d.Outcome, err
}

func testDeliverStoresAppliesAndMarks(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	forEachKind(t, func(t *testing.T, k models.Kind, f kindFixture) {
		id := "msg_dl_new_" + string(k)
		d, err := s.Deliver(ctx, eventOf(f.state(id, time.Second), models.EventCreated), f.state(id, time.Second), now)
		if err != nil || !d.Created || d.Outcome != models.OutcomeApplied || d.Event.ID == "" ||
			d.Event.Status != models.StatusProcessed || d.Event.Outcome != models.OutcomeApplied {
			t.Fatalf("Deliver = %+v, %v; want a new event, applied and processed", d, err)
		}
		if got := getEvent(t, s, id); got.Status != models.StatusProcessed || got.Outcome != models.OutcomeApplied || got.Attempts != 1 {
			t.Errorf("event = %s %s after %d attempts, want processed applied after 1", got.Status, got.Outcome, got.Attempts)
		}
		if v := storedVersion(t, s, f); v == nil || v.EventID != id {
			t.Errorf("%s's version = %+v, want the delivered state's", k, v)
		}
	})
	if st, err := s.Events().Stats(ctx); err != nil || st.ByOutcome[models.OutcomeApplied] != int64(len(models.Kinds)) {
		t.Errorf("stats = %+v, %v; want every delivery's outcome counted", st, err)
	}
}

func testDeliverDuplicateReportsTheFirstOutcome(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	forEachKind(t, func(t *testing.T, k models.Kind, f kindFixture) {
		first, newer := "msg_dl_dup_"+string(k), "msg_dl_dup_newer_"+string(k)
		if _, err := s.Deliver(ctx, eventOf(f.state(first, time.Second), models.EventCreated), f.state(first, time.Second), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Deliver(ctx, eventOf(f.state(newer, 2*time.Second), models.EventUpdated), f.state(newer, 2*time.Second), now); err != nil {
			t.Fatal(err)
		}
		// The first event again: found processed, not applied again
		// (which would have been stale now).
		d, err := s.Deliver(ctx, eventOf(f.state(first, time.Second), models.EventCreated), f.state(first, time.Second), now.Add(time.Minute))
		if err != nil || d.Created || d.Outcome != "" || d.Event.Status != models.StatusProcessed || d.Event.Outcome != models.OutcomeApplied {
			t.Errorf("a duplicate Deliver = %+v, %v; want the event found processed with its first outcome, nothing applied", d, err)
		}
		if got := getEvent(t, s, first); got.Attempts != 1 {
			t.Errorf("a duplicate counted an attempt: %d", got.Attempts)
		}
		if v := storedVersion(t, s, f); v == nil || v.EventID != newer {
			t.Errorf("%s's version = %+v, want the newer state's", k, v)
		}
	})
}

func testDeliverFailedApplyLeavesTheEventStored(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	forEachKind(t, func(t *testing.T, k models.Kind, f kindFixture) {
		if f.broken == nil {
			t.Skipf("every decoded state of a %s can be stored", k)
		}
		ok, bad := "msg_dl_ok_"+string(k), "msg_dl_bad_"+string(k)
		if _, err := s.Deliver(ctx, eventOf(f.state(ok, time.Second), models.EventCreated), f.state(ok, time.Second), now); err != nil {
			t.Fatal(err)
		}
		d, err := s.Deliver(ctx, eventOf(f.broken(bad, 2*time.Second), models.EventUpdated), f.broken(bad, 2*time.Second), now)
		if !errors.Is(err, models.ErrInvalid) || !d.Created || d.Event.ID == "" || d.Outcome != "" {
			t.Fatalf("Deliver of a change that cannot apply = %+v, %v; want it stored and the error", d, err)
		}
		if got := getEvent(t, s, bad); got.Status != models.StatusStored || got.Attempts != 0 {
			t.Errorf("its event = %s after %d attempts, want stored, for the caller to mark", got.Status, got.Attempts)
		}
		if v := storedVersion(t, s, f); v == nil || v.EventID != ok {
			t.Errorf("%s's version = %+v, want the change not applied", k, v)
		}
		// Reapplied with a state that can apply, it applies.
		got := getEvent(t, s, bad)
		d, err = s.Reapply(ctx, got, f.state(bad, 2*time.Second), now)
		if err != nil || d.Outcome != models.OutcomeApplied || d.Event.Status != models.StatusProcessed {
			t.Errorf("Reapply = %+v, %v; want it applied and processed", d, err)
		}
		if v := storedVersion(t, s, f); v == nil || v.EventID != bad {
			t.Errorf("%s's version after Reapply = %+v, want the reapplied state's", k, v)
		}
	})
}

func testDeliverCrashBetweenStepsIsHealed(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	forEachKind(t, func(t *testing.T, k models.Kind, f kindFixture) {
		// Stored, then the process died: the sweep reapplies it.
		stored := "msg_dl_stored_" + string(k)
		ev := record(t, s, eventOf(f.state(stored, time.Second), models.EventCreated))
		d, err := s.Reapply(ctx, ev, f.state(stored, time.Second), now)
		if err != nil || d.Outcome != models.OutcomeApplied || getEvent(t, s, stored).Status != models.StatusProcessed {
			t.Errorf("Reapply of a stored event = %+v, %v; want it applied and processed", d, err)
		}
		// Stored and applied, then the process died before the mark:
		// the next delivery applies it again, which changes nothing,
		// and marks it.
		applied := "msg_dl_applied_" + string(k)
		next, et := f.deletion, models.EventDeleted
		if next == nil {
			next, et = f.state, models.EventUpdated
		}
		ch := next(applied, 2*time.Second)
		ev = record(t, s, eventOf(ch, et))
		apply := f.apply
		if apply == nil {
			apply = applyAlone
		}
		if _, err := apply(ctx, s, ch); err != nil {
			t.Fatal(err)
		}
		before := storedVersion(t, s, f)
		d, err = s.Deliver(ctx, eventOf(ch, et), ch, now.Add(time.Minute))
		if err != nil || d.Created || d.Outcome != models.OutcomeApplied || getEvent(t, s, ev.EventID).Status != models.StatusProcessed {
			t.Errorf("redelivery of an applied, unmarked event = %+v, %v; want it marked processed, applied", d, err)
		}
		if after := storedVersion(t, s, f); before == nil || after == nil || *after != *before || after.EventID != applied {
			t.Errorf("%s's version went from %+v to %+v; want the change once, unchanged", k, before, after)
		}
	})
}
