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

// EventStore is what the service needs of the event inbox.
type EventStore interface {
	// Record stores ev as stored, or returns the event already stored
	// under its eventId with created=false.
	Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error)
	// MarkProcessed marks the event processed with outcome, unless it is
	// processed already: the first outcome stays.
	MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error
	MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error
	// Get returns the event whose id or eventId is id, body included.
	Get(ctx context.Context, id string) (models.Event, error)
	// Claim leases the event, read with attempts attempts, to one caller
	// until now+lease; false when another holds it, it has had another
	// attempt since, or it is processed.
	Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error)
}

// UserStore is what the service needs of the users collection.
type UserStore interface {
	// Apply writes ch if it is newer than the stored state of an active
	// user; see repository.Users.Apply for the outcomes and errors
	// (models.ErrEmailTaken becomes ErrRetryLater).
	Apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error)
}

// OrganizationStore is what the service needs of the organizations.
type OrganizationStore interface {
	// Apply writes ch as models.Decide says; a deletion deletes the
	// organization's memberships (see repository.Organizations.Apply).
	Apply(ctx context.Context, ch models.OrganizationChange, now time.Time) (models.Outcome, error)
}

// MembershipStore is what the service needs of the memberships.
type MembershipStore interface {
	// Apply writes the organization state ch nests, then ch (see
	// repository.Memberships.Apply).
	Apply(ctx context.Context, ch models.MembershipChange, now time.Time) (models.Outcome, error)
}

// Service processes the events of users, organizations and memberships.
type Service struct {
	events  EventStore
	users   UserStore
	orgs    OrganizationStore
	members MembershipStore
	now     func() time.Time
	retry   Backoff
	// activity, if set, counts events and outcomes per minute (see
	// SetActivity).
	activity *Activity
}

// New returns a service over the given stores. now may be nil for
// time.Now. Failed events are retried by the recovery sweep with
// DefaultBackoff; see SetBackoff.
func New(events EventStore, users UserStore, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{events: events, users: users, now: now, retry: DefaultBackoff}
}

// SetOrganizations gives the service the stores that organization and
// membership events are applied to. Without them such an event fails
// (and is retried), as with a database that is down.
func (s *Service) SetOrganizations(orgs OrganizationStore, members MembershipStore) {
	s.orgs, s.members = orgs, members
}

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
	ch := decode(d.Event, d.EventID, s.now())
	userID, objectID := ch.ids(d.Event)
	ev := models.Event{
		EventID:        d.EventID,
		Type:           d.Event.Type,
		EventType:      d.Event.EventType(),
		UserID:         userID,
		ObjectID:       objectID,
		RawBody:        d.Body,
		Source:         models.SourceClerk,
		Signature:      d.Signature,
		SignatureValid: valid,
		ReceivedAt:     s.now().UTC().Truncate(time.Millisecond),
		Status:         models.StatusStored,
	}
	if ch.invalid == nil {
		ts := ch.sourceTime()
		ev.SourceTimestamp = &ts
	}
	if dl, ok := s.users.(Deliverer); ok && ch.invalid == nil && ch.kind == models.KindUser {
		return s.deliver(ctx, dl, ev, ch.user)
	}
	stored, created, err := s.events.Record(ctx, ev)
	if err != nil {
		return Result{}, err
	}
	if created {
		s.activity.Note(models.ActivityReceived)
	}
	res := Result{EventID: d.EventID, UserID: userID, ObjectID: objectID, Status: stored.Status, Outcome: stored.Outcome, Duplicate: !created}
	if stored.Status.Finished() {
		// Processed, or discarded by an admin: a duplicate, never applied.
		return res, nil
	}
	return s.process(ctx, stored, res, ch)
}

// Deliverer is a users store that can store an event, apply its change and
// mark it processed in one transaction (the embedded store): the same
// steps as Record, Apply and MarkProcessed, at the cost of one.
type Deliverer interface {
	// Deliver returns the stored event (with an ID whenever it is stored),
	// whether this call stored it, and the outcome when it applied the
	// change. An event processed before is returned with no outcome. An
	// error with a stored event is the change's failure: the event is left
	// stored, for the caller to mark it failed.
	Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (stored models.Event, created bool, outcome models.Outcome, err error)
}

