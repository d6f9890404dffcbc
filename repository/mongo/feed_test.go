package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

func TestUsersChanges_OrderCursorAndUpperBound(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	base := time.Now().UTC().Truncate(time.Millisecond)
	// updatedAt is the time Apply is given: three users share one millisecond.
	writes := []struct {
		user string
		at   time.Duration
	}{{"user_a", 0}, {"user_b", 0}, {"user_c", 0}, {"user_d", time.Millisecond}, {"user_e", 3 * time.Millisecond}}
	for i, w := range writes {
		ch := change(w.user, fmt.Sprintf("msg_%d", i), time.Duration(i)*time.Second, "")
		if _, err := s.Users().Apply(ctx, ch, base.Add(w.at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Users().Apply(ctx, deletion("user_b", "msg_del", time.Hour), base.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}

	walk := func(since, until time.Time, limit int) (ids []string, cursor string) {
		t.Helper()
		for range 20 {
			page, err := s.Users().Changes(ctx, models.ChangeFilter{Since: since, Until: until, After: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if page.NextCursor == "" {
				t.Fatal("no NextCursor")
			}
			for _, u := range page.Users {
				ids = append(ids, u.UserID)
			}
			cursor = page.NextCursor
			if len(page.Users) < limit {
				return ids, cursor
			}
		}
		t.Fatal("the walk does not end")
		return nil, ""
	}
	// user_b changed last at +2ms (its delete); user_e at +3ms is beyond Until.
	ids, cursor := walk(base.Add(-time.Microsecond), base.Add(2*time.Millisecond), 1)
	same := map[string]bool{"user_a": true, "user_c": true}
	if len(ids) != 4 || !same[ids[0]] || !same[ids[1]] || ids[2] != "user_d" || ids[3] != "user_b" {
		t.Errorf("walk = %v, want user_a and user_c (same time, by id), user_d, user_b", ids)
	}
	// Polling from the last cursor serves what came after, once.
	more, _ := walk(base, base.Add(time.Hour), 10)
	if fmt.Sprint(more) != "[user_a user_c user_d user_b user_e]" && fmt.Sprint(more) != "[user_c user_a user_d user_b user_e]" {
		t.Errorf("full walk = %v", more)
	}
	page, err := s.Users().Changes(ctx, models.ChangeFilter{Since: base, Until: base.Add(time.Hour), After: cursor, Limit: 10})
	if err != nil || len(page.Users) != 1 || page.Users[0].UserID != "user_e" {
		t.Errorf("poll after the cursor = %+v, %v; want user_e alone", page.Users, err)
	}
	// A since within a millisecond selects as the millisecond after it.
	if ids, _ := walk(base.Add(time.Microsecond), base.Add(time.Hour), 10); len(ids) != 3 {
		t.Errorf("since +1µs = %v, want the 3 users changed at +1ms or later", ids)
	}
	if _, err := s.Users().Changes(ctx, models.ChangeFilter{Since: base, Until: base, After: "nonsense", Limit: 1}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}
