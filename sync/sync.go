// Package sync turns Clerk events into changes of users, organizations and
// memberships: it stores each delivery in the event inbox, applies it to
// its object in Clerk's order, and marks the event processed or failed.
// Every step is idempotent, so any number of deliveries, replays and
// instances may run it at once.
package sync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// EventStore is what the service needs of the event inbox beyond Store.
type EventStore interface {
	MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error
	// Get returns the event whose id or eventId is id, body included.
	Get(ctx context.Context, id string) (models.Event, error)
	// Claim leases the event, read with attempts attempts, to one caller
	// until now+lease; false when another holds it, it has had another
	// attempt since, or it is processed.
	Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error)
}

// Store is what the service needs of a store to apply events of every
// kind (see repository.Store for the promises).
type Store interface {
	// Deliver stores ev, applies ch and marks ev processed; an error with
	// a stored event leaves it stored, for the caller to mark failed.
	Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)
	// Reapply applies ch, the change of the stored event ev, and marks
	// ev processed; an error leaves ev as it was.
	Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)
}

// Service processes the events of every kind.
type Service struct {
	events EventStore
	store  Store
	now    func() time.Time
	retry  Backoff
	// activity, if set, counts events and outcomes per minute (see
	// SetActivity).
	activity *Activity
	// applied, if set, is told that a change applied (see OnApplied).
	applied func()
}

// New returns a service over the given stores. now may be nil for
// time.Now. Failed events are retried by the recovery sweep with
// DefaultBackoff; see SetBackoff.
func New(events EventStore, store Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{events: events, store: store, now: now, retry: DefaultBackoff}
}

// OnApplied makes the service call fn after each change that applied,
// whatever the path (the outbound dispatcher wakes on it).
func (s *Service) OnApplied(fn func()) { s.applied = fn }

// SetBackoff sets when the recovery sweep retries failed events.
func (s *Service) SetBackoff(b Backoff) { s.retry = b }

// Backoff says when a failed event is tried again: after First, doubling
// with every attempt up to Max, until MaxAttempts attempts have been made.
type Backoff struct {
	First       time.Duration
	Max         time.Duration
	MaxAttempts int
}

// DefaultBackoff retries after 30 s, 1 min, 2 min… up to 1 h between
// tries, 12 attempts in all (about 6 hours).
var DefaultBackoff = Backoff{First: 30 * time.Second, Max: time.Hour, MaxAttempts: 12}

// next returns when to try again after the given number of failed
// attempts, or nil when the event has no attempts left.
func (b Backoff) next(now time.Time, attempts int) *time.Time {
	if attempts >= b.MaxAttempts {
		return nil
	}
	d := b.First
	for i := 1; i < attempts && d < b.Max; i++ {
		d *= 2
	}
	at := now.Add(min(d, b.Max)).UTC()
	return &at
}

// Delivery is one event to store and apply: a verified webhook request, or
// a state read from Clerk's API.
type Delivery struct {
	EventID string // svix-id, or a deterministic id for unsigned sources
	// Signature is the svix-signature header, as received and verified; ""
	// for a state that did not come signed (backfill): signatureValid is
	// then stored as null, "not checked".
	Signature string
	Body      []byte // the exact bytes received
	Event     models.ClerkEvent
	// Origin is where it came from (models.Origin…); "": from its id
	// (models.OriginOf).
	Origin string
}

// Result says what became of an event.
type Result struct {
	EventID   string
	UserID    string // the event's user (or member); "" when it has none
	ObjectID  string // the organization or membership; "" for a user event
	Status    models.EventStatus
	Outcome   models.Outcome // set when Status is processed
	Duplicate bool           // the event had been received before
}

// markTimeout bounds the write that records a failure, which runs even when
// the request's context has ended.
const markTimeout = 5 * time.Second

// Ingest stores d in the inbox and processes it. A delivery of an event
// already processed changes nothing and reports the first outcome; one of
// an event an admin discarded changes nothing either (status discarded).
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
	ch, invalid := d.Event.Decode(d.EventID, s.now())
	userID, objectID := ids(d.Event, ch, invalid)
	ev := models.Event{
		EventID:        d.EventID,
		Type:           d.Event.Type,
		EventType:      d.Event.EventType(),
		UserID:         userID,
		ObjectID:       objectID,
		RawBody:        d.Body,
		Source:         models.SourceClerk,
		Origin:         d.Origin,
		Signature:      d.Signature,
		SignatureValid: valid,
		ReceivedAt:     s.now().UTC().Truncate(time.Millisecond),
		Status:         models.StatusStored,
	}
	if invalid == nil {
		ts := models.EventTime(ch)
		ev.SourceTimestamp = &ts
	} else {
		// Stored (once) as failed, never applied.
		ch = invalidChange{}
	}
	// The change feed relies on this bound (see models.ChangeSettle).
	actx, cancel := context.WithTimeout(ctx, models.UserWriteTimeout)
	dl, err := s.store.Deliver(actx, ev, ch, s.now().UTC())
	cancel()
	if dl.Event.ID == "" {
		return Result{}, err
	}
	if invalid != nil && err != nil {
		err = invalid // why the store could not apply it
	}
	if dl.Created {
		s.activity.Note(models.ActivityReceived)
	}
	res := Result{EventID: d.EventID, UserID: userID, ObjectID: objectID, Status: dl.Event.Status, Outcome: dl.Event.Outcome, Duplicate: !dl.Created}
	return s.delivered(ctx, dl, res, err)
}

