package mongo

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// TestRuns_ADocumentRecordedBeforeKindsReadsAsTheUsers decodes a run as
// an earlier version wrote it: its counts are the users', and the other
// kinds have none (not zeros). A run written now keeps the users' fields
// that version reads, and each kind's counts.
func TestRuns_ADocumentRecordedBeforeKindsReadsAsTheUsers(t *testing.T) {
	started := time.Date(2026, 2, 1, 6, 0, 0, 0, time.UTC)
	old, err := bson.Marshal(bson.D{
		{Key: "_id", Value: "001769925600000-65f0a0a0a0a0a0a0a0a0a0a0"}, {Key: "kind", Value: "reconcile"},
		{Key: "trigger", Value: "schedule"}, {Key: "startedAt", Value: started}, {Key: "durationMs", Value: int64(2500)},
		{Key: "success", Value: false}, {Key: "error", Value: "11 users are absent from Clerk"},
		{Key: "clerkUsers", Value: 20}, {Key: "localUsers", Value: 31}, {Key: "applied", Value: 1}, {Key: "stale", Value: 2},
		{Key: "unchanged", Value: 17}, {Key: "deleted", Value: 0}, {Key: "failed", Value: 0},
		{Key: "refused", Value: true}, {Key: "toDelete", Value: 11},
	})
	if err != nil {
		t.Fatal(err)
	}
	var d runDoc
	if err := bson.Unmarshal(old, &d); err != nil {
		t.Fatal(err)
	}
	r := d.model()
	want := models.ReconcileCounts{Clerk: 20, Local: 31, Applied: 1, Stale: 2, Unchanged: 17, Refused: true, ToDelete: 11}
	if r.Users == nil || *r.Users != want || r.Organizations != nil || r.Memberships != nil || !r.StartedAt.Equal(started) ||
		r.Duration != 2500*time.Millisecond {
		t.Errorf("the earlier run reads %+v (users %+v); want users %+v and no other kind", r, r.Users, want)
	}

	now := models.ReconcileSummary{
		ID: "001769929200000-65f0a0a0a0a0a0a0a0a0a0a1", Kind: "reconcile", Trigger: "command", StartedAt: started.Add(time.Hour),
		Organizations: &models.ReconcileCounts{Clerk: 1, Local: 4, Unchanged: 1, Refused: true, ToDelete: 3},
	}
	b, err := bson.Marshal(newRunDoc(now))
	if err != nil {
		t.Fatal(err)
	}
	var raw bson.M
	if err := bson.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["localUsers"] != int32(-1) || raw["clerkUsers"] != int32(0) || raw["refused"] != true {
		t.Errorf("a run without users writes the users' fields %v, %v and refused %v; want 0, -1 (not read) and the run's refusal",
			raw["clerkUsers"], raw["localUsers"], raw["refused"])
	}
	var back runDoc
	if err := bson.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.model(); got.Users != nil || got.Memberships != nil || got.Organizations == nil || *got.Organizations != *now.Organizations {
		t.Errorf("a run written now reads %+v (organizations %+v); want its organizations only", got, got.Organizations)
	}
}
