package mongo

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Events is the user_events collection: the durable inbox.
type Events struct {
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write, and the writes
	users   *mongo.Collection // the users (from the primary): is an event's user erased
	// memberships (from the primary): is an event's membership erased
	memberships *mongo.Collection
	// invitations (from the primary): is an event's invitation erased
	invitations *mongo.Collection
	counters    *counters
	// density and oldest size the windows of bounded pages (window.go).
	density densities
	oldest  oldestCache
}

type eventDoc struct {
	ID              bson.ObjectID `bson:"_id"`
	EventID         string        `bson:"eventId,omitempty"`
	Type            string        `bson:"type"`
	EventType       string        `bson:"eventType"`
	UserID          string        `bson:"userId,omitempty"`
	ObjectID        string        `bson:"objectId,omitempty"` // an organization or membership event's data.id
	Payload         bson.D        `bson:"payload,omitempty"`
	RawBody         any           `bson:"rawBody,omitempty"` // string, or binary if not UTF-8
	Source          string        `bson:"source"`
	Signature       string        `bson:"signature"`
	SignatureValid  *bool         `bson:"signatureValid"`
	SourceTimestamp *time.Time    `bson:"sourceTimestamp,omitempty"`
	ReceivedAt      time.Time     `bson:"receivedAt"`
	ProcessedAt     *time.Time    `bson:"processedAt,omitempty"`
	Status          string        `bson:"status"`
	Outcome         string        `bson:"outcome,omitempty"`
	Attempts        int           `bson:"attempts"`
	Error           string        `bson:"error,omitempty"`
	RetryAt         *time.Time    `bson:"retryAt,omitempty"` // only while retries remain
	ClaimedUntil    *time.Time    `bson:"claimedUntil,omitempty"`
	// Uncounted holds the outcome of a processed event that no counter
	// counts yet (counters.go); set by the write that makes it processed.
	Uncounted string     `bson:"uncounted,omitempty"`
	ErasedAt  *time.Time `bson:"erasedAt,omitempty"`
	// A discarded event's when, why and by whom.
	DiscardedAt   *time.Time `bson:"discardedAt,omitempty"`
	DiscardReason string     `bson:"discardReason,omitempty"`
	DiscardedBy   string     `bson:"discardedBy,omitempty"`
	// The outbox entry of a change that applied, until it is fanned out
	// (outbound.go): set by the write that marks the event processed.
	Outbox    *outboxDoc     `bson:"outbox,omitempty"`
	OutboxSeq *bson.ObjectID `bson:"outboxSeq,omitempty"`
}

func (d eventDoc) model() models.Event {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	var discarded *models.Discard
	if d.DiscardedAt != nil {
		discarded = &models.Discard{At: d.DiscardedAt.UTC(), Reason: d.DiscardReason, By: d.DiscardedBy}
	}
	return models.Event{
		Discarded:       discarded,
		ID:              d.ID.Hex(),
		EventID:         d.EventID,
		Type:            d.Type,
		EventType:       models.EventType(d.EventType),
		UserID:          d.UserID,
		ObjectID:        d.ObjectID,
		RawBody:         rawBytes(d.RawBody),
		Source:          d.Source,
		Signature:       d.Signature,
		SignatureValid:  d.SignatureValid,
		SourceTimestamp: utc(d.SourceTimestamp),
		ReceivedAt:      d.ReceivedAt.UTC(),
		ProcessedAt:     utc(d.ProcessedAt),
		Status:          models.EventStatus(d.Status),
		Outcome:         models.ReadOutcome(d.Outcome),
		Attempts:        d.Attempts,
		Error:           d.Error,
		RetryAt:         utc(d.RetryAt),
		ErasedAt:        utc(d.ErasedAt),
	}
}

