package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about reading the event log: newest first, in full pages,
// with every filter, by kind of object and by object.

func testEventLog(t *testing.T, s repository.Store) {
	ctx := context.Background()
	types := []models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}
	var all []models.Event
	for i := range 12 {
		user := fmt.Sprintf("user_%d", i%3)
		ev := kindEvent(fmt.Sprintf("msg_log%02d", i), models.KindUser, types[i%3], user, user, time.Duration(i/2)*time.Second) // pairs share a time
		ev.RawBody = []byte(`{}`)
		ev = record(t, s, ev)
		if i%4 == 0 {
			if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
				t.Fatal(err)
			}
			ev.Status = models.StatusProcessed
		}
		all = append(all, ev)
	}
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
	ctx := context.Background()
	ets := []models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}
	var all []models.Event
	for i := range 18 {
		k := models.Kinds[i%3]
		object := fmt.Sprintf("%s_%d", map[models.Kind]string{models.KindUser: "user", models.KindOrganization: "org", models.KindMembership: "orgmem"}[k], i%2)
		user := "user_k"
		if k == models.KindOrganization {
			user = ""
		}
		ev := record(t, s, kindEvent(fmt.Sprintf("msg_k%02d", i), k, ets[(i/3)%3], object, user, time.Duration(i/2)*time.Second))
		if i%5 == 0 {
			if err := s.Events().MarkFailed(ctx, ev.ID, "boom", nil); err != nil {
				t.Fatal(err)
			}
			ev.Status = models.StatusFailed
		}
		all = append(all, ev)
	}
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
