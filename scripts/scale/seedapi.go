package main

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
)

// seedChanges writes users as the repository writes them. A batch that
// meets users already present (a run stopped after it wrote a batch and
// before it saved the seed state) is written again one user at a time,
// leaving those that exist.
func (b *bench) seedChanges(ctx context.Context, changes []models.Change, now time.Time) error {
	err := b.insertUsers(ctx, changes, now)
	if !isConflict(err) {
		return err
	}
	for _, ch := range changes {
		if err := b.insertUsers(ctx, []models.Change{ch}, now); err != nil && !isConflict(err) {
			return err
		}
	}
	return nil
}

// seedEventList writes events as the repository writes them, as
// seedChanges does users.
func (b *bench) seedEventList(ctx context.Context, evs []models.Event) error {
	err := b.insertEvents(ctx, evs)
	if !isConflict(err) {
		return err
	}
	for _, ev := range evs {
		if err := b.insertEvents(ctx, []models.Event{ev}); err != nil && !isConflict(err) {
			return err
		}
	}
	return nil
}

func isConflict(err error) bool {
	return err != nil && (errors.Is(err, models.ErrConflict) || mongo.IsDuplicateKeyError(err))
}
