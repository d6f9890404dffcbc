package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// TestUsersWalkActive_IsOneQuery: the walk reads the collection once,
// batch after batch of one cursor. A query per batch would sort every
// active user once per batch on an engine that reads no index in order.
func TestUsersWalkActive_IsOneQuery(t *testing.T) {
	ctx := context.Background()
	var finds atomic.Int32
	s := mongotest.OpenWith(t, mongo.Options{WalkBatch: 3, Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" {
				finds.Add(1)
			}
		},
	}})
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for i := range 10 {
		id := fmt.Sprintf("user_one%d", i)
		ch := models.UserChange{UserID: id, EventID: "msg_" + id, SourceTime: written, DisplayName: id, Metadata: json.RawMessage(`{}`)}
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
