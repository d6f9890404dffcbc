package mongo_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	repository "github.com/usersync/usersync/repository/mongo"
)

// dbs numbers the databases of this test process.
var dbs atomic.Int64

// serverURI returns MONGODB_URI, or skips t when it is not set: the tests
// that need a server run against a MongoDB (or a DocumentDB-based engine)
// that the environment provides; none runs in CI.
func serverURI(t testing.TB) string {
	t.Helper()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		t.Skip("needs a MongoDB at MONGODB_URI")
	}
	return uri
}

// newStore returns a store on a new, empty database of the server at
// MONGODB_URI, prepared and with every index; the database is dropped when
// the test ends.
func newStore(t testing.TB) *repository.Store {
	t.Helper()
	return newStoreWith(t, serverURI(t), repository.Options{})
}

// newStoreWith is newStore on the server at uri, with options o.
func newStoreWith(t testing.TB, uri string, o repository.Options) *repository.Store {
	t.Helper()
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("usersync_test_%d_%d", os.Getpid(), dbs.Add(1))
	s, err := repository.Open(ctx, uri, name, o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare store: %v", err)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatalf("ensure indexes: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Drop(ctx)
		_ = s.Close(ctx)
	})
	return s
}