// deliver is Ingest through a Deliverer.
func (s *Service) deliver(ctx context.Context, dl Deliverer, ev models.Event, ch models.Change) (Result, error) {
	// The change feed relies on this bound (see models.ChangeSettle).
	actx, cancel := context.WithTimeout(ctx, models.UserWriteTimeout)
	stored, created, outcome, err := dl.Deliver(actx, ev, ch, s.now().UTC())
	cancel()
	if stored.ID == "" {
		return Result{}, err
	}
	if created {
		s.activity.Note(models.ActivityReceived)
	}
	res := Result{EventID: ev.EventID, UserID: ev.UserID, ObjectID: ev.ObjectID, Status: stored.Status, Outcome: stored.Outcome, Duplicate: !created}
	switch {
	case err != nil:
		return s.fail(ctx, stored, res, applyError(err))
	case outcome == "": // processed before
		return res, nil
	}
	s.noteOutcome(outcome, false)
	res.Status, res.Outcome = models.StatusProcessed, outcome
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
// An erased event has no body left: that is an error wrapping
// models.ErrConflict, and the event is not changed.
func (s *Service) Process(ctx context.Context, ev models.Event) (Result, error) {
	res := Result{EventID: ev.EventID, UserID: ev.UserID, ObjectID: ev.ObjectID, Status: ev.Status, Outcome: ev.Outcome}
	if ev.ErasedAt != nil {
		return res, models.Public(models.ErrConflict, "event %s was erased (its user is deleted)", models.Quote(ev.EventID))
	}
	ce, err := models.DecodeEvent(ev.RawBody)
	if err != nil {
		return s.process(ctx, ev, res, change{invalid: err})
	}
	return s.process(ctx, ev, res, decode(ce, ev.EventID, s.now()))
}

// change is one decoded event: the state it carries, of its kind, or why
// it can never be applied.
type change struct {
	kind    models.Kind
	user    models.Change
	org     models.OrganizationChange
	member  models.MembershipChange
	invalid error
}

// decode validates the data of ev as its kind says.
func decode(ev models.ClerkEvent, eventID string, now time.Time) change {
	c := change{kind: ev.Kind()}
	switch c.kind {
	case models.KindUser:
		c.user, c.invalid = ev.Change(eventID, now)
	case models.KindOrganization:
		c.org, c.invalid = ev.OrganizationChange(eventID, now)
	case models.KindMembership:
		c.member, c.invalid = ev.MembershipChange(eventID, now)
	default:
		c.invalid = models.Public(models.ErrInvalid, "%s is not an event usersync stores", models.Quote(ev.Type)).In("type")
	}
	return c
}

// sourceTime is Clerk's time of the state.
func (c change) sourceTime() time.Time {
	switch c.kind {
	case models.KindOrganization:
		return c.org.SourceTime
	case models.KindMembership:
		return c.member.SourceTime
	}
	return c.user.SourceTime
}

// version is the version of the state.
func (c change) version() models.Version {
	switch c.kind {
	case models.KindOrganization:
		return c.org.Version()
	case models.KindMembership:
		return c.member.Version()
	}
	return c.user.Version()
}

// ids are the event's user (a user event's, or a membership's member) and
// object (an organization or membership): from the change, or what can be
// read of an invalid payload.
func (c change) ids(ev models.ClerkEvent) (userID, objectID string) {
	if c.invalid != nil {
		return ev.UserID(), ev.ObjectID()
	}
	switch c.kind {
	case models.KindOrganization:
		return "", c.org.OrgID
	case models.KindMembership:
		return c.member.UserID, c.member.MembershipID
	}
	return c.user.UserID, ""
}

// errNoOrganizations: the service was built without the stores of
// organizations and memberships (see SetOrganizations).
var errNoOrganizations = errors.New("organization and membership events cannot be applied: the service has no store for them")

// apply writes c to its store.
func (s *Service) apply(ctx context.Context, c change, now time.Time) (models.Outcome, error) {
	switch c.kind {
	case models.KindOrganization:
		if s.orgs == nil {
			return "", errNoOrganizations
		}
		return s.orgs.Apply(ctx, c.org, now)
	case models.KindMembership:
		if s.members == nil {
			return "", errNoOrganizations
		}
		return s.members.Apply(ctx, c.member, now)
	}
	return s.users.Apply(ctx, c.user, now)
}

// process applies c (or records why it cannot be) and marks ev.
func (s *Service) process(ctx context.Context, ev models.Event, res Result, c change) (Result, error) {
	if c.invalid != nil {
		return s.fail(ctx, ev, res, c.invalid)
	}
	// The change feed relies on this bound (see models.ChangeSettle).
	actx, cancel := context.WithTimeout(ctx, models.UserWriteTimeout)
	outcome, err := s.apply(actx, c, s.now().UTC())
	cancel()
	if err != nil {
		err = applyError(err)
		return s.fail(ctx, ev, res, err)
	}
	if err := s.events.MarkProcessed(ctx, ev.ID, outcome, s.now().UTC()); err != nil {
		// The object is written; the event stays unmarked and a retry
		// applies it again, which changes nothing.
		return res, err
	}
	s.noteOutcome(outcome, false)
	res.Status, res.Outcome = models.StatusProcessed, outcome
	return res, nil
}

// fail records a failed attempt. A payload that can never apply is not
// retried by the sweep; anything else is, with backoff.
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