// eventIndexes are the indexes of user_events; docs/mongodb-queries.md's query → index
// table says which query uses each. The unique one is built by Prepare
// (see uniqueIndexes), the others by EnsureIndexes. Every event log index
// ends in receivedAt, _id (descending), the order of the log, so that a
// page is read in index order whatever the filter.
var eventIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "eventId", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)},
	{Keys: bson.D{{Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "status", Value: 1}, {Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}},
	// The Clerk type: a kind, an event type, or both (one type, or an $in
	// of three whose ranges MongoDB merges in order).
	{Keys: bson.D{{Key: "type", Value: 1}, {Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}},
	// An organization's or membership's events; user events have no
	// objectId and are not in it.
	{Keys: bson.D{{Key: "objectId", Value: 1}, {Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}},
		Options: options.Index().SetPartialFilterExpression(bson.D{{Key: "objectId", Value: bson.D{{Key: "$exists", Value: true}}}})},
	{Keys: bson.D{{Key: "retryAt", Value: 1}}, Options: options.Index().SetSparse(true)},
	{Keys: bson.D{{Key: "processedAt", Value: 1}}},
	{Keys: bson.D{{Key: "uncounted", Value: 1}}, Options: options.Index().SetSparse(true)}, // processed, not counted yet
	// The outbox (outbound.go): the events whose change's outbox entry
	// waits for the fan-out.
	{Keys: bson.D{{Key: "outboxSeq", Value: 1}}, Options: options.Index().SetSparse(true)},
}

// obsoleteEventIndexes were made by earlier versions; their successors
// end in _id, so that pages need no sort in memory, and the type index
// serves the kind and the event type. EnsureIndexes drops them;
// knownIndexNames takes them as usersync's.
//
// Reads: the indexes of a database of schema 0 (the first four, made by
// versions before a6aede5, 2026-11-21) or of schema 2 (the last, made by
// versions before c2846b1, 2026-11-25, "MongoDB store: the event log by
// kind and by object").
// Remove: with obsoleteUserIndexes, in the first release after no
// database of schema below 3 is left.
var obsoleteEventIndexes = []string{
	"receivedAt_-1", "eventType_1_receivedAt_-1", "status_1_receivedAt_-1", "userId_1_receivedAt_-1",
	"eventType_1_receivedAt_-1__id_-1", // the event type filter reads type_1_receivedAt_-1__id_-1
}

// rawValue is how a body is stored: as a string when it is valid UTF-8
// (JSON always is), so it reads as text; otherwise as binary.
func rawValue(b []byte) any {
	if b == nil {
		return nil
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return b
}

func rawBytes(v any) []byte {
	switch t := v.(type) {
	case string:
		return []byte(t)
	case bson.Binary:
		return t.Data
	case []byte:
		return t
	}
	return nil
}

// docID returns the document id of an event, a user, an organization or
// a membership: derived from its eventId, userId, organizationId or
// membershipId (the first 12 bytes of its SHA-256), so that every lookup
// of one is by _id and ids are spread evenly over the _id space (the
// pages of users, organizations and memberships walk it in windows, see
// pages.go); the unique indexes of those ids stay the rule. An event
// without an eventId gets a new id.
func docID(key string) bson.ObjectID {
	if key == "" {
		return bson.NewObjectID()
	}
	sum := sha256.Sum256([]byte(key))
	var id bson.ObjectID
	copy(id[:], sum[:len(id)])
	return id
}

// summary leaves the payload and raw body out of a read.
var summary = bson.D{{Key: "payload", Value: 0}, {Key: "rawBody", Value: 0}}

// newEventDoc is the document of ev as usersync stores it: the body raw
// and, when it is a JSON object, as the payload document.
func newEventDoc(ev models.Event) eventDoc {
	d := eventDoc{
		ID:              docID(ev.EventID),
		EventID:         ev.EventID,
		Type:            ev.Type,
		EventType:       string(ev.EventType),
		UserID:          ev.UserID,
		ObjectID:        ev.ObjectID,
		RawBody:         rawValue(ev.RawBody),
		Source:          ev.Source,
		Signature:       ev.Signature,
		SignatureValid:  ev.SignatureValid,
		SourceTimestamp: ev.SourceTimestamp,
		ReceivedAt:      ev.ReceivedAt,
		ProcessedAt:     ev.ProcessedAt,
		Status:          string(ev.Status),
		Outcome:         string(ev.Outcome),
		Attempts:        ev.Attempts,
		Error:           ev.Error,
		RetryAt:         ev.RetryAt,
	}
	if ev.ID != "" {
		if oid, err := bson.ObjectIDFromHex(ev.ID); err == nil {
			d.ID = oid
		}
	}
	d.Payload, _ = jsonToDoc(ev.RawBody)
	return d
}

// Record stores ev with status stored. If an event with the same eventId is
// already stored, it stores nothing and returns that event (without its
// body, read from the primary) and created=false.
//
// Both are one round trip: an upsert by the _id derived from the eventId
// that sets the event only on insert and returns the document that was
// there before, if any. mongod retries concurrent upserts of one new _id
// itself; a DocumentDB-based engine refuses all but one with a duplicate
// key, and the stored event is then read.
func (e *Events) Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error) {
	d := newStoredDoc(ev)
	stored, created, err = e.record(ctx, d)
	if err != nil && d.Payload != nil && !errors.Is(err, errDuplicate) &&
		!errors.Is(err, models.ErrUnavailable) && !errors.Is(err, context.Canceled) {
		// Refused: by the eventId index, for an event stored under another
		// _id (an engine may word that as an internal error), or for the
		// payload document (nesting too deep, say), when the raw body alone
		// still keeps the event.
		if stored, err := e.find(ctx, e.primary, bson.D{{Key: "eventId", Value: ev.EventID}}, summary); err == nil {
			return stored, false, nil
		}
		d.Payload = nil
		stored, created, err = e.record(ctx, d)
	}
	if errors.Is(err, errDuplicate) {
		stored, err := e.readStored(ctx, d)
		return stored, false, err
	}
	if err != nil {
		return models.Event{}, false, fmt.Errorf("store event %s: %w", ev.EventID, err)
	}
	return stored, created, nil
}

// readStored reads the event stored already under d's _id or eventId,
// which refused d's insert: a concurrent first delivery won, or the event
// is stored under another _id (by another tool).
func (e *Events) readStored(ctx context.Context, d eventDoc) (models.Event, error) {
	stored, err := e.find(ctx, e.primary, bson.D{{Key: "_id", Value: d.ID}}, summary)
	if errors.Is(err, models.ErrNotFound) {
		stored, err = e.find(ctx, e.primary, bson.D{{Key: "eventId", Value: d.EventID}}, summary)
	}
	if err != nil {
		return models.Event{}, fmt.Errorf("read stored event %s: %w", d.EventID, err)
	}
	return stored, nil
}

// newStoredDoc is the document of ev as Record stores it: stored, not
// yet tried.
func newStoredDoc(ev models.Event) eventDoc {
	ev.ID, ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts, ev.Error, ev.RetryAt = "", models.StatusStored, "", nil, 0, "", nil
	return newEventDoc(ev)
}

// record inserts d: created, or errDuplicate when an event is stored
// under its _id (or its eventId) already, which Record then reads.
//
// An insert, not an upsert that returns the document before: of
// concurrent findAndModify upserts of one new _id, the DocumentDB engines
// answered "no document before" to several (up to 8 of 8, in 185 of 200
// tries), so each would have been the first delivery. A unique _id lets
// one insert through on every engine. A duplicate costs a second round
// trip, the read.
func (e *Events) record(ctx context.Context, d eventDoc) (models.Event, bool, error) {
	if err := insertOne(ctx, e.primary, d); err != nil {
		return models.Event{}, false, translate(err)
	}
	return d.model(), true, nil
}

func insertOne(ctx context.Context, coll *mongo.Collection, doc any) error {
	_, err := retryConflicts(ctx, func() (*mongo.InsertOneResult, error) { return coll.InsertOne(ctx, doc) })
	return err
}

func (e *Events) find(ctx context.Context, coll *mongo.Collection, filter, projection bson.D) (models.Event, error) {
	var d eventDoc
	opts := options.FindOne()
	if projection != nil {
		opts.SetProjection(projection)
	}
	if err := coll.FindOne(ctx, filter, opts).Decode(&d); err != nil {
		return models.Event{}, translate(err)
	}
	return d.model(), nil
}

// Get returns the event whose document id or eventId is id, body
// included, or an error wrapping models.ErrNotFound.
func (e *Events) Get(ctx context.Context, id string) (models.Event, error) {
	ev, err := e.getFrom(ctx, e.coll, id, nil)
	if err != nil {
		return models.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return ev, nil
}

// getFrom reads the event whose document id or eventId is id from coll.
func (e *Events) getFrom(ctx context.Context, coll *mongo.Collection, id string, projection bson.D) (models.Event, error) {
	filter := bson.D{{Key: "_id", Value: docID(id)}}
	if oid, err := bson.ObjectIDFromHex(id); err == nil {
		filter = bson.D{{Key: "_id", Value: oid}}
	}
	ev, err := e.find(ctx, coll, filter, projection)
	if errors.Is(err, models.ErrNotFound) && len(filter) == 1 && id != "" {
		ev, err = e.find(ctx, coll, bson.D{{Key: "eventId", Value: id}}, projection)
	}
	return ev, err
}

// List returns one page of the event log, newest first (by receivedAt,
// then _id), without bodies. A malformed cursor wraps models.ErrInvalid.
func (e *Events) List(ctx context.Context, f models.EventFilter) (models.EventPage, error) {
	if _, err := eventListFilter(f); err != nil {
		return models.EventPage{}, err
	}
	want := f.Limit + 1
	byTime := logWindowed(f) && e.commonMatches(f)
	query := func(w window, limit int) ([]eventDoc, error) {
		opts := options.Find().SetSort(eventLogOrder).SetLimit(int64(limit)).SetProjection(summary)
		if byTime {
			opts.SetHint(receivedAtIndex)
		}
		docs, err := e.findAll(ctx, eventWindowFilter(f, w), opts)
		if err != nil && byTime && !errors.Is(err, models.ErrUnavailable) && !errors.Is(err, context.Canceled) {
			// the index is still being built, or the engine takes no hint
			byTime = false
			docs, err = e.findAll(ctx, eventWindowFilter(f, w), opts.SetHint(nil))
		}
		return docs, err
	}
	var docs []eventDoc
	var err error
	kind := logKind(f)
	if logWindowed(f) && !e.density.few(kind) {
		docs, err = e.walkLog(ctx, f, want, query)
	} else {
		docs, err = query(window{noLo: true, noHi: true, last: true}, want)
	}
	if err == nil && logWindowed(f) && f.After == "" && f.Since.IsZero() && f.Until.IsZero() {
		// A first page of the whole log that is not full: the filter's
		// events are few, and its next pages are one query through its
		// own index, as a user's are; windows would read every event
		// their range holds to find none. Once a page is full, windows
		// again.
		e.density.noteFew(kind, len(docs) < want)
	}
	if err != nil {
		return models.EventPage{}, fmt.Errorf("list events: %w", err)
	}
	var page models.EventPage
	if len(docs) > f.Limit {
		docs = docs[:f.Limit]
		last := docs[len(docs)-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.ReceivedAt.UnixMilli(), last.ID.Hex())
	}
	page.Events = make([]models.Event, 0, len(docs))
	for _, d := range docs {
		page.Events = append(page.Events, d.model())
	}
	return page, nil
}

// receivedAtIndex is the event log's index by time alone.
const receivedAtIndex = "receivedAt_-1__id_-1"

// commonMatches reports whether the events that f's status and types
// select are a large share of the log (a quarter or more, by the densities
// the walks met): then a window of the log is best read through the
// receivedAt index, checking the status and type of the window's events,
// rather than through the status or type index. The DocumentDB engines
// read a condition on a composite index's first field for every event of
// that status or type, whatever the window: 35 ms for a two-minute window
// of 500k events of one type, against 5 ms by time. A rare status or type
// is read through its own index. Without a measure, or with no status or
// type, it reports false.
func (e *Events) commonMatches(f models.EventFilter) bool {
	if f.Status == "" && f.Kind == "" && f.EventType == "" {
		return false
	}
	some, ok := e.density.get(logKind(f))
	all, allOK := e.density.get(logKind(models.EventFilter{}))
	return ok && allOK && all > 0 && some*4 >= all
}

// logKind is the kind of walk of the log with filter f: what its
// density and edge are noted under.
func logKind(f models.EventFilter) string {
	return "log:" + string(f.Status) + ":" + string(f.Kind) + ":" + string(f.EventType)
}

// logWindowed reports whether a page of the event log with filter f is
// walked in windows (see window.go): when its matches may be most of the
// log. A user's or an object's events, and the stored or failed ones, are
// few: their index range is the bound.
func logWindowed(f models.EventFilter) bool {
	return f.UserID == "" && f.ObjectID == "" && (f.Status == "" || f.Status == models.StatusProcessed)
}

// defaultLogWidth is the first window of a kind of page no walk has
// measured yet: a minute of events.
const defaultLogWidth = uint64(time.Minute / time.Millisecond)

// walkLog walks the event log down from the page's upper bound (the
// cursor, Until, or now) in windows of receivedAt, to Since or the oldest
// event.
func (e *Events) walkLog(ctx context.Context, f models.EventFilter, want int, query func(window, int) ([]eventDoc, error)) ([]eventDoc, error) {
	kind := logKind(f)
	top := time.Now()
	switch {
	case f.After != "":
		top, _, _ = parseEventCursor(f.After)
		top = top.Add(time.Millisecond) // the cursor's millisecond is in the first window
	case !f.Until.IsZero():
		top = f.Until
	}
	plan := windowPlan{start: timeKey(top), desc: true, width: defaultLogWidth}
	// A filter's matches are some of the log's: until a walk of the
	// filter measured its own, the whole log's density (windows narrower
	// than needed: more of them, none too large) and edge stand in.
	all := logKind(models.EventFilter{})
	if d, ok := e.density.get(kind); ok {
		plan.width = firstWidth(want, d, math.MaxUint64)
	} else if d, ok := e.density.get(all); ok {
		plan.width = firstWidth(want, d, math.MaxUint64)
	}
	if !f.Since.IsZero() {
		plan.end = timeKey(f.Since)
	}
	// A first page (from now) crosses what arrived since the last one in
	// one window, then walks down from where that one's events began.
	fromNow := f.After == "" && f.Until.IsZero()
	if fromNow {
		edge, ok := e.density.edge(kind)
		if !ok {
			edge, ok = e.density.edge(all)
		}
		plan = plan.withEdge(edge, ok)
	}
	floor := func() error {
		if !f.Since.IsZero() {
			return nil
		}
		oldest, ok, err := e.oldestReceived(ctx)
		if err != nil {
			return err
		}
		if !ok {
			oldest = top // no event at all: the next window is the last
		}
		plan.end = timeKey(oldest)
		return nil
	}
	docs, _, err := walkWindows(&plan, want, floor, query)
	if err != nil {
		return nil, err
	}
	reach := plan.end
	if len(docs) >= want {
		reach = timeKey(docs[len(docs)-1].ReceivedAt)
	}
	e.density.note(kind, len(docs), covered(spanStart(plan, len(docs) > 0, func() uint64 { return timeKey(docs[0].ReceivedAt) }), reach, true))
	if fromNow && len(docs) > 0 {
		e.density.noteEdge(kind, timeKey(docs[0].ReceivedAt))
	}
	return docs, nil
}

// oldestReceived returns the oldest receivedAt of the events, read once
// (see oldestCache) through the receivedAt index; ok is false when there
// is no event.
func (e *Events) oldestReceived(ctx context.Context) (time.Time, bool, error) {
	e.oldest.mu.Lock()
	defer e.oldest.mu.Unlock()
	if !e.oldest.at.IsZero() {
		return e.oldest.at, true, nil
	}
	var d struct {
		ReceivedAt time.Time `bson:"receivedAt"`
	}
	err := e.coll.FindOne(ctx, bson.D{}, options.FindOne().
		SetSort(bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "receivedAt", Value: 1}})).Decode(&d)
	if err = translate(err); errors.Is(err, models.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the oldest event: %w", err)
	}
	e.oldest.at = d.ReceivedAt.UTC()
	return e.oldest.at, true, nil
}

