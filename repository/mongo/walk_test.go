package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

func TestUsersWalkActive_EveryActiveUserWrittenBeforeTheTimeOnce(t *testing.T) {
	defer repository.SetWalkBatchForTest(2)()
	ctx := context.Background()
	s := mongotest.Open(t)
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	state := func(id, eventID string, deleted bool) models.Change {
		return models.Change{UserID: id, EventID: eventID, SourceTime: written.Add(-time.Hour), Deleted: deleted,
			DisplayName: id, Metadata: json.RawMessage(`{}`)}
	}
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("user_walk%d", i)
		at := written
		if i == 5 {
			at = written.Add(time.Minute) // first written after the cut
		}
		if _, err := s.Users().Apply(ctx, state(id, "msg_"+id, false), at); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := s.Users().Apply(ctx, state(id, "msg_z_"+id, true), at); err != nil {
				t.Fatal(err)
			}
		}
		if i != 3 && i != 5 {
			want = append(want, id)
		}
	}
	var got []string
	err := s.Users().WalkActive(ctx, written.Add(time.Second), func(id string) error {
		got = append(got, id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("WalkActive = %v, want %v (active, first written before the cut, each once)", got, want)
	}
}

// TestUsersWalkActive_IsOneQuery: the walk reads the collection once,
// batch after batch of one cursor. A query per batch would sort every
// active user once per batch on an engine that reads no index in order.
func TestUsersWalkActive_IsOneQuery(t *testing.T) {
	defer repository.SetWalkBatchForTest(3)()
	ctx := context.Background()
	var finds atomic.Int32
	s := mongotest.OpenWith(t, repository.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" {
				finds.Add(1)
			}
		},
	}})
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for i := range 10 {
		id := fmt.Sprintf("user_one%d", i)
		ch := models.Change{UserID: id, EventID: "msg_" + id, SourceTime: written, DisplayName: id, Metadata: json.RawMessage(`{}`)}
		if _, err := s.Users().Apply(ctx, ch, written); err != nil {
			t.Fatal(err)
		}
	}
	finds.Store(0)
	n := 0
	if err := s.Users().WalkActive(ctx, written.Add(time.Second), func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 10 || finds.Load() != 1 {
		t.Errorf("WalkActive of 10 users in batches of 3: %d users, %d find commands; want 10 users and 1 find", n, finds.Load())
	}
}
