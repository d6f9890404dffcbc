package mongo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/usersync/usersync/models"
)

// TestEventLogFilter_KindTypeAndObjectSelectTheirEvents checks the filter
// of every combination of kind, event type and object against events of
// every Clerk type: it selects exactly the events models says it should.
func TestEventLogFilter_KindTypeAndObjectSelectTheirEvents(t *testing.T) {
	var docs []map[string]any
	var evs []models.Event
	for _, k := range models.Kinds {
		for _, typ := range models.TypesOf(k) {
			for _, object := range []string{"", "orgmem_1", "org_1"} {
				ev := models.Event{Type: typ, ObjectID: object}
				doc := map[string]any{"type": typ}
				if object != "" {
					doc["objectId"] = object
				}
				docs, evs = append(docs, doc), append(evs, ev)
			}
		}
	}
	for _, k := range append([]models.Kind{""}, models.Kinds...) {
		for _, et := range []models.EventType{"", models.EventCreated, models.EventUpdated, models.EventDeleted} {
			for _, object := range []string{"", "orgmem_1"} {
				f := models.EventFilter{Kind: k, EventType: et, ObjectID: object, Limit: 10}
				filter, err := eventListFilter(f)
				if err != nil {
					t.Fatal(err)
				}
				for i, doc := range docs {
					ev := evs[i]
					_, short, _ := strings.Cut(ev.Type, ".")
					want := (k == "" || ev.Kind() == k) && (et == "" || models.EventType(short) == et) &&
						(object == "" || ev.ObjectID == object)
					if got := matches(t, filter, doc); got != want {
						t.Errorf("filter %v of %+v on %v = %v, want %v", filter, f, doc, got, want)
					}
				}
			}
		}
	}
}

// TestStats_UnprocessedGroupsCountPerKind folds the groups of the stats
// aggregation: stored, failed to be retried, and failed for good, per kind.
func TestStats_UnprocessedGroupsCountPerKind(t *testing.T) {
	st := models.EventStats{ByStatus: map[models.EventStatus]int64{}, ByKind: map[models.Kind]models.KindStats{}}
	for _, g := range []struct {
		status models.EventStatus
		typ    string
		retry  bool
		n      int64
	}{
		{models.StatusStored, models.TypeUserCreated, false, 3},
		{models.StatusStored, models.TypeUserUpdated, false, 2},
		{models.StatusFailed, models.TypeUserUpdated, true, 4},
		{models.StatusFailed, models.TypeOrganizationDeleted, false, 1},
		{models.StatusFailed, models.TypeMembershipCreated, false, 5},
		{models.StatusFailed, models.TypeMembershipCreated, true, 6},
	} {
		foldUnprocessed(&st, g.status, models.KindOf(g.typ), g.retry, g.n)
	}
	want := map[models.Kind]models.KindStats{
		models.KindUser:         {Stored: 5, Failed: 4},
		models.KindOrganization: {Failed: 1, GaveUp: 1},
		models.KindMembership:   {Failed: 11, GaveUp: 5},
	}
	if fmt.Sprint(st.ByKind) != fmt.Sprint(want) {
		t.Errorf("ByKind = %v, want %v", st.ByKind, want)
	}
	if st.ByStatus[models.StatusStored] != 5 || st.ByStatus[models.StatusFailed] != 16 || st.GaveUp != 6 {
		t.Errorf("totals = %v, gave up %d; want 5 stored, 16 failed, 6 given up", st.ByStatus, st.GaveUp)
	}
}