// eventLogOrder is the order of the event log: the suffix of every event
// log index, read forwards.
var eventLogOrder = bson.D{{Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}

// eventListFilter is the filter of one page of the event log. Each of
// status, eventType and userId is the first key of an index that then
// holds the log's order; with several, the planner picks one of those
// indexes and checks the others on the documents it reads. The time range
// and the cursor bound receivedAt, so a page is a range of the index.
func eventListFilter(f models.EventFilter) (bson.D, error) {
	if f.After != "" {
		if _, _, err := parseEventCursor(f.After); err != nil {
			return nil, err
		}
	}
	return eventWindowFilter(f, window{noLo: true, noHi: true}), nil
}

// eventTypes are the Clerk types that f's kind and event type select (by
// the kinds table's short type of each: subscription.pastDue is
// past_due); nil when f names neither, empty when no type is of both (a
// deletion of a kind Clerk never deletes).
func eventTypes(f models.EventFilter) []string {
	if f.Kind == "" && f.EventType == "" {
		return nil
	}
	kinds := []models.Kind{f.Kind}
	if f.Kind == "" {
		kinds = models.Kinds
	}
	types := []string{}
	for _, k := range kinds {
		for _, t := range models.TypesOf(k) {
			if f.EventType == "" || models.EventTypeOf(t) == f.EventType {
				types = append(types, t)
			}
		}
	}
	return types
}

// eventWindowFilter is eventListFilter within window w of receivedAt
// (see window.go); f's cursor must be valid.
func eventWindowFilter(f models.EventFilter, w window) bson.D {
	filter := bson.D{}
	if f.Status != "" {
		filter = append(filter, bson.E{Key: "status", Value: f.Status})
	}
	if types := eventTypes(f); len(types) == 1 {
		filter = append(filter, bson.E{Key: "type", Value: types[0]})
	} else if types != nil {
		// none: an empty $in, which matches no event
		filter = append(filter, bson.E{Key: "type", Value: bson.D{{Key: "$in", Value: types}}})
	}
	if f.UserID != "" {
		filter = append(filter, bson.E{Key: "userId", Value: f.UserID})
	}
	if f.ObjectID != "" {
		filter = append(filter, bson.E{Key: "objectId", Value: f.ObjectID})
	}
	received := bson.D{}
	if lo := keyTime(w.lo); !f.Since.IsZero() || !w.noLo {
		switch {
		case w.noLo || !f.Since.IsZero() && f.Since.After(lo):
			lo = f.Since
		}
		received = append(received, bson.E{Key: "$gte", Value: lo})
	}
	if hi := keyTime(w.hi); !f.Until.IsZero() || !w.noHi {
		switch {
		case w.noHi || !f.Until.IsZero() && f.Until.Before(hi):
			hi = f.Until
		}
		received = append(received, bson.E{Key: "$lt", Value: hi})
	}
	var after bson.E
	if f.After != "" {
		at, id, _ := parseEventCursor(f.After)
		// receivedAt <= at bounds the index range; the $nor leaves out the
		// events of that very millisecond already listed. ($nor, not an
		// $or: an $or of indexed clauses invites a plan that unions two
		// indexes and then sorts in memory.)
		received = append(received, bson.E{Key: "$lte", Value: at})
		after = bson.E{Key: "$nor", Value: bson.A{
			bson.D{{Key: "receivedAt", Value: at}, {Key: "_id", Value: bson.D{{Key: "$gte", Value: id}}}},
		}}
	}
	if len(received) > 0 {
		filter = append(filter, bson.E{Key: "receivedAt", Value: received})
	}
	if after.Key != "" {
		filter = append(filter, after)
	}
	return filter
}

func parseEventCursor(c string) (time.Time, bson.ObjectID, error) {
	ms, hex, ok := strings.Cut(c, "_")
	n, err := strconv.ParseInt(ms, 10, 64)
	id, herr := bson.ObjectIDFromHex(hex)
	if !ok || err != nil || herr != nil {
		return time.Time{}, bson.ObjectID{}, models.ErrBadCursor()
	}
	return time.UnixMilli(n).UTC(), id, nil
}

func (e *Events) findAll(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder) ([]eventDoc, error) {
	cur, err := e.coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, translate(err)
	}
	var docs []eventDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	return docs, nil
}

