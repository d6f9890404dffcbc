package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// seedBatch is how many documents one insert of a seed carries.
const seedBatch = 1000

// SeedUsers inserts one user per change, as Apply writes a new user at
// now (the same document builder), in batches. It is for tools and tests
// that need many users fast (scripts/scale, benchmarks); it checks no
// ordering: a user that exists is an error wrapping models.ErrConflict,
// a taken email one wrapping models.ErrEmailTaken.
func (s *Store) SeedUsers(ctx context.Context, changes []models.UserChange, now time.Time) error {
	docs := make([]any, 0, min(len(changes), seedBatch))
	flush := func() error {
		if len(docs) == 0 {
			return nil
		}
		if _, err := s.users.coll.InsertMany(ctx, docs); err != nil {
			return fmt.Errorf("seed users: %w", seedError(translate(err)))
		}
		docs = docs[:0]
		return nil
	}
	for _, ch := range changes {
		w, err := newUserWrite(ch, now)
		if err != nil {
			return err
		}
		docs = append(docs, w.doc)
		if len(docs) == seedBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// SeedEvents inserts the events as they are (status, outcome, attempts,
// processedAt and retryAt included), as Record and the marks would have
// left them (the same document builder, payload documents on MongoDB), in
// batches, and counts the processed ones in the outcome counters. ID may
// be empty (derived from EventID, or new). It is for tools and tests; an
// event that exists is an error wrapping models.ErrConflict.
func (s *Store) SeedEvents(ctx context.Context, events []models.Event) error {
	docs := make([]any, 0, min(len(events), seedBatch))
	counts := map[models.Outcome]int64{}
	var anyID bson.ObjectID
	flush := func() error {
		if len(docs) == 0 {
			return nil
		}
		if _, err := s.events.coll.InsertMany(ctx, docs); err != nil {
			return fmt.Errorf("seed events: %w", seedError(translate(err)))
		}
		docs = docs[:0]
		for o, n := range counts {
			if err := s.events.counters.add(ctx, o, anyID, n); err != nil {
				return err
			}
			delete(counts, o)
		}
		return nil
	}
	for _, ev := range events {
		d := newEventDoc(ev)
		docs = append(docs, d)
		if ev.Status == models.StatusProcessed {
			counts[ev.Outcome]++
			anyID = d.ID
		}
		if len(docs) == seedBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// seedError says models.ErrConflict for a document that exists: seeding
// checks nothing, so a unique rule is the only thing it can meet.
func seedError(err error) error {
	if errors.Is(err, errDuplicate) {
		return fmt.Errorf("%w: %w", models.ErrConflict, err)
	}
	return err
}
