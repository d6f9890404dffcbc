package models_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// sessionBody is the session.created fixture with its data edited by edit.
func sessionBody(t *testing.T, edit func(data map[string]any)) models.ClerkEvent {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, "session.created.json"), &env); err != nil {
		t.Fatal(err)
	}
	edit(env["data"].(map[string]any))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := models.DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestSessionChange_CarriesTheActivityAndACompleteUserOnly(t *testing.T) {
	now := time.UnixMilli(1716883200000).Add(time.Hour)
	const userID = "user_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	activity := time.UnixMilli(1716883200000).UTC()
	tests := []struct {
		name     string
		edit     func(d map[string]any)
		activeAt time.Time
		withUser bool
	}{
		{"as Clerk sends it", func(map[string]any) {}, activity, true},
		{"user null", func(d map[string]any) { d["user"] = nil }, activity, false},
		{"user absent", func(d map[string]any) { delete(d, "user") }, activity, false},
		{"user without its emails", func(d map[string]any) { delete(d["user"].(map[string]any), "email_addresses") }, activity, false},
		{"user without banned", func(d map[string]any) { delete(d["user"].(map[string]any), "banned") }, activity, false},
		{"no last_active_at: created_at", func(d map[string]any) {
			d["last_active_at"] = nil
			d["created_at"] = 1716883100000
		}, time.UnixMilli(1716883100000).UTC(), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := sessionBody(t, tc.edit)
			if k := ev.Kind(); k != models.KindUser {
				t.Fatalf("Kind() = %q, want user", k)
			}
			ch, err := ev.Decode("msg_1", now)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			s := ch.(models.SessionChange)
			if s.UserID != userID || !s.ActiveAt.Equal(tc.activeAt) || (s.User != nil) != tc.withUser {
				t.Errorf("SessionChange = %s active %s, user %v; want %s active %s, user %v", s.UserID, s.ActiveAt, s.User != nil, userID, tc.activeAt, tc.withUser)
			}
			if s.User != nil && (s.User.EventID != "msg_1" || !s.User.SourceTime.Equal(time.UnixMilli(1716883200000)) || s.User.DisplayName != "John Doe") {
				t.Errorf("embedded user = %+v, want John Doe at its updated_at, of msg_1", *s.User)
			}
			if got := models.EventTime(ch); !got.Equal(tc.activeAt) {
				t.Errorf("EventTime = %s, want the activity %s", got, tc.activeAt)
			}
		})
	}
}

func TestSessionChange_RefusesWhatCanNeverApply(t *testing.T) {
	now := time.UnixMilli(1716883200000).Add(time.Hour)
	for name, edit := range map[string]func(d map[string]any){
		"no user_id":             func(d map[string]any) { delete(d, "user_id") },
		"no activity time":       func(d map[string]any) { d["last_active_at"] = nil; d["created_at"] = "soon" },
		"activity in the future": func(d map[string]any) { d["last_active_at"] = now.Add(48 * time.Hour).UnixMilli() },
		"user of another id":     func(d map[string]any) { d["user"].(map[string]any)["id"] = "user_other" },
		"user not an object":     func(d map[string]any) { d["user"] = "user_2g7np7Hrk0SN6kj5EDMLDaKNL0S" },
		"user's metadata a list": func(d map[string]any) { d["user"].(map[string]any)["public_metadata"] = []any{1} },
		"user's updated_at of 0": func(d map[string]any) { d["user"].(map[string]any)["updated_at"] = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sessionBody(t, edit).Decode("msg_1", now)
			if !errors.Is(err, models.ErrInvalid) {
				t.Errorf("Decode = %v, want an error wrapping ErrInvalid", err)
			}
		})
	}
}

func TestDecideSession_TheSessionRule(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	stored := &models.Version{SourceTime: at(5), EventID: "msg_b"}
	user := func(s int, id string) *models.UserChange {
		return &models.UserChange{UserID: "user_1", EventID: id, SourceTime: at(s)}
	}
	active := at(10)
	tests := []struct {
		name   string
		cur    *models.Version
		active *time.Time
		ch     models.SessionChange
		want   models.Outcome
	}{
		{"unknown user, no state", nil, nil, models.SessionChange{ActiveAt: at(20)}, models.OutcomeIgnored},
		{"unknown user, a state", nil, nil, models.SessionChange{ActiveAt: at(20), User: user(1, "msg_a")}, models.OutcomeApplied},
		{"deleted user", &models.Version{SourceTime: at(1), Deleted: true}, nil, models.SessionChange{ActiveAt: at(20), User: user(9, "msg_z")}, models.OutcomeDeleted},
		{"newer activity", stored, &active, models.SessionChange{ActiveAt: at(20)}, models.OutcomeActivity},
		{"first activity", stored, nil, models.SessionChange{ActiveAt: at(1)}, models.OutcomeActivity},
		{"equal activity", stored, &active, models.SessionChange{ActiveAt: at(10)}, models.OutcomeStale},
		{"older activity", stored, &active, models.SessionChange{ActiveAt: at(9)}, models.OutcomeStale},
		{"equal time, larger id: the stored state stays", stored, &active, models.SessionChange{ActiveAt: at(20), User: user(5, "msg_z")}, models.OutcomeActivity},
		{"newer state", stored, &active, models.SessionChange{ActiveAt: at(9), User: user(6, "msg_a")}, models.OutcomeApplied},
		{"its own state again", stored, &active, models.SessionChange{ActiveAt: at(9), User: user(5, "msg_b")}, models.OutcomeApplied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := models.DecideSession(tc.cur, tc.active, tc.ch).Outcome(tc.cur != nil); got != tc.want {
				t.Errorf("DecideSession(...).Outcome = %s, want %s", got, tc.want)
			}
		})
	}
}
