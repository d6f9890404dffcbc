package models

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Outbound webhooks: after a change applies, usersync tells the app's
// endpoints, signed per Standard Webhooks. What a store keeps is ids,
// versions and names (Pending, Delivery): the body is rendered from the
// object's stored state when it is sent, so erasure has no second copy of
// personal data to chase.

// Origins: where a change that applied came from.
const (
	OriginWebhook   = "webhook"   // a signed Clerk webhook
	OriginSession   = "session"   // a signed Clerk session event, with the user state it embedded
	OriginSweep     = "sweep"     // the recovery sweep, applying a stored event
	OriginReplay    = "replay"    // an admin's replay of an event
	OriginBackfill  = "backfill"  // a state read from Clerk's API by backfill
	OriginReconcile = "reconcile" // a state (or deletion) found by reconcile
	OriginSync      = "sync"      // a sync route (an object read from Clerk on request)
	OriginCascade   = "cascade"   // a parent's deletion (an organization's, a user's)
	OriginResync    = "resync"    // an admin's resync of an endpoint: the state as it is
)

// OriginOf is where a delivery of the event ev came from, when its caller
// did not say: Clerk's webhooks are signed; states read from Clerk's API
// carry a backfill_ or reconcile_ event id.
func OriginOf(ev Event) string {
	switch {
	case ev.Origin != "":
		return ev.Origin
	case IsSessionType(ev.Type):
		return OriginSession
	case strings.HasPrefix(ev.EventID, "reconcile_"):
		return OriginReconcile
	case strings.HasPrefix(ev.EventID, "backfill_"):
		return OriginBackfill
	}
	return OriginWebhook
}

// KindPlan is a payer's plan (Clerk Billing), as outbound webhooks tell
// of it: not a kind of the kinds table (no Clerk event carries a plan:
// usersync computes it from the payer's items), but an object whose
// changes are sent, as plan.changed, once the plan is settled (never while
// it is pending between a plan change's two events). Its object id is the
// payer's (a user_… or org_… id).
const KindPlan Kind = "plan"

// TypePlanChanged is the outbound type of a payer's plan change.
const TypePlanChanged = "plan.changed"

// OutboundName is the name outbound types give objects of kind k: the
// prefix of its Clerk types ("user", "organizationMembership",
// "subscriptionItem").
func OutboundName(k Kind) string {
	if types := TypesOf(k); len(types) > 0 {
		name, _, _ := strings.Cut(types[0], ".")
		return name
	}
	return string(k)
}

// outboundChanges are the changes an outbound type names.
var outboundChanges = []EventType{EventCreated, EventUpdated, EventDeleted}

// OutboundTypes are every outbound type, in the order of the kinds table:
// "<name>.created", "<name>.updated" and, for a kind Clerk deletes or
// whose parents' deletions delete (KindSpec.Parents), "<name>.deleted".
func OutboundTypes() []string {
	var types []string
	for _, k := range Kinds {
		spec, _ := SpecOf(k)
		for _, c := range outboundChanges {
			if c == EventDeleted && len(spec.Parents) == 0 &&
				!slices.ContainsFunc(TypesOf(k), func(t string) bool { return EventTypeOf(t) == EventDeleted }) {
				continue
			}
			types = append(types, OutboundName(k)+"."+string(c))
		}
	}
	return append(types, TypePlanChanged)
}

// OutboundType is the outbound type of a change of kind k.
func OutboundType(k Kind, c EventType) string {
	if k == KindPlan {
		return TypePlanChanged
	}
	return OutboundName(k) + "." + string(c)
}

// Limits of an endpoint's event types.
const (
	MaxEndpointTypes = 64 // patterns per endpoint
	MaxEndpointType  = 64 // bytes per pattern
)

// CheckEventTypes validates an endpoint's event types: each an outbound
// type, "<name>.*" for every type of one kind, or "*"; no repeats. None
// means every type.
func CheckEventTypes(patterns []string) error {
	if len(patterns) > MaxEndpointTypes {
		return Public(ErrInvalid, "eventTypes: at most %d", MaxEndpointTypes).In("eventTypes")
	}
	known := OutboundTypes()
	for i, p := range patterns {
		name, rest, _ := strings.Cut(p, ".")
		ok := p == "*" || slices.Contains(known, p) ||
			(rest == "*" && slices.ContainsFunc(known, func(t string) bool { return strings.HasPrefix(t, name+".") }))
		switch {
		case len(p) > MaxEndpointType || !ok:
			return Public(ErrInvalid, "eventTypes: %s is not an event type (one of %s, \"<object>.*\" or \"*\")",
				Quote(p), strings.Join(known, ", ")).In("eventTypes")
		case slices.Contains(patterns[:i], p):
			return Public(ErrInvalid, "eventTypes: %s is given twice", Quote(p)).In("eventTypes")
		}
	}
	return nil
}

