package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestEvents_AnEarlierVersionsDeletedUserReadsAsDeletedThroughTheAPI
// stores what an earlier version left (two processed events of a deleted
// user with the outcome deleted_user, counted under that name, and an
// activity count under it), then delivers a late update of a deleted
// user now: the late event answers deleted, and the event, the event log,
// the stats and the charts' counts all say deleted, never deleted_user.
func TestEvents_AnEarlierVersionsDeletedUserReadsAsDeletedThroughTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	h := newConsoleHarness(t, func(o *consoleOptions) { o.now = func() time.Time { return now } })
	processed := now.Add(-time.Minute)
	var earlier []models.Event
	for _, id := range []string{"msg_earlier_1", "msg_earlier_2"} {
		earlier = append(earlier, models.Event{EventID: id, Type: models.TypeUserUpdated, EventType: models.EventUpdated,
			UserID: "user_gone", RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: processed,
			Status: models.StatusProcessed, Outcome: models.OutcomeDeletedUserLegacy, ProcessedAt: &processed, Attempts: 1})
	}
	if err := h.store.SeedEvents(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	if err := h.store.Activity().Add(ctx, processed, string(models.OutcomeDeletedUserLegacy), 2); err != nil {
		t.Fatal(err)
	}

	h.mustDeliver(newID(), deleteBody(t, "user_gone", t0))
	late := newID()
	if res := h.mustDeliver(late, userBody(t, "user.updated", clerkUser{ID: "user_gone", UpdatedAt: t0 + 1000, Email: "gone@example.com"})); res["outcome"] != "deleted" {
		t.Errorf("a late update of a deleted user answered %v, want outcome deleted", res)
	}
	h.flush()

	for _, id := range []string{"msg_earlier_1", "msg_earlier_2", late} {
		if ev := h.get("/v1/events/"+id, testAdminKey).JSON(t); ev["outcome"] != "deleted" {
			t.Errorf("GET /v1/events/%s = %v, want outcome deleted", id, ev)
		}
	}
	var log struct {
		Data []struct{ EventID, Outcome string }
	}
	decode(t, h.get("/v1/events?userId=user_gone&status=processed", testAdminKey), 200, &log)
	deleted := 0
	for _, ev := range log.Data {
		if ev.Outcome == "deleted" {
			deleted++
		}
	}
	if len(log.Data) != 4 || deleted != 3 { // and the deletion: applied
		t.Errorf("the event log of user_gone = %+v; want 4 processed events, 3 of them deleted", log.Data)
	}
	stats := h.get("/v1/events/stats", testAdminKey)
	var st struct{ Outcome map[string]int64 }
	decode(t, stats, 200, &st)
	if st.Outcome["deleted"] != 3 || st.Outcome["applied"] != 1 || len(st.Outcome) != 5 {
		t.Errorf("stats outcome = %v; want applied 1, stale 0, deleted 3, ignored 0, activity 0, and nothing else", st.Outcome)
	}
	activity := h.get("/v1/admin/activity?range=hour", testAdminKey)
	var act struct {
		Kinds  []string
		Totals map[string]int64
		Points []struct{ Counts map[string]int64 }
	}
	decode(t, activity, 200, &act)
	if act.Totals["deleted"] != 3 || strings.Contains(string(activity.Body), "deleted_user") {
		b, _ := json.Marshal(act.Totals)
		t.Errorf("activity kinds %v, totals %s; want deleted 3 and no deleted_user anywhere", act.Kinds, b)
	}
}
