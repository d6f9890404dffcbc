package mongo_test

import (
	"testing"

	"github.com/usersync/usersync/repository/repotest"
)

func TestMain(m *testing.M) { repotest.Main(m) }
