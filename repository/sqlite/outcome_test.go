package sqlite

import (
	"context"
	"io/fs"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestOpen_AnEarlierVersionsDeletedUserReadsAndCountsAsDeleted writes, as
// an earlier version did, two events of a deleted user with the outcome
// deleted_user, their outcome counter and an activity count under that
// name, next to a deleted organization's event; then it opens the file
// and marks one more event deleted: every event reads deleted, Stats
// counts the four under deleted and nothing under deleted_user, and the
// activity bucket reads one deleted count.
func TestOpen_AnEarlierVersionsDeletedUserReadsAndCountsAsDeleted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	db := fileAtSchema(t, dir, len(names))
	minute := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO events (event_id, type, event_type, user_id, object_id, raw_body, source, signature,
			received_at, processed_at, status, outcome, attempts) VALUES
			('msg_u1', 'user.updated', 'updated', 'user_1', NULL, CAST('{}' AS BLOB), 'clerk', '', 1, 1, 'processed', 'deleted_user', 1),
			('msg_u2', 'user.deleted', 'deleted', 'user_1', NULL, CAST('{}' AS BLOB), 'clerk', '', 2, 2, 'processed', 'deleted_user', 1),
			('msg_o1', 'organization.updated', 'updated', NULL, 'org_1', CAST('{}' AS BLOB), 'clerk', '', 3, 3, 'processed', 'deleted', 1)`,
		`INSERT INTO counters (name, n) VALUES ('outcome:deleted_user', 2), ('outcome:deleted', 1)`,
		`INSERT INTO activity (size, start, kind, n) VALUES
			(60000, ` + strconv.FormatInt(minute.UnixMilli(), 10) + `, 'deleted_user', 2),
			(60000, ` + strconv.FormatInt(minute.UnixMilli(), 10) + `, 'deleted', 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	ev, _, err := s.Events().Record(ctx, models.Event{EventID: "msg_u3", Type: models.TypeUserUpdated, EventType: models.EventUpdated,
		UserID: "user_1", RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeDeleted, minute); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"msg_u1", "msg_u2", "msg_o1", "msg_u3"} {
		if got, err := s.Events().Get(ctx, id); err != nil || got.Outcome != models.OutcomeDeleted {
			t.Errorf("event %s: outcome %q, %v; want deleted", id, got.Outcome, err)
		}
	}
	page, err := s.Events().List(ctx, models.EventFilter{UserID: "user_1", Limit: 10})
	if err != nil || len(page.Events) != 3 {
		t.Fatalf("List = %+v, %v; want the user's 3 events", page, err)
	}
	for _, got := range page.Events {
		if got.Outcome != models.OutcomeDeleted {
			t.Errorf("listed event %s: outcome %q, want deleted", got.EventID, got.Outcome)
		}
	}
	st, err := s.Events().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[models.Outcome]int64{models.OutcomeApplied: 0, models.OutcomeStale: 0, models.OutcomeDeleted: 4, models.OutcomeIgnored: 0,
		models.OutcomeActivity: 0}
	if !maps.Equal(st.ByOutcome, want) || st.ByStatus[models.StatusProcessed] != 4 {
		t.Errorf("stats = %+v; want 4 processed, by outcome %v", st, want)
	}
	buckets, err := s.Activity().Buckets(ctx, models.ActivityMinute, minute, minute.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(buckets) != 1 || !maps.Equal(buckets[0].Counts, map[string]int64{models.ActivityDeleted: 3}) {
		t.Errorf("activity = %+v; want one bucket, deleted 3", buckets)
	}
}
