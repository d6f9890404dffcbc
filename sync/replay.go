package sync

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/usersync/usersync/models"
)

// Skip says why Replay left an event as it was.
type Skip string

// Reasons to skip an event.
const (
	SkipGone      Skip = "gone"      // deleted meanwhile (retention)
	SkipProcessed Skip = "processed" // processed meanwhile (a delivery, a sweep)
	SkipErased    Skip = "erased"    // its body was erased: nothing to process
	SkipClaimed   Skip = "claimed"   // another sweep or replay holds it now
	SkipDiscarded Skip = "discarded" // an admin discarded it
)

// Replayed is what Replay did with one event.
type Replayed struct {
	Event  models.Event
	Result Result
	// Err is the event's own failure when processing it failed (it is
	// marked failed, and the replay goes on).
	Err error
	// Skip is why the event was not processed; "" when it was.
	Skip Skip
}

// Replay processes stored or failed events again: the recovery sweep, the
// admin replay route (one event or a bulk of them) and `usersync replay`
// all go through it. The events go in Clerk's order, oldest state first;
// each is read with its body if it came without, claimed for lease (so
// that one instance processes it and attempts count real attempts), and
// processed as a new delivery of it would be (Process). each is told what
// became of every event. Replay stops at the first error a retry may heal
// (the database is down) or when ctx ends, and returns it.
func (s *Service) Replay(ctx context.Context, evs []models.Event, lease time.Duration, each func(Replayed)) error {
	evs = slices.Clone(evs)
	slices.SortStableFunc(evs, models.CompareClerkOrder)
	for _, ev := range evs {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := s.replayOne(ctx, ev, lease)
		if err != nil {
			return err
		}
		each(r)
	}
	return nil
}

func (s *Service) replayOne(ctx context.Context, ev models.Event, lease time.Duration) (Replayed, error) {
	if ev.RawBody == nil && ev.ErasedAt == nil {
		full, err := s.events.Get(ctx, ev.ID)
		switch {
		case errors.Is(err, models.ErrNotFound):
			return Replayed{Event: ev, Skip: SkipGone}, nil
		case err != nil:
			return Replayed{}, err
		}
		full.Origin, ev = ev.Origin, full
	}
	switch {
	case ev.Status == models.StatusProcessed:
		return Replayed{Event: ev, Skip: SkipProcessed}, nil
	case ev.Status == models.StatusDiscarded:
		return Replayed{Event: ev, Skip: SkipDiscarded}, nil
	case ev.ErasedAt != nil:
		return Replayed{Event: ev, Skip: SkipErased}, nil
	}
	claimed, err := s.events.Claim(ctx, ev.ID, ev.Attempts, s.now(), lease)
	if err != nil {
		return Replayed{}, err
	}
	if !claimed {
		return Replayed{Event: ev, Skip: SkipClaimed}, nil
	}
	res, err := s.Process(ctx, ev)
	if errors.Is(err, models.ErrUnavailable) || ctx.Err() != nil {
		return Replayed{}, err
	}
	return Replayed{Event: ev, Result: res, Err: err}, nil
}
