package repository_test

import (
	"context"
	"testing"

	"github.com/usersync/usersync/repository/repotest"
)

func TestStore_EnsureIndexesIsIdempotent(t *testing.T) {
	s := repotest.NewStore(t) // ensures once
	for i := 0; i < 2; i++ {
		if err := s.EnsureIndexes(context.Background()); err != nil {
			t.Fatalf("EnsureIndexes again: %v", err)
		}
	}
}

func TestStore_RecognisesTheEmbeddedEngineAsFerretDB(t *testing.T) {
	if repotest.UsesMongoDB() {
		t.Skip("the server at MONGODB_URI may be either")
	}
	ferret, err := repotest.NewStore(t).Prepare(context.Background())
	if err != nil || !ferret {
		t.Errorf("Prepare() = %v, %v; want FerretDB recognised", ferret, err)
	}
}
