package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about reading the event log: newest first, in full pages,
// with every filter, by kind of object and by object.

// logRow is one event of an event log fixture: its eventId, kind, type,
// object (none for a user event), user, status, and when it was received
// after t0.
type logRow struct {
	id     string
	kind   models.Kind
	typ    models.EventType
	object string
	user   string
	status models.EventStatus
	at     time.Duration
}

// recordLog records the events of rows in order, marks the processed ones
// applied and the failed ones given up, and returns them as stored,
// oldest first.
func recordLog(t *testing.T, s repository.Store, rows []logRow) []models.Event {
	t.Helper()
	ctx := context.Background()
	var all []models.Event
	for _, r := range rows {
		ev := record(t, s, kindEvent(r.id, r.kind, r.typ, r.object, r.user, r.at))
		switch r.status {
		case models.StatusProcessed:
			if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
				t.Fatal(err)
			}
		case models.StatusFailed:
			if err := s.Events().MarkFailed(ctx, ev.ID, "boom", nil); err != nil {
				t.Fatal(err)
			}
		}
		ev.Status = r.status
		all = append(all, ev)
	}
	return all
}

func testEventLog(t *testing.T, s repository.Store) {
	ctx := context.Background()
	// Pairs of events share a time.
	all := recordLog(t, s, []logRow{
		{"msg_log00", models.KindUser, models.EventCreated, "", "user_0", models.StatusProcessed, 0},
		{"msg_log01", models.KindUser, models.EventUpdated, "", "user_1", models.StatusStored, 0},
		{"msg_log02", models.KindUser, models.EventDeleted, "", "user_2", models.StatusStored, 1 * time.Second},
		{"msg_log03", models.KindUser, models.EventCreated, "", "user_0", models.StatusStored, 1 * time.Second},
		{"msg_log04", models.KindUser, models.EventUpdated, "", "user_1", models.StatusProcessed, 2 * time.Second},
		{"msg_log05", models.KindUser, models.EventDeleted, "", "user_2", models.StatusStored, 2 * time.Second},
		{"msg_log06", models.KindUser, models.EventCreated, "", "user_0", models.StatusStored, 3 * time.Second},
		{"msg_log07", models.KindUser, models.EventUpdated, "", "user_1", models.StatusStored, 3 * time.Second},
		{"msg_log08", models.KindUser, models.EventDeleted, "", "user_2", models.StatusProcessed, 4 * time.Second},
		{"msg_log09", models.KindUser, models.EventCreated, "", "user_0", models.StatusStored, 4 * time.Second},
		{"msg_log10", models.KindUser, models.EventUpdated, "", "user_1", models.StatusStored, 5 * time.Second},
		{"msg_log11", models.KindUser, models.EventDeleted, "", "user_2", models.StatusStored, 5 * time.Second},
	})
	for _, f := range []models.EventFilter{
		{},
		{Status: models.StatusProcessed},
		{EventType: models.EventUpdated},
		{UserID: "user_1"},
		{Status: models.StatusStored, EventType: models.EventCreated},
		{Status: models.StatusStored, UserID: "user_2"},
		{Since: t0.Add(2 * time.Second), Until: t0.Add(5 * time.Second)},
	} {
		if got, want := logIDs(t, s, f), selected(all, f); !inLogOrder(all, got, want) {
			t.Errorf("log %+v = %v, want %v (newest first)", f, got, want)
		}
	}
	if _, err := s.Events().List(ctx, models.EventFilter{Limit: 2, After: "nonsense"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

func testEventLogByKindAndObject(t *testing.T, s repository.Store) {
	// Every kind, type and status; two objects of each kind but users, a
	// user of every event but an organization's; pairs share a time.
	all := recordLog(t, s, []logRow{
		{"msg_k00", models.KindUser, models.EventCreated, "", "user_k", models.StatusFailed, 0},
		{"msg_k01", models.KindOrganization, models.EventCreated, "org_1", "", models.StatusStored, 0},
		{"msg_k02", models.KindMembership, models.EventCreated, "orgmem_0", "user_k", models.StatusStored, 1 * time.Second},
		{"msg_k03", models.KindUser, models.EventUpdated, "", "user_k", models.StatusStored, 1 * time.Second},
		{"msg_k04", models.KindOrganization, models.EventUpdated, "org_0", "", models.StatusStored, 2 * time.Second},
		{"msg_k05", models.KindMembership, models.EventUpdated, "orgmem_1", "user_k", models.StatusFailed, 2 * time.Second},
		{"msg_k06", models.KindUser, models.EventDeleted, "", "user_k", models.StatusStored, 3 * time.Second},
		{"msg_k07", models.KindOrganization, models.EventDeleted, "org_1", "", models.StatusStored, 3 * time.Second},
		{"msg_k08", models.KindMembership, models.EventDeleted, "orgmem_0", "user_k", models.StatusStored, 4 * time.Second},
		{"msg_k09", models.KindUser, models.EventCreated, "", "user_k", models.StatusStored, 4 * time.Second},
		{"msg_k10", models.KindOrganization, models.EventCreated, "org_0", "", models.StatusFailed, 5 * time.Second},
		{"msg_k11", models.KindMembership, models.EventCreated, "orgmem_1", "user_k", models.StatusStored, 5 * time.Second},
		{"msg_k12", models.KindUser, models.EventUpdated, "", "user_k", models.StatusStored, 6 * time.Second},
		{"msg_k13", models.KindOrganization, models.EventUpdated, "org_1", "", models.StatusStored, 6 * time.Second},
		{"msg_k14", models.KindMembership, models.EventUpdated, "orgmem_0", "user_k", models.StatusStored, 7 * time.Second},
		{"msg_k15", models.KindUser, models.EventDeleted, "", "user_k", models.StatusFailed, 7 * time.Second},
		{"msg_k16", models.KindOrganization, models.EventDeleted, "org_0", "", models.StatusStored, 8 * time.Second},
		{"msg_k17", models.KindMembership, models.EventDeleted, "orgmem_1", "user_k", models.StatusStored, 8 * time.Second},
	})
	for _, f := range []models.EventFilter{
		{Kind: models.KindMembership},
		{Kind: models.KindUser, EventType: models.EventUpdated},
		{EventType: models.EventDeleted},
		{Status: models.StatusFailed, Kind: models.KindOrganization},
		{Status: models.StatusStored, EventType: models.EventCreated},
		{Status: models.StatusStored, Kind: models.KindMembership, EventType: models.EventUpdated},
		{ObjectID: "orgmem_1"},
		{ObjectID: "org_0", Status: models.StatusStored},
		{UserID: "user_k", Kind: models.KindMembership},
		{Kind: models.KindOrganization, Since: t0.Add(2 * time.Second), Until: t0.Add(7 * time.Second)},
	} {
		want := selected(all, f)
		if len(want) == 0 {
			t.Fatalf("filter %+v selects nothing: the test is wrong", f)
		}
		if got := logIDs(t, s, f); !inLogOrder(all, got, want) {
			t.Errorf("List(%+v) = %v, want %v (newest first, every page full)", f, got, want)
		}
	}
}

// selected returns the event ids of all (oldest first) that f selects,
// newest first: what the log should list.
func selected(all []models.Event, f models.EventFilter) []string {
	var want []string
	for i := len(all) - 1; i >= 0; i-- {
		ev := all[i]
		if (f.Status == "" || ev.Status == f.Status) && (f.EventType == "" || ev.EventType == f.EventType) &&
			(f.Kind == "" || ev.Kind() == f.Kind) && (f.ObjectID == "" || ev.ObjectID == f.ObjectID) &&
			(f.UserID == "" || ev.UserID == f.UserID) && (f.Since.IsZero() || !ev.ReceivedAt.Before(f.Since)) &&
			(f.Until.IsZero() || ev.ReceivedAt.Before(f.Until)) {
			want = append(want, ev.EventID)
		}
	}
	return want
}

// inLogOrder reports whether got lists the events of want, each once, in
// the log's order: newest receivedAt first. Events received at the same
// time may come in any order the store keeps (SQLite breaks the tie by
// row, MongoDB by _id, a hash of the event id), so each run of one time
// is compared as a set.
func inLogOrder(all []models.Event, got, want []string) bool {
	at := make(map[string]time.Time, len(all))
	for _, ev := range all {
		at[ev.EventID] = ev.ReceivedAt
	}
	norm := func(ids []string) []string {
		out := slices.Clone(ids)
		for i := 0; i < len(out); {
			j := i + 1
			for j < len(out) && at[out[j]].Equal(at[out[i]]) {
				j++
			}
			slices.Sort(out[i:j])
			i = j
		}
		return out
	}
	return slices.Equal(norm(got), norm(want))
}

// logIDs reads the whole log of f in pages of 2 and returns its event
// ids, checking that every page but the last is full and that no page
// carries a body.
func logIDs(t *testing.T, s repository.Store, f models.EventFilter) []string {
	t.Helper()
	var got []string
	f.Limit = 2
	for range 50 {
		page, err := s.Events().List(context.Background(), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		if len(page.Events) < f.Limit && page.NextCursor != "" {
			t.Errorf("List(%+v): a page of %d with a next cursor", f, len(page.Events))
		}
		for _, ev := range page.Events {
			if len(ev.RawBody) != 0 {
				t.Errorf("the log carries a body: %q", ev.RawBody)
			}
			got = append(got, ev.EventID)
		}
		if page.NextCursor == "" {
			break
		}
		f.After = page.NextCursor
	}
	return got
}
