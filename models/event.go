package models

import "time"

// EventStatus is where an event is in its life: stored on arrival, then
// processed or failed; a failed event an operator gave up on is discarded.
type EventStatus string

// Event statuses.
const (
	StatusStored    EventStatus = "stored"
	StatusProcessed EventStatus = "processed"
	StatusFailed    EventStatus = "failed"
	// StatusDiscarded: a failed event an admin discarded (Discard says
	// when, why and who). It is finished as a processed event is: never
	// applied, processed again or replayed; a later delivery of its
	// svix-id is a duplicate; retention deletes it.
	StatusDiscarded EventStatus = "discarded"
)

// Finished reports whether an event of status s is done with: processed,
// or discarded. Nothing changes a finished event but retention and
// erasure.
func (s EventStatus) Finished() bool { return s == StatusProcessed || s == StatusDiscarded }

// Discard is an admin's decision to give up on a failed event.
type Discard struct {
	At     time.Time
	Reason string // why, in the admin's words: 1 to MaxDiscardReason bytes
	// By names who discarded it: the admin key's fingerprint
	// ("key sha256:0123456789ab"), or the command line's user and host.
	By string
}

// MaxDiscardReason bounds a discard's reason, in bytes.
const MaxDiscardReason = 1000

// MaxDiscardBy bounds a discard's By, in bytes.
const MaxDiscardBy = 200

// DiscardConflict is the error of discarding ev, which is not a failed
// event free to discard: processed, stored, discarded already, or being
// processed (claimed until after now) by a sweep or a replay. It wraps
// ErrConflict, and ErrNotFound for no event.
func DiscardConflict(ev Event, now time.Time) error {
	id := Quote(ev.EventID)
	if ev.EventID == "" {
		id = Quote(ev.ID)
	}
	switch ev.Status {
	case StatusProcessed:
		return Public(ErrConflict, "event %s is processed (outcome %s); only a failed event can be discarded", id, ev.Outcome)
	case StatusStored:
		return Public(ErrConflict, "event %s is stored, not failed: it is being processed, or waits for the sweep; only a failed event can be discarded", id)
	case StatusDiscarded:
		return Public(ErrConflict, "event %s is discarded already", id)
	}
	return Public(ErrConflict, "event %s is being processed by a sweep or a replay; try again shortly", id)
}

// Outcome says what processing an event did to its object (user,
// organization or membership).
type Outcome string

// Outcomes.
const (
	// OutcomeApplied: the event's state is the user's state now.
	OutcomeApplied Outcome = "applied"
	// OutcomeStale: a newer Clerk state was already stored.
	OutcomeStale Outcome = "stale"
	// OutcomeDeleted: the object (user, organization or membership) was
	// already deleted, or, for a membership, its organization or its user:
	// the object is a tombstone.
	OutcomeDeleted Outcome = "deleted"
	// OutcomeIgnored: the event is of a type usersync recognises as its
	// kind's (a billing type it does not know: IsUnknownBillingType) and
	// does not apply, or a session event of a user the copy does not know
	// that carries no complete user state (its activity waits in the event
	// log for the user's creation); it changed nothing.
	OutcomeIgnored Outcome = "ignored"
	// OutcomeDeletedUserLegacy is what earlier versions wrote instead of
	// deleted for an event of a deleted user (they wrote deleted only for
	// organizations and memberships); it is read as deleted (ReadOutcome),
	// wherever it was stored: an event's outcome, an outcome counter, an
	// activity count. Nothing writes it any more.
	//
	// Reads: events, outcome counters and activity counts written by
	// versions before fcbe2fa (2026-11-27, "A deletion's outcome is
	// deleted for every kind"), on both stores; no upgrade rewrites them.
	// Remove: only after an upgrade step rewrites them to deleted (the
	// events' outcomes, the counters, the activity counts), in the first
	// release after no store is left that has not run it; until then
	// keep it, as the outcomes the MongoDB store folds and counts.
	OutcomeDeletedUserLegacy Outcome = "deleted_user"
)

// Outcomes are every outcome, in the order stats list them.
var Outcomes = []Outcome{OutcomeApplied, OutcomeStale, OutcomeDeleted, OutcomeIgnored, OutcomeActivity}

// ReadOutcome is the outcome a stored outcome (or a name given for one)
// means: OutcomeDeletedUserLegacy is OutcomeDeleted, and any other value
// is itself. An activity kind that names an outcome reads alike.
func ReadOutcome(s string) Outcome {
	if Outcome(s) == OutcomeDeletedUserLegacy {
		return OutcomeDeleted
	}
	return Outcome(s)
}

// EventType is the short type of an event: the Clerk type without its
// object ("user.", "organization.", "organizationMembership.").
type EventType string

// Event types.
const (
	EventCreated EventType = "created"
	EventUpdated EventType = "updated"
	EventDeleted EventType = "deleted"
)

// SourceClerk is the source of every event usersync receives today.
const SourceClerk = "clerk"

