package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the event log's stats: counts by status, outcome and
// kind, every status and outcome named, processed events not read.

func testStats(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	seeder, ok := s.(repository.Seeder)
	if !ok {
		t.Skip("the store seeds nothing")
	}
	var seeded []models.Event
	for i, outcome := range []models.Outcome{models.OutcomeApplied, models.OutcomeApplied, models.OutcomeApplied, models.OutcomeStale} {
		ev := newEvent(fmt.Sprintf("msg_seed_%d", i), "user_1", `{}`)
		ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts = models.StatusProcessed, outcome, &old, 1
		seeded = append(seeded, ev)
	}
	if err := seeder.SeedEvents(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range []models.Outcome{models.OutcomeApplied, models.OutcomeDeleted} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_live_%d", i), "user_1", `{}`))
		for range 2 { // the second mark is a concurrent delivery's: not counted
			if err := s.Events().MarkProcessed(ctx, ev.ID, outcome, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(t, s, newEvent("msg_stored", "user_1", `{}`))
	retry := now.Add(time.Hour)
	for i, at := range []*time.Time{&retry, nil} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_failed_%d", i), "user_1", `{}`))
		if err := s.Events().MarkFailed(ctx, ev.ID, "boom", at); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, processed, applied, stale, deleted int64) {
		t.Helper()
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ByStatus[models.StatusProcessed] != processed || st.ByOutcome[models.OutcomeApplied] != applied ||
			st.ByOutcome[models.OutcomeStale] != stale || st.ByOutcome[models.OutcomeDeleted] != deleted ||
			st.ByStatus[models.StatusStored] != 1 || st.ByStatus[models.StatusFailed] != 2 || st.GaveUp != 1 {
			t.Errorf("%s: stats = %+v; want %d processed (%d applied, %d stale, %d deleted), 1 stored, 2 failed, 1 given up",
				step, st, processed, applied, stale, deleted)
		}
	}
	want("seeded and processed", 6, 4, 1, 1)
	for {
		n, err := s.Events().DeleteProcessedBefore(ctx, now.Add(-24*time.Hour), 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	want("after retention", 2, 1, 0, 1)
}

func testStatsPerKind(t *testing.T, s repository.Store) {
	ctx := context.Background()
	retry := t0.Add(time.Hour)
	for i, c := range []struct {
		k     models.Kind
		retry *time.Time // failed with a retry; nil with fail: given up
		fail  bool
	}{
		{k: models.KindUser},
		{k: models.KindUser, fail: true, retry: &retry},
		{k: models.KindOrganization, fail: true},
		{k: models.KindMembership},
		{k: models.KindMembership},
		{k: models.KindMembership, fail: true},
		{k: models.KindMembership, fail: true, retry: &retry},
	} {
		ev := record(t, s, kindEvent(fmt.Sprintf("msg_sk%d", i), c.k, models.EventUpdated, "org_sk", "user_sk", time.Duration(i)*time.Second))
		if c.fail {
			if err := s.Events().MarkFailed(ctx, ev.ID, "boom", c.retry); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := record(t, s, kindEvent("msg_sk_done", models.KindMembership, models.EventUpdated, "orgmem_sk", "user_sk", 0))
	if err := s.Events().MarkProcessed(ctx, done.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[models.Kind]models.KindStats{} // every kind, those without events at 0
	for _, k := range models.Kinds {
		want[k] = models.KindStats{}
	}
	want[models.KindUser] = models.KindStats{Stored: 1, Failed: 1, GaveUp: 0}
	want[models.KindOrganization] = models.KindStats{Stored: 0, Failed: 1, GaveUp: 1}
	want[models.KindMembership] = models.KindStats{Stored: 2, Failed: 2, GaveUp: 1}
	if len(st.ByKind) != len(want) {
		t.Errorf("ByKind = %+v, want every kind: %+v", st.ByKind, want)
	}
	for k, w := range want {
		if st.ByKind[k] != w {
			t.Errorf("ByKind[%s] = %+v, want %+v", k, st.ByKind[k], w)
		}
	}
	if st.ByStatus[models.StatusStored] != 3 || st.ByStatus[models.StatusFailed] != 4 || st.GaveUp != 2 ||
		st.ByStatus[models.StatusProcessed] != 1 {
		t.Errorf("totals = %+v (gave up %d), want 3 stored, 4 failed (2 given up), 1 processed", st.ByStatus, st.GaveUp)
	}
}

func testEmptyStats(t *testing.T, s repository.Store) {
	st, err := s.Events().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []models.EventStatus{models.StatusStored, models.StatusProcessed, models.StatusFailed} {
		if n, ok := st.ByStatus[status]; !ok || n != 0 {
			t.Errorf("stats of an empty store: %s = %d (present %v), want 0", status, n, ok)
		}
	}
	for _, o := range models.Outcomes {
		if n, ok := st.ByOutcome[o]; !ok || n != 0 {
			t.Errorf("stats of an empty store: %s = %d (present %v), want 0", o, n, ok)
		}
	}
}
