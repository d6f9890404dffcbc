package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// seedBatch is how many rows one transaction of a seed writes.
const seedBatch = 5000

// SeedUsers inserts one user per change, as Apply writes a new user at now
// (the same statements), many to a transaction. It is for tools and tests
// that need many users fast (scripts/scale, benchmarks); it checks no
// ordering and no email owner: a user or an active email that exists is
// an error.
func (s *Store) SeedUsers(ctx context.Context, changes []models.UserChange, now time.Time) error {
	for start := 0; start < len(changes); start += seedBatch {
		batch := changes[start:min(start+seedBatch, len(changes))]
		err := s.write(ctx, func(t *wtx) error {
			for _, ch := range batch {
				var err error
				if ch.Deleted {
					err = writeTombstone(t, ch, now, true)
				} else {
					meta := ch.Metadata
					if len(meta) == 0 {
						meta = []byte("{}")
					}
					err = writeState(t, ch, ch.Email, meta, now, true)
				}
				if err != nil {
					return fmt.Errorf("seed user %q: %w", ch.UserID, seedError(err))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// SeedEvents inserts the events as they are (status, outcome, attempts,
// processedAt and retryAt included), as Record and the marks would have
// left them, and counts the processed ones in the outcome counters, many
// to a transaction. ID is ignored. It is for tools and tests.
func (s *Store) SeedEvents(ctx context.Context, events []models.Event) error {
	for start := 0; start < len(events); start += seedBatch {
		batch := events[start:min(start+seedBatch, len(events))]
		err := s.write(ctx, func(t *wtx) error {
			counts := map[models.Outcome]int64{}
			for _, ev := range batch {
				if _, err := t.exec(`INSERT INTO events (event_id, type, kind, event_type, user_id, object_id, raw_body,
					source, signature, signature_valid, source_timestamp, received_at, processed_at, status, outcome,
					attempts, error, retry_at, erased_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					text(ev.EventID), ev.Type, text(string(ev.Kind())), string(ev.EventType), text(ev.UserID), text(ev.ObjectID), ev.RawBody, ev.Source, ev.Signature,
					nullBool(ev.SignatureValid), msPtr(ev.SourceTimestamp), ms(ev.ReceivedAt), msPtr(ev.ProcessedAt),
					string(ev.Status), text(string(ev.Outcome)), ev.Attempts, text(ev.Error), msPtr(ev.RetryAt),
					msPtr(ev.ErasedAt)); err != nil {
					return fmt.Errorf("seed event %q: %w", ev.EventID, seedError(err))
				}
				if ev.Status == models.StatusProcessed {
					counts[ev.Outcome]++
				}
			}
			for o, n := range counts {
				if err := addCounter(t, outcomeCounter(o), n); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// seedError says models.ErrConflict for a row that exists: seeding checks
// nothing, so a unique rule is the only thing it can meet.
func seedError(err error) error {
	if errors.Is(err, errDuplicate) {
		return fmt.Errorf("%w: %w", models.ErrConflict, err)
	}
	return err
}
