// Package sync turns Clerk user events into user changes: it stores each
// delivery in the event inbox, applies it to its user in Clerk's order, and
// marks the event processed or failed. Every step is idempotent, so any
// number of deliveries, replays and instances may run it at once.
package sync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// EventStore is what the service needs of the event inbox.
type EventStore interface {
	// Record stores ev as stored, or returns the event already stored
	// under its eventId with created=false.
	Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error)
	MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error
	MarkFailed(ctx context.Context, id string, cause string) error
}

// UserStore is what the service needs of the users collection.
type UserStore interface {
	// Apply writes ch if it is newer than the stored state of an active
	// user; see repository.Users.Apply for the outcomes and errors.
	Apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error)
}

// Service processes user events.
type Service struct {
	events EventStore
	users  UserStore
	now    func() time.Time
}

// New returns a service over the given stores. now may be nil for
// time.Now.
func New(events EventStore, users UserStore, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{events: events, users: users, now: now}
}

// Delivery is one user event to store and apply: a verified webhook
// request, or a state read from Clerk's API.
type Delivery struct {
	EventID string // svix-id, or a deterministic id for unsigned sources
	// Signature is the svix-signature header, as received and verified; ""
	// for a state that did not come signed (backfill): signatureValid is
	// then stored as null, "not checked".
	Signature string
	Body      []byte // the exact bytes received
	Event     models.ClerkEvent
}

// Result says what became of an event.
type Result struct {
	EventID   string
	Status    models.EventStatus
	Outcome   models.Outcome // set when Status is processed
	Duplicate bool           // the event had been received before
}

// markTimeout bounds the write that records a failure, which runs even when
// the request's context has ended.
const markTimeout = 5 * time.Second

// Ingest stores d in the inbox and processes it. A delivery of an event
// already processed changes nothing and reports the first outcome.
//
// Errors wrap models.ErrInvalid when the payload can never be applied (the
// event is stored as failed), models.ErrRetryLater when a later delivery may
// succeed, models.ErrUnavailable when the database is down. An event is
// durably stored before Ingest returns a nil error.
func (s *Service) Ingest(ctx context.Context, d Delivery) (Result, error) {
	var valid *bool
	if d.Signature != "" {
		valid = new(true)
	}
	ev := models.Event{
		EventID:        d.EventID,
		Type:           d.Event.Type,
		EventType:      d.Event.EventType(),
		UserID:         d.Event.UserID(),
		RawBody:        d.Body,
		Source:         models.SourceClerk,
		Signature:      d.Signature,
		SignatureValid: valid,
		ReceivedAt:     s.now().UTC().Truncate(time.Millisecond),
		Status:         models.StatusStored,
	}
	ch, invalid := d.Event.Change(d.EventID)
	if invalid == nil {
		ts := ch.SourceTime
		ev.SourceTimestamp = &ts
	}
	stored, created, err := s.events.Record(ctx, ev)
	if err != nil {
		return Result{}, err
	}
	res := Result{EventID: d.EventID, Status: stored.Status, Outcome: stored.Outcome, Duplicate: !created}
	if stored.Status == models.StatusProcessed {
		return res, nil
	}
	return s.process(ctx, stored.ID, res, ch, invalid)
}

// Process processes a stored event again from its raw body, as a new
// delivery of it would. It is how stored and failed events are recovered.
func (s *Service) Process(ctx context.Context, ev models.Event) (Result, error) {
	res := Result{EventID: ev.EventID, Status: ev.Status, Outcome: ev.Outcome}
	ce, err := models.DecodeEvent(ev.RawBody)
	if err != nil {
		return s.process(ctx, ev.ID, res, models.Change{}, err)
	}
	ch, invalid := ce.Change(ev.EventID)
	return s.process(ctx, ev.ID, res, ch, invalid)
}

// process applies ch (or records why it cannot be) and marks event id.
func (s *Service) process(ctx context.Context, id string, res Result, ch models.Change, invalid error) (Result, error) {
	if invalid != nil {
		return s.fail(ctx, id, res, invalid)
	}
	outcome, err := s.users.Apply(ctx, ch, s.now().UTC())
	if errors.Is(err, models.ErrConflict) {
		err = fmt.Errorf("%w: %w", models.ErrRetryLater, err)
	}
	if err != nil {
		return s.fail(ctx, id, res, err)
	}
	if err := s.events.MarkProcessed(ctx, id, outcome, s.now().UTC()); err != nil {
		// The user is written; the event stays unmarked and a retry
		// applies it again, which changes nothing.
		return res, err
	}
	res.Status, res.Outcome = models.StatusProcessed, outcome
	return res, nil
}

func (s *Service) fail(ctx context.Context, id string, res Result, cause error) (Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := s.events.MarkFailed(ctx, id, cause.Error()); err != nil {
		// The event stays stored; the recovery sweep will find it.
		return res, fmt.Errorf("%w (and recording the failure: %v)", cause, err)
	}
	res.Status = models.StatusFailed
	return res, cause
}