// Stats counts events per status and per outcome, and the stored and
// failed ones per kind. Processed events are not counted: their counts
// come from the outcome counters (see counters.go), which Stats folds
// first, so the cost is that of counting the stored and failed events
// through the status index, and the processed ones since the fold through
// the uncounted index.
func (e *Events) Stats(ctx context.Context) (models.EventStats, error) {
	st, err := e.countUnprocessed(ctx)
	if err != nil {
		return models.EventStats{}, fmt.Errorf("count events: %w", err)
	}
	// Discarded events, apart: through the status index.
	discarded, err := e.coll.CountDocuments(ctx, discardedFilter)
	if err != nil {
		return models.EventStats{}, fmt.Errorf("count discarded events: %w", translate(err))
	}
	st.ByStatus[models.StatusDiscarded] = discarded
	if err := e.fold(ctx); err != nil {
		return models.EventStats{}, err
	}
	byOutcome, pending, err := e.counters.outcomes(ctx)
	if err != nil {
		return models.EventStats{}, err
	}
	for _, o := range outcomes {
		// Events flagged since the fold, less those a concurrent fold has
		// counted and not yet unflagged. o is as stored: an earlier
		// version's deleted_user is counted as deleted.
		flagged, err := e.coll.CountDocuments(ctx, uncountedFilter(o))
		if err != nil {
			return models.EventStats{}, fmt.Errorf("count %s events: %w", o, translate(err))
		}
		if len(pending[o]) > 0 {
			both, err := e.coll.CountDocuments(ctx, append(uncountedFilter(o),
				bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: pending[o]}}}))
			if err != nil {
				return models.EventStats{}, fmt.Errorf("count %s events: %w", o, translate(err))
			}
			flagged -= both
		}
		n := max(byOutcome[o]+flagged, 0)
		st.ByOutcome[models.ReadOutcome(string(o))] += n
		st.ByStatus[models.StatusProcessed] += n
	}
	return st, nil
}

