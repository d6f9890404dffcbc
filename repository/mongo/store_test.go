package mongo_test

import (
	"context"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

func TestStore_EnsureIndexesIsIdempotent(t *testing.T) {
	s := mongotest.Open(t) // ensures once
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
	s := mongotest.Open(t)
	old := map[string][]driver.IndexModel{
		mongo.UsersCollection: {
			{Keys: bson.D{{Key: "updatedAt", Value: -1}}},
			{Keys: bson.D{{Key: "deletedAt", Value: 1}, {Key: "updatedAt", Value: -1}}},
		},
		mongo.EventsCollection: {
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
	// What a new database gets (the explain test checks that a query
	// reads each of those).
	fresh := mongotest.Open(t)
	for coll := range old {
		got, want := indexNames(t, s, coll), indexNames(t, fresh, coll)
		if !slices.Equal(got, want) {
			t.Errorf("%s indexes = %v, want those of a new database, %v", coll, got, want)
		}
	}
}

// indexNames lists the indexes of the collection coll of s, sorted.
func indexNames(t *testing.T, s *mongo.Store, coll string) []string {
	t.Helper()
	specs, err := s.Database().Collection(coll).Indexes().ListSpecifications(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	slices.Sort(names)
	return names
}
