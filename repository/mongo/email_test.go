package mongo_test

import (
	"context"
	"errors"
	stdsync "sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
)

// TestUsersApply_ATakenEmailIsSaidByTheFirstRefusedWrite gives a user an
// email another active user holds, as a new user and as an update, and
// counts the round trips: the first refused write says so (on the
// embedded engine, whose insert error does not name the index, one read
// by _id confirms it), with no rounds of retries.
func TestUsersApply_ATakenEmailIsSaidByTheFirstRefusedWrite(t *testing.T) {
	ctx := context.Background()
	var mu stdsync.Mutex
	var cmds []string
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		cmds = append(cmds, e.CommandName)
	}}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		c := cmds
		cmds = nil
		return c
	}
	s := newStoreWith(t, serverURI(t), repository.Options{Monitor: mon})
	for _, ch := range []models.Change{
		change("user_holder", "msg_1", time.Second, "taken@example.com"),
		change("user_other", "msg_2", time.Second, "free@example.com"),
	} {
		if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	newUser := change("user_new", "msg_3", time.Second, "taken@example.com")
	newUser.New = true
	for _, tc := range []struct {
		name string
		ch   models.Change
	}{
		{"new user", newUser},
		{"new user, not flagged new", change("user_new2", "msg_4", time.Second, "taken@example.com")},
		{"update", change("user_other", "msg_5", 2*time.Second, "taken@example.com")},
	} {
		take()
		_, err := s.Users().Apply(ctx, tc.ch, time.Now())
		got := take()
		if !errors.Is(err, models.ErrEmailTaken) || errors.Is(err, models.ErrConflict) {
			t.Errorf("%s: err = %v, want ErrEmailTaken (and not ErrConflict)", tc.name, err)
		}
		if len(got) > 3 {
			t.Errorf("%s: %d round trips %v, want the first refused write to tell", tc.name, len(got), got)
		}
	}
}