// MatchesType reports whether an endpoint with event types patterns wants
// outbound type typ.
func MatchesType(patterns []string, typ string) bool {
	if len(patterns) == 0 {
		return true
	}
	name, _, _ := strings.Cut(typ, ".")
	return slices.ContainsFunc(patterns, func(p string) bool { return p == "*" || p == typ || p == name+".*" })
}

// Endpoint is where usersync sends the changes that applied.
type Endpoint struct {
	ID          string // "ep_…"; an endpoint from configuration: "cfg_<its name>"
	URL         string
	Description string
	// EventTypes are what the endpoint wants (CheckEventTypes); none: every type.
	EventTypes []string
	Enabled    bool
	// Disabled says why usersync disabled the endpoint ("" when an admin
	// did, or when it is enabled): DisabledGone, DisabledFailing.
	Disabled string
	// Secret signs each delivery ("whsec_…"). During a rotation's overlap
	// (until PreviousUntil) the previous secret signs it too.
	Secret         string
	PreviousSecret string
	PreviousUntil  *time.Time
	// FromConfig: the endpoint comes from the configuration file, and the
	// API cannot change it.
	FromConfig bool
	// LegacyURL: the endpoint's URL was set by a usersync that let any
	// endpoint be on plain http://. Such an endpoint keeps being sent to
	// over http, public address or not (with a warning), until its URL
	// changes; a URL set since is refused plain http to a public address
	// unless USERSYNC_ENDPOINTS_ALLOW_HTTP.
	LegacyURL bool
	// FailingSince is when the endpoint's first failure since its last
	// success happened; nil when it is not failing.
	FailingSince *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Revision moves on with every write of the endpoint: a change made
	// from a read is written only over the revision it read.
	Revision int64
	// NeedsResync: while it was disabled, the endpoint kept more changes
	// than MaxKeptWhileDisabled, and kept no more: only a resync (or a
	// replay) brings it the states it missed.
	NeedsResync bool
	// Resync is the resync of the endpoint under way, or the last one;
	// nil when it never had one.
	Resync *Resync
}

// Resync is an endpoint's resync: the current state of every object it
// wants, queued kind by kind (ResyncKinds), a page at a time, with the
// progress kept in the store (across restarts and instances).
type Resync struct {
	StartedAt      time.Time
	IncludeDeleted bool   // deleted objects too (their tombstones)
	Kind           Kind   // the kind being walked; "" once done
	After          string // the walk's cursor within Kind
	Queued         int64  // objects queued so far
	DoneAt         *time.Time
}

// Running reports whether the resync is under way.
func (r *Resync) Running() bool { return r != nil && r.DoneAt == nil }

// ResyncKinds are the kinds a resync walks, in order: each kind the
// endpoint wants at least one type of (a payer's plan with the items).
var ResyncKinds = []Kind{KindUser, KindOrganization, KindMembership, KindInvitation, KindSubscription, KindSubscriptionItem, KindPaymentAttempt, KindPlan}

// MaxKeptWhileDisabled bounds the deliveries a disabled endpoint keeps
// pending (one per object, the newest state): past it, it is marked
// NeedsResync and keeps no more until it is resynced.
const MaxKeptWhileDisabled = MaxBacklogCount

// ErrEndpointChanged: the endpoint was written since it was read (its
// revision moved on); read it again and make the change again.
var ErrEndpointChanged = errors.New("the endpoint changed since it was read")

// EndpointsFull is the refusal of a new endpoint when n are stored, the
// most usersync keeps.
func EndpointsFull(n int) error {
	return Public(ErrConflict, "there are %d endpoints already, the most usersync keeps (%d); delete one first", n, MaxEndpoints)
}

