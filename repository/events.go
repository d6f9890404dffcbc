package repository

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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
	coll        *mongo.Collection
	payloadDocs bool
	locks       *keyLocks // per event; set for the embedded engine
}

type eventDoc struct {
	ID              bson.ObjectID `bson:"_id"`
	EventID         string        `bson:"eventId,omitempty"`
	Type            string        `bson:"type"`
	EventType       string        `bson:"eventType"`
	UserID          string        `bson:"userId,omitempty"`
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
	RetryAt         *time.Time    `bson:"retryAt,omitempty"`
	ErasedAt        *time.Time    `bson:"erasedAt,omitempty"`
}

func (d eventDoc) model() models.Event {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	return models.Event{
		ID:              d.ID.Hex(),
		EventID:         d.EventID,
		Type:            d.Type,
		EventType:       models.EventType(d.EventType),
		UserID:          d.UserID,
		RawBody:         rawBytes(d.RawBody),
		Source:          d.Source,
		Signature:       d.Signature,
		SignatureValid:  d.SignatureValid,
		SourceTimestamp: utc(d.SourceTimestamp),
		ReceivedAt:      d.ReceivedAt.UTC(),
		ProcessedAt:     utc(d.ProcessedAt),
		Status:          models.EventStatus(d.Status),
		Outcome:         models.Outcome(d.Outcome),
		Attempts:        d.Attempts,
		Error:           d.Error,
		RetryAt:         utc(d.RetryAt),
		ErasedAt:        utc(d.ErasedAt),
	}
}

func (e *Events) ensureIndexes(ctx context.Context) error {
	return createIndexes(ctx, e.coll, []mongo.IndexModel{
		{Keys: bson.D{{Key: "eventId", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)},
		{Keys: bson.D{{Key: "receivedAt", Value: -1}}},
		{Keys: bson.D{{Key: "eventType", Value: 1}, {Key: "receivedAt", Value: -1}}},
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "receivedAt", Value: -1}}},
		{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "receivedAt", Value: -1}}},
	})
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

// docID returns the document id of an event. An event with an eventId gets
// an id derived from it (the first 12 bytes of its SHA-256), so that a
// retry is found by _id, the one lookup the embedded engine does not scan
// for; the sparse unique eventId index stays the rule.
func docID(eventID string) bson.ObjectID {
	if eventID == "" {
		return bson.NewObjectID()
	}
	sum := sha256.Sum256([]byte(eventID))
	var id bson.ObjectID
	copy(id[:], sum[:len(id)])
	return id
}

// summary leaves the payload and raw body out of a read.
var summary = bson.D{{Key: "payload", Value: 0}, {Key: "rawBody", Value: 0}}

// Record stores ev with status stored. If an event with the same eventId is
// already stored, it stores nothing and returns that event (without its
// body) and created=false.
func (e *Events) Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error) {
	d := eventDoc{
		ID:              docID(ev.EventID),
		EventID:         ev.EventID,
		Type:            ev.Type,
		EventType:       string(ev.EventType),
		UserID:          ev.UserID,
		RawBody:         rawValue(ev.RawBody),
		Source:          ev.Source,
		Signature:       ev.Signature,
		SignatureValid:  ev.SignatureValid,
		SourceTimestamp: ev.SourceTimestamp,
		ReceivedAt:      ev.ReceivedAt,
		Status:          string(models.StatusStored),
	}
	if e.payloadDocs {
		// A body that is not a JSON object is still kept raw.
		d.Payload, _ = jsonToDoc(ev.RawBody)
	}
	err = translate(insertOne(ctx, e.coll, d))
	if err != nil && d.Payload != nil &&
		!errors.Is(err, models.ErrConflict) && !errors.Is(err, models.ErrUnavailable) {
		// The engine refused the payload document (nesting too deep, say):
		// the raw body alone still keeps the event.
		d.Payload = nil
		err = translate(insertOne(ctx, e.coll, d))
	}
	if err == nil {
		return d.model(), true, nil
	}
	if !errors.Is(err, models.ErrConflict) {
		return models.Event{}, false, fmt.Errorf("store event %s: %w", ev.EventID, err)
	}
	stored, err = e.find(ctx, bson.D{{Key: "_id", Value: d.ID}}, summary)
	if errors.Is(err, models.ErrNotFound) {
		// Stored under another _id (by another tool): find it by eventId.
		stored, err = e.find(ctx, bson.D{{Key: "eventId", Value: ev.EventID}}, summary)
	}
	if err != nil {
		return models.Event{}, false, fmt.Errorf("read stored event %s: %w", ev.EventID, err)
	}
	return stored, false, nil
}

