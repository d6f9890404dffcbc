package mongo_test

import (
	"testing"

	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// serverURI returns MONGODB_URI, or skips t when it is not set (see
// package mongotest).
func serverURI(t testing.TB) string {
	t.Helper()
	return mongotest.URI(t)
}

// newStore returns a store on a new, empty database of the server at
// MONGODB_URI, prepared and with every index; the database is dropped when
// the test ends.
func newStore(t testing.TB) *repository.Store {
	t.Helper()
	return mongotest.Open(t)
}

// newStoreWith is newStore on the server at uri, with options o.
func newStoreWith(t testing.TB, uri string, o repository.Options) *repository.Store {
	t.Helper()
	return mongotest.OpenAt(t, uri, o)
}
