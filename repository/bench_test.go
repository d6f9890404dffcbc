package repository_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
)

// benchSeeded is the Clerk time of every seeded user's state.
var benchSeeded = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seedUsers inserts n active users through the driver, shaped as Apply
// writes them (small documents, no payload).
func seedUsers(b *testing.B, s *repository.Store, n int) {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		var docs []any
		for i := lo; i < min(lo+batch, n); i++ {
			uid := fmt.Sprintf("user_bench_%d", i)
			docs = append(docs, bson.D{
				{Key: "userId", Value: uid}, {Key: "email", Value: uid + "@example.com"},
				{Key: "displayName", Value: "Bench " + uid}, {Key: "metadata", Value: bson.D{{Key: "plan", Value: "free"}}},
				{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "deletedAt", Value: nil},
				{Key: "sourceUpdatedAt", Value: benchSeeded}, {Key: "lastEventId", Value: "msg_seed_" + uid},
			})
		}
		if _, err := s.Database().Collection(repository.UsersCollection).InsertMany(context.Background(), docs); err != nil {
			b.Fatalf("seed users: %v", err)
		}
	}
}

// BenchmarkUsersApply_Embedded measures the conditional write of one user
// change on the embedded engine, whatever MONGODB_URI says, as the
// collection grows: a newer state of an existing user (one update), an
// older one (the update misses, the insert is refused, the state is read),
// and a new user (one insert). The engine reads every document for a
// filter, so the first two grow with the collection. The engine runs in
// this process: the allocations reported are its as well as the driver's.
func BenchmarkUsersApply_Embedded(b *testing.B) {
	engine := repotest.StartEngine(b)
	ctx := context.Background()
	meta := json.RawMessage(`{"plan":"pro","roles":["editor"]}`)
	for _, size := range []int{100, 1000} {
		s := repotest.NewStoreAt(b, engine.URI(), repository.Options{})
		seedUsers(b, s, size)
		seq := 0 // every change gets a later Clerk time and its own event id
		ops := []struct {
			name   string
			change func(i int) models.Change
			want   models.Outcome
		}{
			{"update", func(i int) models.Change {
				uid := fmt.Sprintf("user_bench_%d", i%size)
				return models.Change{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded.Add(time.Duration(seq) * time.Second),
					Email: uid + "@example.com", DisplayName: fmt.Sprintf("Bench %d", seq), Metadata: meta}
			}, models.OutcomeApplied},
			{"stale", func(i int) models.Change {
				uid := fmt.Sprintf("user_bench_%d", i%size)
				return models.Change{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded.Add(-time.Hour),
					Email: uid + "@example.com", DisplayName: "Old", Metadata: meta}
			}, models.OutcomeStale},
			{"create", func(int) models.Change {
				uid := fmt.Sprintf("user_bench_new_%d", seq)
				return models.Change{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded,
					Email: uid + "@example.com", DisplayName: "New", Metadata: meta, New: true}
			}, models.OutcomeApplied},
		}
		b.Run(fmt.Sprintf("users=%d", size), func(b *testing.B) {
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						seq++
						ch := op.change(i)
						got, err := s.Users.Apply(ctx, ch, time.Now())
						if err != nil || got != op.want {
							b.Fatalf("Apply(%s %s) = %q, %v; want %q", ch.UserID, ch.EventID, got, err, op.want)
						}
					}
				})
			}
		})
	}
}