func insertOne(ctx context.Context, coll *mongo.Collection, doc any) error {
	_, err := coll.InsertOne(ctx, doc)
	return err
}

func (e *Events) find(ctx context.Context, filter, projection bson.D) (models.Event, error) {
	var d eventDoc
	opts := options.FindOne()
	if projection != nil {
		opts.SetProjection(projection)
	}
	if err := e.coll.FindOne(ctx, filter, opts).Decode(&d); err != nil {
		return models.Event{}, translate(err)
	}
	return d.model(), nil
}

// Get returns the event whose document id or eventId is id, body
// included, or an error wrapping models.ErrNotFound.
func (e *Events) Get(ctx context.Context, id string) (models.Event, error) {
	filter := bson.D{{Key: "_id", Value: docID(id)}}
	if oid, err := bson.ObjectIDFromHex(id); err == nil {
		filter = bson.D{{Key: "_id", Value: oid}}
	}
	ev, err := e.find(ctx, filter, nil)
	if errors.Is(err, models.ErrNotFound) && len(filter) == 1 && id != "" {
		ev, err = e.find(ctx, bson.D{{Key: "eventId", Value: id}}, nil)
	}
	if err != nil {
		return models.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return ev, nil
}

// List returns one page of the event log, newest first (by receivedAt),
// without bodies. A malformed cursor wraps models.ErrInvalid.
func (e *Events) List(ctx context.Context, f models.EventFilter) (models.EventPage, error) {
	filter := bson.D{}
	if f.Status != "" {
		filter = append(filter, bson.E{Key: "status", Value: f.Status})
	}
	if f.EventType != "" {
		filter = append(filter, bson.E{Key: "eventType", Value: f.EventType})
	}
	if f.UserID != "" {
		filter = append(filter, bson.E{Key: "userId", Value: f.UserID})
	}
	received := bson.D{}
	if !f.Since.IsZero() {
		received = append(received, bson.E{Key: "$gte", Value: f.Since})
	}
	if !f.Until.IsZero() {
		received = append(received, bson.E{Key: "$lt", Value: f.Until})
	}
	if len(received) > 0 {
		filter = append(filter, bson.E{Key: "receivedAt", Value: received})
	}
	if f.After != "" {
		at, id, err := parseEventCursor(f.After)
		if err != nil {
			return models.EventPage{}, err
		}
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "receivedAt", Value: bson.D{{Key: "$lt", Value: at}}}},
			bson.D{{Key: "receivedAt", Value: at}, {Key: "_id", Value: bson.D{{Key: "$lt", Value: id}}}},
		}})
	}
	docs, err := e.findAll(ctx, filter, options.Find().
		SetSort(bson.D{{Key: "receivedAt", Value: -1}, {Key: "_id", Value: -1}}).
		SetLimit(int64(f.Limit)+1).
		SetProjection(summary))
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

