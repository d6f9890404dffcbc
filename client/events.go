package client

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// Event is one of Clerk's events in usersync's log (an admin's read).
// Read alone (Client.Event), it carries Signature and Payload, the body
// exactly as received (nil once erased).
type Event struct {
	// ID is the store's own; EventID the svix-id.
	ID      string `json:"id"`
	EventID string `json:"eventId,omitempty"`
	// Type is Clerk's (user.updated…); EventType its change (updated…).
	Type      string `json:"type"`
	EventType string `json:"eventType"`
	UserID    string `json:"userId,omitempty"`
	ObjectID  string `json:"objectId,omitempty"`
	// Status is stored, processed, failed or discarded; Outcome, once
	// processed, applied, stale, deleted or ignored.
	Status          string          `json:"status"`
	Outcome         string          `json:"outcome,omitempty"`
	Attempts        int             `json:"attempts"`
	Error           string          `json:"error,omitempty"`
	RetryAt         *time.Time      `json:"retryAt,omitempty"`
	Source          string          `json:"source"`
	SignatureValid  *bool           `json:"signatureValid"`
	SourceTimestamp *time.Time      `json:"sourceTimestamp"`
	ReceivedAt      time.Time       `json:"receivedAt"`
	ProcessedAt     *time.Time      `json:"processedAt"`
	Signature       string          `json:"signature,omitempty"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	Erased          bool            `json:"erased"`
	ErasedAt        *time.Time      `json:"erasedAt,omitempty"`
	DiscardedAt     *time.Time      `json:"discardedAt,omitempty"`
	DiscardReason   string          `json:"discardReason,omitempty"`
	DiscardedBy     string          `json:"discardedBy,omitempty"`
}

// EventStats are the event log's counts.
type EventStats struct {
	Status  map[string]int64 `json:"status"`
	Outcome map[string]int64 `json:"outcome"`
	// GaveUp counts the failed events the sweep no longer retries.
	GaveUp int64 `json:"gaveUp"`
	// Kind counts the stored and failed events of each kind of object.
	Kind map[string]KindEventStats `json:"kind"`
	// AsOf is when the counts were read; Stale is true when the database
	// did not answer and these are the last counts read before.
	AsOf  time.Time `json:"asOf"`
	Stale bool      `json:"stale"`
}

// KindEventStats are the counts of one kind's events that wait.
type KindEventStats struct {
	Stored int64 `json:"stored"`
	Failed int64 `json:"failed"`
	GaveUp int64 `json:"gaveUp"`
}

// EventTypes are Clerk's event types, what usersync makes of each, and
// the webhook deliveries of each. The counts are those of the process
// that answered, since it started (Since): in memory, per instance.
type EventTypes struct {
	Since time.Time `json:"since"`
	// Types is every type of Clerk's catalog, in its order.
	Types []EventType `json:"types"`
	// Unknown are the types in no row of the catalog that were received,
	// at most 64 by name; Other counts the deliveries of any other.
	Unknown []UnknownEventType `json:"unknown"`
	Other   Deliveries         `json:"other"`
}

// EventType is one of Clerk's event types.
type EventType struct {
	Type string `json:"type"`
	// Fate is applied (stored and applied to an object of Kind),
	// projected (not stored; sets what Projects names) or ignored.
	Fate     string `json:"fate"`
	Kind     string `json:"kind,omitempty"`
	Projects string `json:"projects,omitempty"`
	Deliveries
}

// UnknownEventType is a type in no row of the catalog that was received.
type UnknownEventType struct {
	Type string `json:"type"`
	Deliveries
}

// Deliveries count the signed deliveries of a type (a duplicate or a
// retry counts again); LastReceivedAt is nil when none arrived.
type Deliveries struct {
	Received       int64      `json:"received"`
	LastReceivedAt *time.Time `json:"lastReceivedAt"`
}

// EventQuery filters the event log.
type EventQuery struct {
	Status    string // stored, processed, failed or discarded
	EventType string // a change (updated) or a type (user.updated)
	Kind      string // user, organization, membership, subscription…
	UserID    string
	ObjectID  string
	// Since and Until bound the events' receipt; zero: no bound.
	Since, Until time.Time
	// Limit is the events per page, 1 to 200; 0: 200.
	Limit int
}

// Event returns one event of the log with its payload (an admin key).
func (c *Client) Event(ctx context.Context, id string) (Event, error) {
	return get[Event](ctx, c, "/v1/events/"+url.PathEscape(id), nil)
}

// EventStats returns the event log's counts (an admin key).
func (c *Client) EventStats(ctx context.Context) (EventStats, error) {
	return get[EventStats](ctx, c, "/v1/events/stats", nil)
}

// EventTypes returns Clerk's event types with their fates and the
// deliveries of each since the answering process started (an admin key).
func (c *Client) EventTypes(ctx context.Context) (EventTypes, error) {
	return get[EventTypes](ctx, c, "/v1/event-types", nil)
}

// Events is the event log, the newest first, without payloads (an admin
// key).
func (c *Client) Events(q EventQuery) *List[Event] {
	v := url.Values{}
	for k, s := range map[string]string{"status": q.Status, "eventType": q.EventType, "kind": q.Kind, "userId": q.UserID, "objectId": q.ObjectID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for k, t := range map[string]time.Time{"since": q.Since, "until": q.Until} {
		if !t.IsZero() {
			v.Set(k, t.UTC().Format(time.RFC3339Nano))
		}
	}
	return newList[Event](c, "/v1/events", v, q.Limit)
}
