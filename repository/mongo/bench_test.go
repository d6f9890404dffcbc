package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// benchSeeded is the Clerk time of every seeded user's state.
var benchSeeded = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seedUsers inserts n active users, shaped as Apply writes them.
func seedUsers(b *testing.B, s *mongo.Store, n int) {
	b.Helper()
	changes := make([]models.UserChange, n)
	for i := range changes {
		uid := fmt.Sprintf("user_bench_%d", i)
		changes[i] = models.UserChange{
			UserID: uid, EventID: "msg_seed_" + uid, SourceTime: benchSeeded,
			Email: uid + "@example.com", DisplayName: "Bench " + uid, Metadata: json.RawMessage(`{"plan":"free"}`),
		}
	}
	if err := s.SeedUsers(context.Background(), changes, time.Now().UTC().Truncate(time.Millisecond)); err != nil {
		b.Fatalf("seed users: %v", err)
	}
}

// BenchmarkUsersApply measures the write of one user change on the server
// at MONGODB_URI as the collection grows: a newer state of an existing
// user (one conditional upsert), an older one (the upsert, refused, and a
// read by _id), and a new user (the upsert). None of them should grow with
// the collection.
func BenchmarkUsersApply(b *testing.B) {
	uri := mongotest.URI(b)
	ctx := context.Background()
	meta := json.RawMessage(`{"plan":"pro","roles":["editor"]}`)
	for _, size := range []int{100, 1000} {
		s := mongotest.OpenAt(b, uri, mongo.Options{})
		seedUsers(b, s, size)
		seq := 0 // every change gets a later Clerk time and its own event id
		ops := []struct {
			name   string
			change func(i int) models.UserChange
			want   models.Outcome
		}{
			{"update", func(i int) models.UserChange {
				uid := fmt.Sprintf("user_bench_%d", i%size)
				return models.UserChange{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded.Add(time.Duration(seq) * time.Second),
					Email: uid + "@example.com", DisplayName: fmt.Sprintf("Bench %d", seq), Metadata: meta}
			}, models.OutcomeApplied},
			{"stale", func(i int) models.UserChange {
				uid := fmt.Sprintf("user_bench_%d", i%size)
				return models.UserChange{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded.Add(-time.Hour),
					Email: uid + "@example.com", DisplayName: "Old", Metadata: meta}
			}, models.OutcomeStale},
			{"create", func(int) models.UserChange {
				uid := fmt.Sprintf("user_bench_new_%d", seq)
				return models.UserChange{UserID: uid, EventID: fmt.Sprintf("msg_bench_%d", seq), SourceTime: benchSeeded,
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
						got, err := s.Users().Apply(ctx, ch, time.Now())
						if err != nil || got != op.want {
							b.Fatalf("Apply(%s %s) = %q, %v; want %q", ch.UserID, ch.EventID, got, err, op.want)
						}
					}
				})
			}
		})
	}
}
