package mongo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/usersync/usersync/repository/mongo"
)

// TestOpen_EveryCollectionTakesThePrefix checks, without a server, that
// every collection a store reads or writes, the joins and the erasure's
// read of users included, is named with the collection prefix.
func TestOpen_EveryCollectionTakesThePrefix(t *testing.T) {
	s, err := mongo.Open(context.Background(), "mongodb://127.0.0.1:1/", "usersync", mongo.Options{CollectionPrefix: "app_"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for role, name := range mongo.CollectionsForTest(s) {
		if !strings.HasPrefix(name, "app_") {
			t.Errorf("%s: collection %q, want the prefix app_", role, name)
		}
	}
}