// CheckEndpointDescription validates an endpoint's description: at most
// MaxEndpointDesc bytes of valid UTF-8, no control characters and no
// bidirectional controls (which make a console or a log show other text
// than what is stored).
func CheckEndpointDescription(d string) error {
	if len(d) > MaxEndpointDesc {
		return Public(ErrInvalid, "description must be at most %d bytes", MaxEndpointDesc).In("description")
	}
	if !utf8.ValidString(d) {
		return Public(ErrInvalid, "description must be UTF-8 text").In("description")
	}
	for _, r := range d {
		if unicode.IsControl(r) || isBidiControl(r) {
			return Public(ErrInvalid, "description must not hold control characters (U+%04X)", r).In("description")
		}
	}
	return nil
}

// isBidiControl reports whether r is one of Unicode's bidirectional
// formatting characters (embeddings, overrides, isolates and marks).
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Why usersync disabled an endpoint.
const (
	DisabledGone    = "gone"    // it answered 410 Gone
	DisabledFailing = "failing" // every delivery failed for MaxFailingFor
)

// MaxFailingFor is how long an endpoint may fail every delivery before it
// is disabled.
const MaxFailingFor = 5 * 24 * time.Hour

// Secrets returns the secrets that sign a delivery at now: the current,
// and the previous during its overlap.
func (e Endpoint) Secrets(now time.Time) []string {
	if e.PreviousSecret != "" && e.PreviousUntil != nil && now.Before(*e.PreviousUntil) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// Recording reports whether changes must be recorded for endpoints eps:
// while one keeps changes (Keeps).
func Recording(eps []Endpoint) bool {
	return slices.ContainsFunc(eps, func(e Endpoint) bool { return e.keeping() })
}

// Wants reports whether the endpoint is enabled and wants type typ.
func (e Endpoint) Wants(typ string) bool { return e.Enabled && MatchesType(e.EventTypes, typ) }

// Keeps reports whether the changes of type typ are queued for the
// endpoint: it wants them, and it is enabled, or disabled by an admin or
// for failing (it keeps the newest state of each object until it is
// enabled again) and has not kept more than MaxKeptWhileDisabled. An
// endpoint that answered 410 Gone keeps nothing.
func (e Endpoint) Keeps(typ string) bool { return e.keeping() && MatchesType(e.EventTypes, typ) }

func (e Endpoint) keeping() bool {
	return e.Enabled || (e.Disabled != DisabledGone && !e.NeedsResync)
}

// Pending is a change that applied and must be told to the endpoints
// that want it: an entry of the outbox, which a store writes with the
// change (the embedded store in its transaction, MongoDB on the event
// document whose mark records the outcome).
type Pending struct {
	Kind     Kind
	ObjectID string // the object's own id (a user's for a user)
	UserID   string // the user it belongs to ("" for none): erasure finds it by this
	Version  Version
	Change   EventType // created, updated or deleted
	Origin   string
	At       time.Time // when it applied
}

// PendingOf is the outbox entry of ch, the change of event ev, which
// applied at now.
func PendingOf(ev Event, ch Change, now time.Time) Pending {
	userID, objectID := ch.IDs()
	if objectID == "" {
		objectID = userID
	}
	if ch.Kind() == KindUser {
		userID = objectID
	}
	c := EventUpdated
	origin := OriginOf(ev)
	switch {
	case ch.Version().Deleted:
		c = EventDeleted
	case EventTypeOf(ev.Type) == EventCreated && origin != OriginBackfill && origin != OriginReconcile:
		// A state read from Clerk's API is no creation, even when the
		// type it is applied as is (a pending invitation's).
		c = EventCreated
	}
	return Pending{Kind: ch.Kind(), ObjectID: objectID, UserID: userID, Version: ch.Version(), Change: c, Origin: origin, At: now}
}

// EventNested is the change of an outbox entry whose event did not change
// its own object (it was stale, or found the object deleted) but carried
// the states of other objects (KindSpec.Nests), which may have applied
// without it: the fan-out sends those that did, and not the entry's own
// object.
const EventNested EventType = "nested"

// Nesting is a change that may carry, besides its own object's state,
// states of other objects (KindSpec.Nests) that apply on their own even
// when its own does not.
type Nesting interface {
	NestsStates() bool
}

// NestsStates reports whether the membership's event carried its
// organization's state.
func (c MembershipChange) NestsStates() bool { return c.Organization != nil }

// OutboxOf is the outbox entry of ch, the change of event ev, which had
// outcome at now, and whether there is one: its own change when it
// applied (PendingOf); when it did not but carried states of other
// objects (Nesting), an entry of change EventNested; none otherwise. (A
// subscription's event applies when any item it lists does.)
func OutboxOf(ev Event, ch Change, outcome Outcome, now time.Time) (Pending, bool) {
	switch outcome {
	case OutcomeApplied:
		return PendingOf(ev, ch, now), true
	case OutcomeStale, OutcomeDeleted:
		if n, ok := ch.(Nesting); ok && n.NestsStates() {
			p := PendingOf(ev, ch, now)
			p.Change = EventNested
			return p, true
		}
	}
	return Pending{}, false
}

// MessageID is the Standard Webhooks id (webhook-id) of the change p: the
// same for that change on every retry and replay, so an app may use it as
// its idempotency key; different for each object a cascade changes.
func (p Pending) MessageID() string {
	h := sha256.Sum256([]byte(string(p.Kind) + "\x00" + p.ObjectID + "\x00" + p.Version.EventID + "\x00" + boolString(p.Version.Deleted)))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:16]))
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"   // a change waits to be sent (or sent again)
	DeliveryDelivered = "delivered" // the newest change was received (2xx)
	DeliveryFailed    = "failed"    // the retry schedule ran out; a replay sends it again
	DeliveryDropped   = "dropped"   // the endpoint was gone or disabled when it was due
)

