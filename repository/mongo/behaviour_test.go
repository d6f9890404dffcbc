package mongo_test

import (
	"testing"

	contract "github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/mongo/mongotest"
	"github.com/usersync/usersync/repository/storetest"
)

// TestBehaviour runs the behaviour suite both stores pass, each test on a
// database of its own at MONGODB_URI.
func TestBehaviour(t *testing.T) {
	mongotest.URI(t)
	storetest.Run(t, func(t testing.TB) contract.Store { return mongotest.Open(t) })
}
