package main

import (
	"context"
	"errors"
	"time"

	"github.com/usersync/usersync/models"
)

// seedChanges writes users through the repository's seeding function,
// which builds them as Apply does. A batch that
// meets users already present (a run stopped after it wrote a batch and
// before it saved the seed state) is written again one user at a time,
// leaving those that exist.
func (b *bench) seedChanges(ctx context.Context, changes []models.UserChange, now time.Time) error {
	err := b.store.SeedUsers(ctx, changes, now)
	if !isConflict(err) {
		return err
	}
	for _, ch := range changes {
		if err := b.store.SeedUsers(ctx, []models.UserChange{ch}, now); err != nil && !isConflict(err) {
			return err
		}
	}
	return nil
}

// seedEventList writes events through the repository's seeding function,
// which builds them as Record and the marks do, as seedChanges does users.
func (b *bench) seedEventList(ctx context.Context, evs []models.Event) error {
	err := b.store.SeedEvents(ctx, evs)
	if !isConflict(err) {
		return err
	}
	for _, ev := range evs {
		if err := b.store.SeedEvents(ctx, []models.Event{ev}); err != nil && !isConflict(err) {
			return err
		}
	}
	return nil
}

func isConflict(err error) bool {
	return errors.Is(err, models.ErrConflict) || errors.Is(err, models.ErrEmailTaken)
}