// Delivery is what one endpoint has been told of one object: the newest
// change waiting for it (a newer change of the object replaces an older
// one not yet received: the app gets the newest state in its place), and
// the last state it received, as a fingerprint of its fields (Fields), so
// that the next delivery names the fields changed since, and a state whose
// shape did not change is not sent.
type Delivery struct {
	EndpointID string
	Kind       Kind
	ObjectID   string
	UserID     string
	MessageID  string    // webhook-id of the change waiting (or last sent)
	Version    Version   // of that change
	Change     EventType // created, updated or deleted
	Origin     string
	Status     string
	// Attempts are, while the delivery is pending or failed, its failed
	// attempts since the change was queued (the retry schedule's step);
	// once delivered, the attempts it took (0: none was needed, the
	// endpoint had the state).
	Attempts int
	NextAt   time.Time // when a pending delivery is due
	Since    time.Time // when the oldest change not yet received applied
	// Fields fingerprints the last state received: field name → a hash of
	// its JSON value. Hashes are keyed per delivery (see FieldPrints).
	Fields map[string]string
	// Sent is the data of the last state received, kept for a kind whose
	// deliveries name the previous state (KindPlan: no personal data);
	// nil for every other.
	Sent         json.RawMessage
	LastStatus   int    // HTTP status of the last attempt; 0: none or no answer
	LastError    string // its short reason
	LastAt       *time.Time
	DeliveredAt  *time.Time
	DeliveredMsg string // webhook-id of the last state received
}

// Key is the delivery's key in its store: endpoint, kind and object.
func (d Delivery) Key() string { return d.EndpointID + "/" + string(d.Kind) + "/" + d.ObjectID }

// Queue returns d (zero for an object never queued for the endpoint)
// with the change p queued, and whether anything changed. A change not
// newer than d's (models.Decide: a duplicate, a stale state, a late state
// of a tombstone) changes nothing. A change queued while an older one is
// pending replaces it: the app gets the newest state in its place, and a
// creation stays one; its retry schedule goes on (a delivery that waits
// with no failure is due at once). A payer's plan is
// queued whatever its version: it has no Clerk time, and its render says
// whether it changed.
func (d Delivery) Queue(endpointID string, p Pending, now time.Time) (Delivery, bool) {
	if d.MessageID != "" && p.Kind != KindPlan && !Decide(&d.Version, p.Version).Writes() {
		return d, false
	}
	pending := d.Status == DeliveryPending
	change := p.Change
	if pending && d.Change == EventCreated && change == EventUpdated {
		change = EventCreated
	}
	d.EndpointID, d.Kind, d.ObjectID, d.UserID = endpointID, p.Kind, p.ObjectID, p.UserID
	d.MessageID, d.Version, d.Change, d.Origin = p.MessageID(), p.Version, change, p.Origin
	switch {
	case !pending:
		d.Status, d.Attempts, d.NextAt, d.Since = DeliveryPending, 0, now, p.At
	case d.Attempts == 0 && d.NextAt.After(now):
		// Waiting, not failing (a plan not settled yet): the newer
		// change may settle it.
		d.NextAt = now
	}
	return d, true
}