// Event is one stored event of a user, an organization or a membership:
// the durable inbox entry for one Svix message.
type Event struct {
	ID        string // the stored document's id
	EventID   string // svix-id; the same on every retry
	Type      string // Clerk type, e.g. "user.created"
	EventType EventType
	// UserID is the user a user event changes (data.id), or the member of
	// a membership event (data.public_user_data.user_id); "" for an
	// organization event, and when the payload has no usable id.
	UserID string
	// ObjectID is the organization (data.id) or membership (data.id) an
	// organization or membership event changes; "" for a user event (its
	// UserID) and when the payload has no usable id.
	ObjectID string
	RawBody  []byte // the exact bytes received
	Source   string
	// Origin is where this delivery of the event came from (OriginOf),
	// for the outbound deliveries of its change; not stored.
	Origin          string
	Signature       string
	SignatureValid  *bool
	SourceTimestamp *time.Time // nil when the payload has no usable time
	ReceivedAt      time.Time
	ProcessedAt     *time.Time
	Status          EventStatus
	Outcome         Outcome
	Attempts        int
	Error           string     // the last processing error, when failed
	RetryAt         *time.Time // when the sweep retries a failed event; nil: never
	// ErasedAt is when the body of this event of a deleted user was
	// erased; RawBody is then empty. nil: not erased.
	ErasedAt *time.Time
	// Discarded says when, why and by whom a discarded event was
	// discarded; nil for any other.
	Discarded *Discard
}

// Kind returns the kind of object the event changes ("" for a type
// usersync does not store).
func (e Event) Kind() Kind { return StoredKindOf(e.Type) }

// EventFilter selects events for the event log.
type EventFilter struct {
	Status    EventStatus // "" for any
	EventType EventType   // "" for any
	UserID    string      // "" for any
	Kind      Kind        // "" for any
	ObjectID  string      // "" for any: an organization's or membership's events
	Since     time.Time   // received at or after; zero for any
	Until     time.Time   // received before; zero for any
	After     string      // cursor: list events after (older than) this one
	Limit     int
}

// EventPage is one page of the event log, newest first.
type EventPage struct {
	Events     []Event
	NextCursor string // "" on the last page
}

// EventStats counts events per status and per outcome. Discarded events
// are counted apart (ByStatus[StatusDiscarded]), in no kind and no backlog.
type EventStats struct {
	ByStatus  map[EventStatus]int64
	ByOutcome map[Outcome]int64
	// GaveUp counts failed events that will not be retried by the sweep:
	// invalid payloads, and events out of attempts. A replay still may.
	GaveUp int64
	// ByKind counts the events still to process or given up, per kind of
	// object (every kind is present). Processed events are counted per
	// outcome only.
	ByKind map[Kind]KindStats
}

// KindStats counts the stored and failed events of one kind of object.
type KindStats struct {
	Stored, Failed, GaveUp int64
}

// NewEventStats returns stats with no event, with the stored and failed
// statuses and every kind present.
func NewEventStats() EventStats {
	st := EventStats{ByStatus: map[EventStatus]int64{StatusStored: 0, StatusFailed: 0, StatusDiscarded: 0},
		ByOutcome: map[Outcome]int64{}, ByKind: map[Kind]KindStats{}}
	for _, k := range Kinds {
		st.ByKind[k] = KindStats{}
	}
	return st
}

// AddUnprocessed adds n stored or failed events of kind k to st; retry
// says that failed ones are still to be retried by the sweep (else they
// are given up).
func (st *EventStats) AddUnprocessed(status EventStatus, k Kind, retry bool, n int64) {
	st.ByStatus[status] += n
	ks := st.ByKind[k]
	switch {
	case status == StatusStored:
		ks.Stored += n
	case retry:
		ks.Failed += n
	default:
		ks.Failed += n
		ks.GaveUp += n
		st.GaveUp += n
	}
	if k != "" {
		st.ByKind[k] = ks
	}
}

// CompareClerkOrder orders events for processing: oldest Clerk state first
// (events without a usable time first: they fail at once), then the oldest
// received.
func CompareClerkOrder(a, b Event) int {
	switch {
	case a.SourceTimestamp == nil && b.SourceTimestamp == nil:
	case a.SourceTimestamp == nil:
		return -1
	case b.SourceTimestamp == nil:
		return 1
	default:
		if c := a.SourceTimestamp.Compare(*b.SourceTimestamp); c != 0 {
			return c
		}
	}
	return a.ReceivedAt.Compare(b.ReceivedAt)
}

// Delivered is what a store's Deliver or Reapply did with one event.
type Delivered struct {
	// Event is the event as stored; its ID is set whenever it is stored.
	Event Event
	// Created reports that this delivery stored the event (it was not
	// received before).
	Created bool
	// Outcome is what applying the change did; "" when the event was
	// finished before (a duplicate, or discarded) and when the change
	// could not apply.
	Outcome Outcome
}