func parseEventCursor(c string) (time.Time, bson.ObjectID, error) {
	ms, hex, ok := strings.Cut(c, "_")
	n, err := strconv.ParseInt(ms, 10, 64)
	id, herr := bson.ObjectIDFromHex(hex)
	if !ok || err != nil || herr != nil {
		return time.Time{}, bson.ObjectID{}, fmt.Errorf("%w: cursor is not one this API returned", models.ErrInvalid)
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

// Stats counts events per status and per outcome. Each count is one
// countDocuments: the engines share no grouping that both do the same way.
func (e *Events) Stats(ctx context.Context) (models.EventStats, error) {
	st := models.EventStats{ByStatus: map[models.EventStatus]int64{}, ByOutcome: map[models.Outcome]int64{}}
	count := func(filter bson.D) (int64, error) {
		n, err := e.coll.CountDocuments(ctx, filter)
		if err != nil {
			return 0, fmt.Errorf("count events: %w", translate(err))
		}
		return n, nil
	}
	var err error
	for _, s := range []models.EventStatus{models.StatusStored, models.StatusProcessed, models.StatusFailed} {
		if st.ByStatus[s], err = count(bson.D{{Key: "status", Value: s}}); err != nil {
			return models.EventStats{}, err
		}
	}
	for _, o := range []models.Outcome{models.OutcomeApplied, models.OutcomeStale, models.OutcomeDeletedUser} {
		if st.ByOutcome[o], err = count(bson.D{{Key: "outcome", Value: o}}); err != nil {
			return models.EventStats{}, err
		}
	}
	st.GaveUp, err = count(bson.D{{Key: "status", Value: models.StatusFailed}, {Key: "retryAt", Value: nil}})
	return st, err
}

// Due returns up to limit events that the recovery sweep should process:
// stored ones received before stuckBefore (their delivery died between
// steps) and failed ones whose retry time has come. They come in Clerk's
// order, oldest state first, bodies included.
func (e *Events) Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error) {
	docs, err := e.findAll(ctx, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "status", Value: models.StatusStored}, {Key: "receivedAt", Value: bson.D{{Key: "$lt", Value: stuckBefore}}}},
		bson.D{{Key: "status", Value: models.StatusFailed}, {Key: "retryAt", Value: bson.D{{Key: "$lte", Value: now}}}},
	}}}, options.Find().
		SetSort(bson.D{{Key: "sourceTimestamp", Value: 1}, {Key: "receivedAt", Value: 1}}).
		SetLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("find due events: %w", err)
	}
	evs := make([]models.Event, len(docs))
	for i, d := range docs {
		evs[i] = d.model()
	}
	return evs, nil
}

// DeleteProcessedBefore deletes up to limit processed events that were
// processed before cutoff and returns how many it deleted. Stored and failed
// events are never deleted.
func (e *Events) DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	docs, err := e.findAll(ctx, bson.D{
		{Key: "status", Value: models.StatusProcessed},
		{Key: "processedAt", Value: bson.D{{Key: "$lt", Value: cutoff}}},
	}, options.Find().SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil || len(docs) == 0 {
		return 0, err
	}
	ids := make(bson.A, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	// The status is checked again: an event can only become processed, but
	// the filter states the rule where the delete happens.
	res, err := e.coll.DeleteMany(ctx, bson.D{
		{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}},
		{Key: "status", Value: models.StatusProcessed},
	})
	if err != nil {
		return 0, fmt.Errorf("delete old events: %w", translate(err))
	}
	return int(res.DeletedCount), nil
}

// MarkProcessed records a successful attempt. Processing is idempotent, so
// this is right whatever the event's status was; the filter is the _id alone,
// the one the embedded engine answers without decoding every event.
func (e *Events) MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error {
	return e.mark(ctx, id, nil, bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusProcessed},
			{Key: "outcome", Value: outcome},
			{Key: "processedAt", Value: now},
		}},
		{Key: "$unset", Value: bson.D{{Key: "error", Value: ""}, {Key: "retryAt", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	})
}

// MarkFailed records a failed attempt with its error and when the sweep
// should retry it (nil: never), unless the event has been processed
// meanwhile (by a concurrent delivery): processed is final.
func (e *Events) MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error {
	notProcessed := bson.E{Key: "status", Value: bson.D{{Key: "$ne", Value: models.StatusProcessed}}}
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusFailed},
			{Key: "error", Value: cause},
		}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	}
	if retryAt != nil {
		update[0].Value = append(update[0].Value.(bson.D), bson.E{Key: "retryAt", Value: *retryAt})
	} else {
		update = append(update, bson.E{Key: "$unset", Value: bson.D{{Key: "retryAt", Value: ""}}})
	}
	return e.mark(ctx, id, []bson.E{notProcessed}, update)
}

func (e *Events) mark(ctx context.Context, id string, cond []bson.E, update bson.D) error {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	filter := append(bson.D{{Key: "_id", Value: oid}}, cond...)
	defer e.locks.lock(id)()
	_, err = e.coll.UpdateOne(ctx, filter, update)
	if err != nil {
		return fmt.Errorf("mark event %s: %w", id, translate(err))
	}
	return nil
}
