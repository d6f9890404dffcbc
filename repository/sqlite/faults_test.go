package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

// TestWrite_AWriteThatCannotStartInTimeIsUnavailableAndTheStoreStalled:
// with the writer held (a frozen disk), a write whose deadline passes
// before it starts returns then, wrapping models.ErrUnavailable and
// models.ErrStalled, and is never run; Ping reports the writes stalled
// until the writer finishes a batch again.
func TestWrite_AWriteThatCannotStartInTimeIsUnavailableAndTheStoreStalled(t *testing.T) {
	ctx := context.Background()
	disk := &repotest.FrozenDisk{}
	s, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{WriteGate: disk.Gate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	now := time.Now().UTC().Truncate(time.Millisecond)
	ch := func(user, event string) models.UserChange {
		return models.UserChange{UserID: user, EventID: event, SourceTime: now, DisplayName: user, Metadata: json.RawMessage(`{}`)}
	}
	if _, err := s.Users().Apply(ctx, ch("user_before", "msg_1"), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping before the freeze = %v", err)
	}

	disk.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			disk.Thaw()
		}
	}()
	for _, user := range []string{"user_frozen_1", "user_frozen_2"} {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := s.Users().Apply(wctx, ch(user, "msg_"+user), now)
		cancel()
		if !errors.Is(err, models.ErrUnavailable) || !errors.Is(err, models.ErrStalled) {
			t.Fatalf("Apply with the disk frozen = %v; want ErrUnavailable and ErrStalled once its deadline passed", err)
		}
	}
	if err := s.Ping(ctx); !errors.Is(err, models.ErrStalled) || !errors.Is(err, models.ErrUnavailable) {
		t.Errorf("Ping with the disk frozen = %v; want the writes reported stalled", err)
	}

	disk.Thaw()
	thawed = true
	if _, err := s.Users().Apply(ctx, ch("user_after", "msg_2"), now); err != nil {
		t.Fatalf("Apply after the thaw = %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the thaw = %v", err)
	}
	for _, user := range []string{"user_frozen_1", "user_frozen_2"} {
		if _, err := s.Users().Get(ctx, user); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("%s, whose write gave up: Get = %v; want it never written", user, err)
		}
	}
}
