package mongo

import (
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
		for _, et := range []models.EventType{"", models.EventCreated, models.EventUpdated, models.EventDeleted, models.EventSession} {
			for _, object := range []string{"", "orgmem_1"} {
				f := models.EventFilter{Kind: k, EventType: et, ObjectID: object, Limit: 10}
				filter, err := eventListFilter(f)
				if err != nil {
					t.Fatal(err)
				}
				for i, doc := range docs {
					ev := evs[i]
					// The short type is the kinds table's: a session event's
					// is session, whatever its Clerk type's suffix.
					want := (k == "" || ev.Kind() == k) && (et == "" || models.EventTypeOf(ev.Type) == et) &&
						(object == "" || ev.ObjectID == object)
					if got := matches(t, filter, doc); got != want {
						t.Errorf("filter %v of %+v on %v = %v, want %v", filter, f, doc, got, want)
					}
				}
			}
		}
	}
}
