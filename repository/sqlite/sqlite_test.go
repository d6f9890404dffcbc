package sqlite_test

import (
	"context"
	"testing"

	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/sqlite"
	"github.com/usersync/usersync/repository/storetest"
)

// open opens a store in a new directory of t's, closed when t ends.
func open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), t.TempDir(), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestBehaviour(t *testing.T) {
	storetest.Run(t, func(t testing.TB) repository.Store { return open(t) })
}
