package mongo

import (
	"context"
	"fmt"

	"github.com/usersync/usersync/repository"
)

// MigrateData is Migrate as the repository.Migrator contract states it.
func (s *Store) MigrateData(ctx context.Context, dryRun bool) (repository.MigrateReport, error) {
	if dryRun {
		return repository.MigrateReport{}, fmt.Errorf("a dry run of migrate is not supported by this store yet")
	}
	n, err := s.Migrate(ctx)
	return repository.MigrateReport{Changed: n, Summary: fmt.Sprintf("%d users re-keyed, indexes built", n)}, err
}
