package mongo_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

func change(userID, eventID string, at time.Duration, email string) models.UserChange {
	return models.UserChange{
		UserID: userID, EventID: eventID, SourceTime: t0.Add(at),
		Email: email, DisplayName: "Name " + eventID, Metadata: json.RawMessage(`{"e":"` + eventID + `"}`),
	}
}

func deletion(userID, eventID string, at time.Duration) models.UserChange {
	return models.UserChange{UserID: userID, EventID: eventID, SourceTime: t0.Add(at), Deleted: true}
}

func TestUsersApply_OrderingAndDeletes(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	steps := []struct {
		ch   models.UserChange
		want models.Outcome
	}{
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied},
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied}, // same event again
		{change("user_1", "msg_a", 1*time.Second, "old@example.com"), models.OutcomeStale},
		{change("user_1", "msg_c", 2*time.Second, "c@example.com"), models.OutcomeApplied}, // tie: larger event id wins
		{change("user_1", "msg_a2", 2*time.Second, "x@example.com"), models.OutcomeStale},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d2", 4*time.Second), models.OutcomeDeleted},
		{change("user_1", "msg_e", 9*time.Second, "c@example.com"), models.OutcomeDeleted},
		{deletion("user_2", "msg_f", 1*time.Second), models.OutcomeApplied},
		{change("user_2", "msg_g", 9*time.Second, "c@example.com"), models.OutcomeDeleted},
		{change("user_3", "msg_h", 1*time.Second, "c@example.com"), models.OutcomeApplied}, // email free again
	}
	for i, st := range steps {
		got, err := s.Users().Apply(ctx, st.ch, time.Now())
		if err != nil || got != st.want {
			t.Fatalf("step %d: Apply(%s %s) = %q, %v; want %q", i, st.ch.UserID, st.ch.EventID, got, err, st.want)
		}
	}
	u, err := s.Users().Get(ctx, "user_1")
	if err != nil {
		t.Fatal(err)
	}
	if u.DeletedAt == nil || !u.DeletedAt.Equal(t0.Add(3*time.Second)) || u.Email != "" || u.DisplayName != "user_1" || string(u.Metadata) != "{}" {
		t.Errorf("deleted user_1 = %+v", u)
	}
	u3, err := s.Users().Get(ctx, "user_3")
	if err != nil || u3.Email != "c@example.com" || u3.DeletedAt != nil {
		t.Errorf("user_3 = %+v, %v", u3, err)
	}
	// user_4's state at 1s claims c@example.com, which user_3 holds with an
	// older state (same time, smaller event id): user_3 has given it up.
	if got, err := s.Users().Apply(ctx, change("user_4", "msg_i", time.Second, "c@example.com"), time.Now()); err != nil || got != models.OutcomeApplied {
		t.Errorf("Apply with an email an older state holds = %q, %v; want applied", got, err)
	}
	// The same on the update path (the user exists).
	if _, err := s.Users().Apply(ctx, change("user_5", "msg_j", time.Second, "free@example.com"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Users().Apply(ctx, change("user_5", "msg_k", 2*time.Second, "c@example.com"), time.Now()); err != nil || got != models.OutcomeApplied {
		t.Errorf("update to an email an older state holds = %q, %v; want applied", got, err)
	}
	for user, want := range map[string]string{"user_3": "", "user_4": "", "user_5": "c@example.com"} {
		if u, err := s.Users().Get(ctx, user); err != nil || u.Email != want {
			t.Errorf("%s = %+v, %v; want email %q", user, u, err, want)
		}
	}
}

func TestUsersApply_MetadataKeysRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	meta := `{"a.b":1,"$set":{"x.y":[1,2.5,"z",null,true]},"%2E":"pct","":"empty","ü€😀":{"k\u0000":"nul"},"big":12345678901234,"neg":-3,"html":"<&>","arr":[{"$k":{}}],"b":false}`
	ch := change("user_m", "msg_m", time.Second, "")
	ch.Metadata = json.RawMessage(meta)
	if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
		t.Fatal(err)
	}
	u, err := s.Users().Get(ctx, "user_m")
	if err != nil {
		t.Fatal(err)
	}
	if string(u.Metadata) != meta {
		t.Errorf("metadata = %s\nwant       %s", u.Metadata, meta)
	}
	if u.Email != "" {
		t.Errorf("email = %q, want none", u.Email)
	}
}