// discardedFilter selects the discarded events, through the status index.
var discardedFilter = bson.D{{Key: "status", Value: models.StatusDiscarded}}

// Due returns up to limit events that the recovery sweep should process:
// stored ones received before stuckBefore (their delivery died between
// steps; the oldest first, through the status index) and failed ones
// whose retry time has come (the earliest first, through the retryAt
// index, which holds only the events that have retries left). The batch
// comes in Clerk's order, oldest state first, bodies included; it is
// ordered here rather than by the server, which would sort in memory.
func (e *Events) Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error) {
	stuck, err := e.dueStored(ctx, stuckBefore, limit)
	if err != nil {
		return nil, fmt.Errorf("find stuck events: %w", err)
	}
	retry, err := e.dueFailed(ctx, now, limit)
	if err != nil {
		return nil, fmt.Errorf("find events to retry: %w", err)
	}
	evs := make([]models.Event, 0, len(stuck)+len(retry))
	for _, d := range append(stuck, retry...) {
		evs = append(evs, d.model())
	}
	slices.SortStableFunc(evs, models.CompareClerkOrder)
	return evs[:min(len(evs), limit)], nil
}

func dueStoredFilter(stuckBefore time.Time) bson.D {
	return bson.D{{Key: "status", Value: models.StatusStored}, {Key: "receivedAt", Value: bson.D{{Key: "$lt", Value: stuckBefore}}}}
}

