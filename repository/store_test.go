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
