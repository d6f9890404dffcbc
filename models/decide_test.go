package models

import (
	"slices"
	"testing"
	"time"
)

func TestDecide_TheOrderingRules(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	active := &Version{SourceTime: t0, EventID: "msg_b"}
	tomb := &Version{SourceTime: t0, EventID: "msg_b", Deleted: true}
	state := func(at time.Duration, id string) UserChange { return UserChange{SourceTime: t0.Add(at), EventID: id} }
	del := func(at time.Duration, id string) UserChange {
		return UserChange{SourceTime: t0.Add(at), EventID: id, Deleted: true}
	}
	for _, tc := range []struct {
		name string
		cur  *Version
		ch   UserChange
		want Decision
	}{
		{"unknown user", nil, state(0, "msg_a"), DecideCreate},
		{"unknown user, deletion", nil, del(0, "msg_a"), DecideCreate},
		{"newer state", active, state(time.Second, "msg_a"), DecideUpdate},
		{"older state", active, state(-time.Second, "msg_z"), DecideStale},
		{"same time, larger id", active, state(0, "msg_c"), DecideUpdate},
		{"same time, smaller id", active, state(0, "msg_a"), DecideStale},
		{"the same event again", active, state(0, "msg_b"), DecideUnchanged},
		{"older deletion still deletes", active, del(-time.Hour, "msg_a"), DecideUpdate},
		{"the same deletion again", tomb, del(0, "msg_b"), DecideUnchanged},
		{"newer state of a tombstone", tomb, state(time.Hour, "msg_z"), DecideDeleted},
		{"another deletion of a tombstone", tomb, del(time.Hour, "msg_z"), DecideDeleted},
	} {
		if got := Decide(tc.cur, tc.ch.Version()); got != tc.want {
			t.Errorf("%s: Decide = %d, want %d", tc.name, got, tc.want)
		}
	}
	if DecideUnchanged.Outcome() != OutcomeApplied || DecideStale.Outcome() != OutcomeStale ||
		DecideDeleted.Outcome() != OutcomeDeleted || DecideCreate.Outcome() != OutcomeApplied {
		t.Error("outcomes of decisions are wrong")
	}
	if DecideUnchanged.Writes() || !DecideUpdate.Writes() || !DecideCreate.Writes() {
		t.Error("Writes is wrong")
	}
}

func TestTakesEmailFrom_AnOlderHolderGivesItUp(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	holder := Version{SourceTime: t0, EventID: "msg_h"}
	if !TakesEmailFrom(UserChange{SourceTime: t0.Add(time.Second), EventID: "msg_a"}, holder) {
		t.Error("a newer claim does not take the email from an older holder")
	}
	if TakesEmailFrom(UserChange{SourceTime: t0.Add(-time.Second), EventID: "msg_z"}, holder) {
		t.Error("an older claim takes the email from a newer holder")
	}
}

func TestReadOutcome_AnEarlierVersionsDeletedUserIsDeleted(t *testing.T) {
	for in, want := range map[string]Outcome{
		"deleted_user": OutcomeDeleted, "deleted": OutcomeDeleted,
		"applied": OutcomeApplied, "stale": OutcomeStale, "": "",
	} {
		if got := ReadOutcome(in); got != want {
			t.Errorf("ReadOutcome(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"deleted_user": ActivityDeleted, "deleted": ActivityDeleted, "received": ActivityReceived, "failed": ActivityFailed} {
		if got := ReadActivityKind(in); got != want {
			t.Errorf("ReadActivityKind(%q) = %q, want %q", in, got, want)
		}
	}
	if slices.Contains(Outcomes, OutcomeDeletedUserLegacy) || slices.Contains(ActivityKinds, string(OutcomeDeletedUserLegacy)) {
		t.Error("deleted_user is still an outcome or an activity kind of its own")
	}
}
