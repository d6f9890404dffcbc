package mongo_test

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	repository "github.com/usersync/usersync/repository/mongo"
)

func TestStore_EnsureIndexesIsIdempotent(t *testing.T) {
	s := newStore(t) // ensures once
	for i := 0; i < 2; i++ {
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatalf("EnsureIndexes again: %v", err)
		}
	}
}

// TestStore_EnsureIndexesDropsIndexesNoQueryUses checks that the indexes
// of earlier versions, which no query uses (and one of which made the
// planner slower), are dropped, and the ones the queries use exist.
func TestStore_EnsureIndexesDropsIndexesNoQueryUses(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	old := map[string][]mongo.IndexModel{
		repository.UsersCollection: {
			{Keys: bson.D{{Key: "updatedAt", Value: -1}}},
			{Keys: bson.D{{Key: "deletedAt", Value: 1}, {Key: "updatedAt", Value: -1}}},
		},
		repository.EventsCollection: {
			{Keys: bson.D{{Key: "receivedAt", Value: -1}}},
			{Keys: bson.D{{Key: "status", Value: 1}, {Key: "receivedAt", Value: -1}}},
		},
	}
	for coll, ims := range old {
		if _, err := s.Database().Collection(coll).Indexes().CreateMany(ctx, ims); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		repository.UsersCollection: {"_id_", "userId_1", "email_1", "updatedAt_1__id_1", "eraseAfter_1"},
		repository.EventsCollection: {"_id_", "eventId_1", "receivedAt_-1__id_-1", "status_1_receivedAt_-1__id_-1",
			"eventType_1_receivedAt_-1__id_-1", "userId_1_receivedAt_-1__id_-1", "retryAt_1", "processedAt_1", "uncounted_1"},
	}
	for coll, names := range want {
		specs, err := s.Database().Collection(coll).Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sp := range specs {
			got = append(got, sp.Name)
		}
		slices.Sort(got)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("%s indexes = %v, want %v", coll, got, names)
		}
	}
}
