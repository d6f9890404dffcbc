package models

import (
	"fmt"
	"testing"
)

// TestEventStats_AddUnprocessedCountsPerKind adds counts as the stores
// read them: stored, failed to be retried, and failed for good, per kind.
func TestEventStats_AddUnprocessedCountsPerKind(t *testing.T) {
	st := NewEventStats()
	for _, g := range []struct {
		status EventStatus
		typ    string
		retry  bool
		n      int64
	}{
		{StatusStored, TypeUserCreated, false, 3},
		{StatusStored, TypeUserUpdated, false, 2},
		{StatusFailed, TypeUserUpdated, true, 4},
		{StatusFailed, TypeOrganizationDeleted, false, 1},
		{StatusFailed, TypeMembershipCreated, false, 5},
		{StatusFailed, TypeMembershipCreated, true, 6},
	} {
		st.AddUnprocessed(g.status, KindOf(g.typ), g.retry, g.n)
	}
	want := map[Kind]KindStats{} // every kind, those without events at 0
	for _, k := range Kinds {
		want[k] = KindStats{}
	}
	want[KindUser] = KindStats{Stored: 5, Failed: 4}
	want[KindOrganization] = KindStats{Failed: 1, GaveUp: 1}
	want[KindMembership] = KindStats{Failed: 11, GaveUp: 5}
	if fmt.Sprint(st.ByKind) != fmt.Sprint(want) {
		t.Errorf("ByKind = %v, want %v", st.ByKind, want)
	}
	if st.ByStatus[StatusStored] != 5 || st.ByStatus[StatusFailed] != 16 || st.GaveUp != 6 {
		t.Errorf("totals = %v, gave up %d; want 5 stored, 16 failed, 6 given up", st.ByStatus, st.GaveUp)
	}
}
