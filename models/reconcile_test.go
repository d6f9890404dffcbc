package models_test

import (
	"testing"

	"github.com/usersync/usersync/models"
)

func TestReconcileSummary_EachKindHasItsCountsAndAnyRefusalIsTheRuns(t *testing.T) {
	var s models.ReconcileSummary
	users, orgs := &models.ReconcileCounts{Clerk: 3, Local: -1}, &models.ReconcileCounts{Clerk: 2, Refused: true, ToDelete: 11}
	s.Set(models.KindUser, users)
	if s.Refused() {
		t.Error("a summary without a refused kind is refused")
	}
	s.Set(models.KindOrganization, orgs)
	items := &models.ReconcileCounts{Clerk: 4, Local: -1, Applied: 4}
	s.Set(models.KindSubscriptionItem, items)
	if s.Users != users || s.Organizations != orgs || s.Memberships != nil || s.SubscriptionItems != items {
		t.Errorf("after Set of users and organizations: %+v", s)
	}
	for _, tc := range []struct {
		k    models.Kind
		want *models.ReconcileCounts
	}{{models.KindUser, users}, {models.KindOrganization, orgs}, {models.KindMembership, nil}, {models.KindSubscriptionItem, items},
		{"other", nil}} {
		if got := s.Of(tc.k); got != tc.want {
			t.Errorf("Of(%q) = %+v, want %+v", tc.k, got, tc.want)
		}
	}
	if !s.Refused() {
		t.Error("a summary with a refused kind is not refused")
	}
}