// Resend returns d with p queued to be sent whole (a resync's): as Queue
// when p is newer than the state d holds, or d is none; else d's own
// state again, pending (unless it is already), with nothing received
// forgotten, so that the endpoint gets every field, with the webhook-id
// it has.
func (d Delivery) Resend(endpointID string, p Pending, now time.Time) (Delivery, bool) {
	q, changed := d.Queue(endpointID, p, now)
	if !changed {
		q = d
		if q.Status != DeliveryPending {
			q.Status, q.Attempts, q.NextAt, q.Since = DeliveryPending, 0, now, now
		}
		q.Origin = p.Origin
	}
	q.Fields = nil
	return q, true
}

// Settlement is what became of one attempt to send a delivery: Sent is
// the delivery as it was sent, Result what it becomes (Settled), Attempt
// the attempt made (none when its MessageID is "": nothing was sent).
type Settlement struct {
	Sent, Result Delivery
	Attempt      Attempt
}

// Settled returns the stored delivery cur once the attempt to send
// sent.MessageID ended as result says (result is sent with the attempt's
// outcome written in). When cur still waits for that message, it becomes
// result. When a newer change was queued meanwhile, cur keeps it, pending,
// and takes what the attempt told of the endpoint: the state received
// (after a success, it is due at once) or the retry schedule.
func Settled(cur, sent, result Delivery) Delivery {
	if cur.MessageID == sent.MessageID {
		return result
	}
	cur.LastStatus, cur.LastError, cur.LastAt = result.LastStatus, result.LastError, result.LastAt
	if result.DeliveredMsg != sent.DeliveredMsg {
		cur.Fields, cur.Sent, cur.DeliveredAt, cur.DeliveredMsg = result.Fields, result.Sent, result.DeliveredAt, result.DeliveredMsg
		cur.Attempts = 0
		if result.DeliveredAt != nil {
			cur.NextAt = *result.DeliveredAt
		}
		return cur
	}
	cur.Attempts, cur.NextAt = result.Attempts, result.NextAt
	return cur
}

// Outboxed is an outbox entry as a store returns it: its key there.
type Outboxed struct {
	Key string
	Pending
}

// Attempt is one attempt to send a delivery, as the console lists them:
// ids, times and the answer, no body.
type Attempt struct {
	ID         string
	EndpointID string
	MessageID  string
	Type       string // outbound type
	ObjectID   string
	At         time.Time
	Status     int // HTTP status; 0: no answer
	Latency    time.Duration
	Error      string
	Delivered  bool
}

// AttemptFilter selects attempts, newest first.
type AttemptFilter struct {
	EndpointID string // "" for every endpoint
	Failed     bool   // only failed attempts
	After      string // cursor
	Limit      int
}

// DeliveryFilter selects deliveries of one endpoint, by key.
type DeliveryFilter struct {
	EndpointID string
	Status     string // "" for any
	After      string // cursor
	Limit      int
}

// Requeue selects deliveries of one endpoint to send again: one object's
// (Kind and ObjectID), or up to Limit of those not pending whose last
// attempt was at or after Since (a window).
type Requeue struct {
	EndpointID string
	Kind       Kind
	ObjectID   string
	Since      time.Time
	// Failed: the endpoint's failed deliveries, up to Limit (an endpoint
	// enabled again).
	Failed bool
	Limit  int
}

// Fanout is an outbox entry's change and the endpoints that want it.
// Forced: a resync's, queued as Delivery.Resend does.
type Fanout struct {
	Pending   Pending
	Endpoints []string
	Forced    bool
}

// Queue is Delivery.Queue for f, or Delivery.Resend when f is forced.
func (f Fanout) Queue(d Delivery, endpointID string, now time.Time) (Delivery, bool) {
	if f.Forced {
		return d.Resend(endpointID, f.Pending, now)
	}
	return d.Queue(endpointID, f.Pending, now)
}

// Backlog is one endpoint's pending deliveries: how many (counted up to
// MaxBacklogCount) and since when the oldest waits.
type Backlog struct {
	Pending int64
	Oldest  *time.Time
}

// MaxBacklogCount bounds the count of an endpoint's pending deliveries a
// scrape reads.
const MaxBacklogCount = 10000

// Limits of outbound webhooks.
const (
	MaxEndpoints    = 50   // endpoints, from the API and configuration
	MaxEndpointURL  = 2048 // bytes
	MaxEndpointDesc = 500  // bytes
	// AttemptsKept is how long the attempts are kept for the console.
	AttemptsKept = 14 * 24 * time.Hour
	// MaxRotationOverlap bounds how long a rotated secret still signs.
	MaxRotationOverlap = 7 * 24 * time.Hour
)
