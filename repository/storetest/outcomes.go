package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the outcome of a deletion: an event that finds its
// object deleted records deleted, whatever the kind of the object, and
// what earlier versions stored as deleted_user (for a user) reads, and is
// counted, as deleted.

// testADeletedObjectIsDeletedForEveryKind delivers, for each kind, a
// deletion and then a later state of the same object, as the stores'
// callers do (Apply, then MarkProcessed with its outcome): the late
// event's outcome is deleted, as applied, as stored and as counted.
func testADeletedObjectIsDeletedForEveryKind(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind   models.Kind
		object string
		// late deletes the object and applies a later state of it; it
		// returns that state's outcome.
		late func() models.Outcome
	}{
		{models.KindUser, "user_gone", func() models.Outcome {
			apply(t, s, deletion("user_gone", "msg_user_del", time.Second))
			return apply(t, s, change("user_gone", "msg_user_late", 2*time.Second, "gone@example.com"))
		}},
		{models.KindOrganization, "org_gone", func() models.Outcome {
			applyOrg(t, s, orgDeletion("org_gone", "msg_org_del", time.Second))
			return applyOrg(t, s, orgChange("org_gone", "msg_org_late", 2*time.Second, "Back"))
		}},
		{models.KindMembership, "orgmem_gone", func() models.Outcome {
			applyMember(t, s, memberDeletion("orgmem_gone", "org_m", "user_m", "msg_membership_del", time.Second))
			return applyMember(t, s, memberChange("orgmem_gone", "org_m", "user_m", "msg_membership_late", 2*time.Second, "admin"))
		}},
	} {
		userID := tc.object
		if tc.kind == models.KindMembership {
			userID = "user_m"
		}
		ev := record(t, s, kindEvent("msg_"+string(tc.kind)+"_late", tc.kind, models.EventUpdated, tc.object, userID, 2*time.Second))
		got := tc.late()
		if got != models.OutcomeDeleted {
			t.Errorf("%s: a state after the deletion = %q, want deleted", tc.kind, got)
		}
		if err := s.Events().MarkProcessed(ctx, ev.ID, got, t0); err != nil {
			t.Fatal(err)
		}
		if stored := getEvent(t, s, ev.ID); stored.Outcome != models.OutcomeDeleted {
			t.Errorf("%s: the stored event's outcome = %q, want deleted", tc.kind, stored.Outcome)
		}
	}
	st, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.ByOutcome[models.OutcomeDeleted] != 3 || st.ByStatus[models.StatusProcessed] != 3 {
		t.Errorf("stats = %+v; want 3 processed, all deleted", st)
	}
	if _, ok := st.ByOutcome[models.OutcomeDeletedUserLegacy]; ok {
		t.Errorf("stats = %+v; want no deleted_user", st)
	}
}

// testEarlierDeletedUserReadsAsDeleted seeds processed events as an
// earlier version left them, outcome deleted_user and counted under it,
// next to one this version marks deleted: every read says deleted, stats
// count both under deleted, and retention takes the old ones off the
// count that counted them.
func testEarlierDeletedUserReadsAsDeleted(t *testing.T, s repository.Store) {
	ctx := context.Background()
	seeder, ok := s.(repository.Seeder)
	if !ok {
		t.Skip("the store seeds nothing")
	}
	old := t0.Add(-48 * time.Hour)
	var seeded []models.Event
	for _, id := range []string{"msg_old_1", "msg_old_2"} {
		ev := newEvent(id, "user_old", `{}`)
		ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts = models.StatusProcessed, models.OutcomeDeletedUserLegacy, &old, 1
		seeded = append(seeded, ev)
	}
	if err := seeder.SeedEvents(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	ev := record(t, s, newEvent("msg_new", "user_old", `{}`))
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeDeleted, t0); err != nil {
		t.Fatal(err)
	}
	CheckReadAsDeleted(t, s, "user_old", "msg_old_1", "msg_old_2", "msg_new")
	want := func(step string, deleted int64) {
		t.Helper()
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, legacy := st.ByOutcome[models.OutcomeDeletedUserLegacy]
		if st.ByOutcome[models.OutcomeDeleted] != deleted || st.ByStatus[models.StatusProcessed] != deleted || legacy {
			t.Errorf("%s: stats = %+v; want %d processed, all deleted, and no deleted_user", step, st, deleted)
		}
	}
	want("seeded and processed", 3)
	if n, err := s.Events().DeleteProcessedBefore(ctx, t0.Add(-24*time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want the 2 old events", n, err)
	}
	want("after retention", 1)
}

// CheckReadAsDeleted checks that the events ids, every event of the user
// userID, read with the outcome deleted, one by one and in the event log.
func CheckReadAsDeleted(t *testing.T, s repository.Store, userID string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if got := getEvent(t, s, id); got.Outcome != models.OutcomeDeleted {
			t.Errorf("event %s: outcome %q, want deleted", id, got.Outcome)
		}
	}
	page, err := s.Events().List(context.Background(), models.EventFilter{UserID: userID, Limit: 10})
	if err != nil || len(page.Events) != len(ids) {
		t.Fatalf("List = %+v, %v; want the user's %d events", page, err, len(ids))
	}
	for _, got := range page.Events {
		if got.Outcome != models.OutcomeDeleted {
			t.Errorf("listed event %s: outcome %q, want deleted", got.EventID, got.Outcome)
		}
	}
}

// testActivityEarlierDeletedUserIsDeleted adds to a bucket under
// deleted_user, as earlier versions counted a deleted user's events, and
// under deleted: the bucket reads one count, deleted.
func testActivityEarlierDeletedUserIsDeleted(t *testing.T, s repository.Store) {
	ctx := context.Background()
	h0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for kind, n := range map[string]int64{string(models.OutcomeDeletedUserLegacy): 2, models.ActivityDeleted: 3, models.ActivityApplied: 1} {
		if err := s.Activity().Add(ctx, h0.Add(10*time.Second), kind, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, size := range []time.Duration{models.ActivityMinute, models.ActivityHour} {
		got, err := s.Activity().Buckets(ctx, size, h0, h0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		checkBuckets(t, size.String()+" buckets", got, []models.ActivityBucket{
			{Start: h0, Counts: map[string]int64{models.ActivityDeleted: 5, models.ActivityApplied: 1}},
		})
	}
}
