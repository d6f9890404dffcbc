package sync_test

import (
	"testing"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// TestReconcileReport_CountsAreEachKindReadAndNoneOfAKindNotRead checks
// what a run summary keeps of a report: each kind's counts as usersync
// reconcile prints them, and nothing (not zeros) of a kind the run did
// not read, whether not asked for or turned off in the Clerk instance.
func TestReconcileReport_CountsAreEachKindReadAndNoneOfAKindNotRead(t *testing.T) {
	rep := sync.ReconcileReport{Kinds: []sync.KindReport{
		{Kind: models.KindUser, Complete: true, Local: 9, Deleted: 2,
			Listed: sync.Tally{Read: 8, Applied: 1, Stale: 1, Unchanged: 2, DeletedHere: 1, Duplicate: 1, Failed: 2}},
		{Kind: models.KindOrganization, Complete: true, Local: 4, Refused: true, ToDelete: []string{"org_a", "org_b", "org_c"},
			Listed: sync.Tally{Read: 1, Unchanged: 1}},
		{Kind: models.KindMembership, Complete: true, Off: true, Local: -1, DeletesSkipped: "memberships are not enabled in the Clerk instance"},
	}}
	for _, tc := range []struct {
		k    models.Kind
		want *models.ReconcileCounts
	}{
		{models.KindUser, &models.ReconcileCounts{Clerk: 8, Local: 9, Applied: 1, Stale: 1, Unchanged: 4, Deleted: 2, Failed: 2}},
		{models.KindOrganization, &models.ReconcileCounts{Clerk: 1, Local: 4, Unchanged: 1, Refused: true, ToDelete: 3}},
		{models.KindMembership, nil},
	} {
		got := rep.Counts(tc.k)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("Counts(%s) = %+v, want %+v", tc.k, got, tc.want)
		}
	}
	if got := (sync.ReconcileReport{Kinds: rep.Kinds[1:]}).Counts(models.KindUser); got != nil {
		t.Errorf("Counts of users in a run without them = %+v, want nil", got)
	}
}