// ids are the event's user and object: from the change, or what can be
// read of an invalid payload.
func ids(ev models.ClerkEvent, ch models.Change, invalid error) (userID, objectID string) {
	if invalid != nil {
		return ev.UserID(), ev.ObjectID()
	}
	return ch.IDs()
}

// invalidChange is the change of an event that can never apply: of no
// kind a store keeps, its apply fails, and its event is stored as failed.
type invalidChange struct{}

func (invalidChange) Kind() models.Kind              { return "" }
func (invalidChange) Version() models.Version        { return models.Version{} }
func (invalidChange) IDs() (userID, objectID string) { return "", "" }

// delivered ends a Deliver or Reapply: it marks the event failed when the
// change did not apply, and counts the outcome.
func (s *Service) delivered(ctx context.Context, dl models.Delivered, res Result, err error) (Result, error) {
	switch {
	case err != nil:
		return s.fail(ctx, dl.Event, res, applyError(err))
	case dl.Outcome == "": // finished before: a duplicate, never applied
		return res, nil
	}
	s.noteOutcome(dl.Outcome, false)
	if dl.Outcome == models.OutcomeApplied && s.applied != nil {
		s.applied()
	}
	res.Status, res.Outcome = models.StatusProcessed, dl.Outcome
	return res, nil
}

// applyError is what a failed Apply means for the event: the store's own
// error is not kept where it could carry another layer's words (a
// driver's duplicate key error quotes the email).
func applyError(err error) error {
	if errors.Is(err, models.ErrEmailTaken) {
		return models.Public(models.ErrRetryLater, "the user's email is held by another active user; a later delivery may apply the event")
	}
	return err
}

// Process processes a stored event again from its raw body, as a new
// delivery of it would. It is how stored and failed events are recovered.
// A change that applies comes from ev.Origin, by default a replay.
// An erased event has no body left: that is an error wrapping
// models.ErrConflict, and the event is not changed.
func (s *Service) Process(ctx context.Context, ev models.Event) (Result, error) {
	res := Result{EventID: ev.EventID, UserID: ev.UserID, ObjectID: ev.ObjectID, Status: ev.Status, Outcome: ev.Outcome}
	if ev.Origin == "" {
		ev.Origin = models.OriginReplay
	}
	if ev.ErasedAt != nil {
		return res, models.Public(models.ErrConflict, "event %s was erased (its user is deleted)", models.Quote(ev.EventID))
	}
	ce, err := models.DecodeEvent(ev.RawBody)
	var ch models.Change
	if err == nil {
		ch, err = ce.Decode(ev.EventID, s.now())
	}
	if err != nil {
		return s.fail(ctx, ev, res, err)
	}
	// The change feed relies on this bound (see models.ChangeSettle).
	actx, cancel := context.WithTimeout(ctx, models.UserWriteTimeout)
	dl, err := s.store.Reapply(actx, ev, ch, s.now().UTC())
	cancel()
	dl.Event = ev // a failure counts its attempts from the event as read
	return s.delivered(ctx, dl, res, err)
}

// storedError is the text an event keeps of its failure, which admins read
// and the console groups by (models.FailureReason): a PublicError's kind
// and message, without its cause (another layer's words); the text of any
// other error, which the stores keep free of values.
func storedError(err error) string {
	var pe *models.PublicError
	if errors.As(err, &pe) && pe.Kind != nil {
		return pe.Kind.Error() + ": " + pe.Msg
	}
	return err.Error()
}

// fail records a failed attempt. A payload that can never apply is not
// retried by the sweep; anything else is, with backoff.
func (s *Service) fail(ctx context.Context, ev models.Event, res Result, cause error) (Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	var retryAt *time.Time
	if !errors.Is(cause, models.ErrInvalid) {
		retryAt = s.retry.next(s.now(), ev.Attempts+1)
	}
	if err := s.events.MarkFailed(ctx, ev.ID, storedError(cause), retryAt); err != nil {
		// The event stays stored; the recovery sweep will find it.
		return res, fmt.Errorf("%w (and recording the failure: %v)", cause, err)
	}
	s.noteOutcome("", true)
	res.Status = models.StatusFailed
	return res, cause
}
