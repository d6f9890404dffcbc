package repository

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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

// Get returns the event with document id id, body included, or an error
// wrapping models.ErrNotFound.
func (e *Events) Get(ctx context.Context, id string) (models.Event, error) {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return models.Event{}, fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	ev, err := e.find(ctx, bson.D{{Key: "_id", Value: oid}}, nil)
	if err != nil {
		return models.Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return ev, nil
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
		{Key: "$unset", Value: bson.D{{Key: "error", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	})
}

// MarkFailed records a failed attempt with its error, unless the event has
// been processed meanwhile (by a concurrent delivery): processed is final.
func (e *Events) MarkFailed(ctx context.Context, id string, cause string) error {
	notProcessed := bson.E{Key: "status", Value: bson.D{{Key: "$ne", Value: models.StatusProcessed}}}
	return e.mark(ctx, id, []bson.E{notProcessed}, bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.StatusFailed},
			{Key: "error", Value: cause},
		}},
		{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
	})
}

func (e *Events) mark(ctx context.Context, id string, cond []bson.E, update bson.D) error {
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		return fmt.Errorf("event %s: %w", id, models.ErrNotFound)
	}
	filter := append(bson.D{{Key: "_id", Value: oid}}, cond...)
	_, err = e.coll.UpdateOne(ctx, filter, update)
	if err != nil {
		return fmt.Errorf("mark event %s: %w", id, translate(err))
	}
	return nil
}