func dueFailedFilter(now time.Time) bson.D {
	return bson.D{{Key: "retryAt", Value: bson.D{{Key: "$lte", Value: now}}}}
}

// DeleteProcessedBefore deletes up to limit processed events that were
// processed before cutoff, through the processedAt index (only processed
// and discarded events have that field; a discarded one's is when it was
// discarded), and returns how many it deleted. Stored and failed events
// are never deleted. The outcome counters lose what it
// deletes.
func (e *Events) DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	// Only counted events are deleted, and subtracted from the counters.
	if err := e.fold(ctx); err != nil {
		return 0, err
	}
	docs, err := e.processedBefore(ctx, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("find old events: %w", err)
	}
	byOutcome := map[models.Outcome][]bson.ObjectID{} // as stored: the counter that counted an event loses it
	for _, d := range docs {
		byOutcome[models.Outcome(d.Outcome)] = append(byOutcome[models.Outcome(d.Outcome)], d.ID)
	}
	deleted := 0
	// One delete per outcome: its count is exact even when another
	// instance deletes some of the same events at the same time.
	// Discarded events (no outcome) are deleted alike, off no counter.
	for outcome, ids := range byOutcome {
		status := models.StatusProcessed
		if outcome == "" {
			status = models.StatusDiscarded
		}
		// No {uncounted: null} here: processedBefore left out the uncounted
		// ones, a processed event is never flagged again, and the
		// condition leads the DocumentDB engines to read the sparse
		// uncounted_1 index for every counted event (90 ms at 270k events).
		res, err := e.coll.DeleteMany(ctx, bson.D{
			{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}},
			{Key: "status", Value: status},
		})
		if err != nil {
			return deleted, fmt.Errorf("delete old events: %w", translate(err))
		}
		n := res.DeletedCount
		deleted += int(n)
		if outcome == "" {
			continue
		}
		if err := e.counters.add(ctx, outcome, ids[0], -n); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// retentionFilter selects the events processed before cutoff, through
