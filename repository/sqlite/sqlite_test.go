package sqlite_test

import (
	"context"
	"testing"

	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
	"github.com/usersync/usersync/repository/storetest"
)

func TestMain(m *testing.M) { repotest.Main(m) }

// open opens a fresh store in a new directory of t's (repotest.DataDir),
// closed when t ends.
func open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), repotest.DataDir(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestBehaviour(t *testing.T) {
	storetest.Run(t, func(t testing.TB) repository.Store { return open(t) })
}
