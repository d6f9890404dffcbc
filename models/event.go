package models

import "time"

// EventStatus is where an event is in its life: stored on arrival, then
// processed or failed.
type EventStatus string

// Event statuses.
const (
	StatusStored    EventStatus = "stored"
	StatusProcessed EventStatus = "processed"
	StatusFailed    EventStatus = "failed"
)

// Outcome says what processing an event did to its user.
type Outcome string

// Outcomes.
const (
	// OutcomeApplied: the event's state is the user's state now.
	OutcomeApplied Outcome = "applied"
	// OutcomeStale: a newer Clerk state was already stored.
	OutcomeStale Outcome = "stale"
	// OutcomeDeletedUser: the user was already deleted.
	OutcomeDeletedUser Outcome = "deleted_user"
)

// EventType is the kind of user event: the Clerk type without "user.".
type EventType string

// Event types.
const (
	EventCreated EventType = "created"
	EventUpdated EventType = "updated"
	EventDeleted EventType = "deleted"
)

// SourceClerk is the source of every event usersync receives today.
const SourceClerk = "clerk"

// Event is one stored user event: the durable inbox entry for one Svix
// message.
type Event struct {
	ID              string // the stored document's id
	EventID         string // svix-id; the same on every retry
	Type            string // Clerk type, e.g. "user.created"
	EventType       EventType
	UserID          string // "" when the payload has no usable data.id
	RawBody         []byte // the exact bytes received
	Source          string
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
}

// EventFilter selects events for the event log.
type EventFilter struct {
	Status    EventStatus // "" for any
	EventType EventType   // "" for any
	UserID    string      // "" for any
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

// EventStats counts events per status and per outcome.
type EventStats struct {
	ByStatus  map[EventStatus]int64
	ByOutcome map[Outcome]int64
	// GaveUp counts failed events that will not be retried by the sweep:
	// invalid payloads, and events out of attempts. A replay still may.
	GaveUp int64
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