// the processedAt index (processedBefore leaves out those not counted
// yet).
func retentionFilter(cutoff time.Time) bson.D {
	return bson.D{{Key: "processedAt", Value: bson.D{{Key: "$lt", Value: cutoff}}}}
}

// notProcessed is the condition of every change to an event: processed
// and discarded are final, and an event keeps its first outcome.
var notProcessed = bson.E{Key: "status", Value: bson.D{{Key: "$nin", Value: bson.A{models.StatusProcessed, models.StatusDiscarded}}}}

// Discard marks the failed event whose document id or eventId is id
// discarded, in one conditional write by _id: failed, and claimed by no
// sweep or replay until after d.At (see repository.Events.Discard). It
// takes processedAt d.At, so that retention deletes it as a processed
// event, and loses its retry time and claim. A discarded event whose user
// or membership was erased is erased at once, as a given-up one is.
func (e *Events) Discard(ctx context.Context, id string, d models.Discard) (models.Event, error) {
	cur, err := e.getFrom(ctx, e.primary, id, summary)
	if err != nil {
		return models.Event{}, fmt.Errorf("discard event %s: %w", id, err)
	}
	oid, err := bson.ObjectIDFromHex(cur.ID)
	if err != nil {
		return models.Event{}, fmt.Errorf("discard event %s: %w", id, models.ErrNotFound)
	}
	var after eventDoc
	err = e.primary.FindOneAndUpdate(ctx, bson.D{
		{Key: "_id", Value: oid},
		{Key: "status", Value: models.StatusFailed},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "claimedUntil", Value: nil}},
			bson.D{{Key: "claimedUntil", Value: bson.D{{Key: "$lte", Value: d.At}}}},
		}},
	}, bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusDiscarded},
			{Key: "processedAt", Value: d.At},
			{Key: "discardedAt", Value: d.At},
			{Key: "discardReason", Value: d.Reason},
			{Key: "discardedBy", Value: d.By},
		}},
		{Key: "$unset", Value: bson.D{{Key: "retryAt", Value: ""}, {Key: "claimedUntil", Value: ""}, {Key: "claimedBy", Value: ""}}},
	}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after)
	if errors.Is(err, mongo.ErrNoDocuments) {
		// Not failed, or held: say which, as it is now.
		if cur, err = e.find(ctx, e.primary, bson.D{{Key: "_id", Value: oid}}, summary); err != nil {
			return models.Event{}, fmt.Errorf("discard event %s: %w", id, err)
		}
		return models.Event{}, fmt.Errorf("discard event %s: %w", id, models.DiscardConflict(cur, d.At))
	}
	if err != nil {
		return models.Event{}, fmt.Errorf("discard event %s: %w", id, translate(err))
	}
	if err := e.eraseIfErased(ctx, oid, d.At); err != nil {
		return models.Event{}, fmt.Errorf("discard event %s: %w", id, err)
	}
	return after.model(), nil
}

// MarkProcessed records a successful attempt, unless the event has been
// processed already (by a concurrent delivery or sweep): the first outcome
// stays, and attempts counts the attempts up to it. The same write flags
// the event for the outcome counters (see counters.go): one round trip.
// An event that found its user or membership deleted (deleted) whose
// data was erased already is erased at once (see eraseIfErased).
// Its error wraps models.ErrNotFound for an id that is not an event id.
func (e *Events) MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error {
	return e.markProcessedWith(ctx, id, outcome, now, nil, "")
}

// markProcessedWith is MarkProcessed whose write also records the outbox
// entry entry of the change that applied, if not nil (see outbound.go).
// kind is the kind of the event's change, "" when not known: a stale
// event is looked at for erasure only if it may be an invitation's (the
// one kind whose object is erased while it is not deleted), so that a
// stale user's delivery costs no reads more.
func (e *Events) markProcessedWith(ctx context.Context, id string, outcome models.Outcome, now time.Time, entry *outboxDoc, kind models.Kind) error {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	update := markProcessed(outcome, now)
	if entry != nil {
		update[0].Value = append(update[0].Value.(bson.D), outboxSet(entry)...)
	}
	_, err = updateByID(ctx, e.primary, oid, bson.D{notProcessed}, update)
	if err != nil {
		return fmt.Errorf("mark event %s processed: %w", id, err)
	}
	if outcome == models.OutcomeDeleted || outcome == models.OutcomeStale && (kind == "" || kind == models.KindInvitation) {
		// A user's event, or a membership event of a deleted member; or
		// a stale state of an invitation erased already (a newer state
		// that applies holds an email again, and is due on its own).
		if err := e.eraseIfErased(ctx, oid, now); err != nil {
			return fmt.Errorf("mark event %s processed: %w", id, err)
		}
	}
	return nil
}

// markProcessed is the update that marks an event processed with outcome
// at now, under the filter notProcessed.
func markProcessed(outcome models.Outcome, now time.Time) bson.D {
	return bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusProcessed},
			{Key: "outcome", Value: outcome},
			{Key: "processedAt", Value: now},
			{Key: "uncounted", Value: outcome}, // see counters.go
		}},
		{Key: "$unset", Value: bson.D{{Key: "error", Value: ""}, {Key: "retryAt", Value: ""}, {Key: "claimedUntil", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	}
}

// MarkFailed records a failed attempt with its error and when the sweep
// should retry it (nil: never), unless the event has been processed
// meanwhile (by a concurrent delivery): processed is final. An event given
// up whose user or membership was erased is erased at once.
func (e *Events) MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusFailed},
			{Key: "error", Value: cause},
		}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	}
	unset := bson.D{{Key: "claimedUntil", Value: ""}}
	if retryAt != nil {
		update[0].Value = append(update[0].Value.(bson.D), bson.E{Key: "retryAt", Value: *retryAt})
	} else {
		unset = append(unset, bson.E{Key: "retryAt", Value: ""})
	}
	update = append(update, bson.E{Key: "$unset", Value: unset})
	done, err := updateByID(ctx, e.primary, oid, bson.D{notProcessed}, update)
	if err != nil {
		return fmt.Errorf("mark event %s failed: %w", id, err)
	}
	if done && retryAt == nil {
		// Given up: erasable now, and at once if its user or membership
		// was erased.
		if err := e.eraseIfErased(ctx, oid, time.Now().UTC()); err != nil {
			return fmt.Errorf("mark event %s failed: %w", id, err)
		}
	}
	return nil
}

// Claim leases the event to the caller until now+lease, so that one
// sweep among several instances processes it. attempts is the number of
// attempts the caller read with the event: Claim reports false when the
// event has had another attempt since (another sweep or a delivery got
// there first), is processed, or is leased to another sweep until after
// now. The lease ends when the event is marked, or when it runs out (the
// sweep died). Its error wraps models.ErrNotFound for an id that is not
// an event id.
func (e *Events) Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error) {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return false, fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	ok, err := e.claimByID(ctx, oid, attempts, now, lease) // see claim.go
	if err != nil {
		return false, fmt.Errorf("claim event %s: %w", id, err)
	}
	return ok, nil
}

// claimCond is the condition of Claim, next to the _id.
func claimCond(attempts int, now time.Time) bson.D {
	return bson.D{notProcessed, {Key: "attempts", Value: attempts}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "claimedUntil", Value: nil}},
		bson.D{{Key: "claimedUntil", Value: bson.D{{Key: "$lte", Value: now}}}},
	}}}
}

// updateByID applies update to the document of coll with _id id if it
// is in the state that cond matches, in one conditional write, and
// reports whether it did. A missing document is not updated.
func updateByID(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, cond, update bson.D) (bool, error) {
	res, err := updateOne(ctx, coll, append(bson.D{{Key: "_id", Value: id}}, cond...), update)
	if err != nil {
		return false, translate(err)
	}
	return res.MatchedCount > 0, nil
}

// findByID reads the document with _id id into v, or returns an error
// wrapping models.ErrNotFound.
func findByID(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, v any, projection bson.D) error {
	opts := options.FindOne()
	if projection != nil {
		opts.SetProjection(projection)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, opts).Decode(v); err != nil {
		return translate(err)
	}
	return nil
}
