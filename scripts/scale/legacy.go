package main

import (
	"context"
	"crypto/sha256"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// insertUsers writes users shaped as the repository writes them today.
func (b *bench) insertUsers(ctx context.Context, changes []models.Change, now time.Time) error {
	docs := make([]any, len(changes))
	for i, ch := range changes {
		d := bson.D{{Key: "userId", Value: ch.UserID}}
		if ch.Email != "" {
			d = append(d, bson.E{Key: "email", Value: ch.Email})
		}
		docs[i] = append(d, bson.D{
			{Key: "displayName", Value: ch.DisplayName}, {Key: "metadata", Value: bson.D{}},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "deletedAt", Value: nil},
			{Key: "sourceUpdatedAt", Value: ch.SourceTime}, {Key: "lastEventId", Value: ch.EventID},
		}...)
	}
	_, err := b.store.Database().Collection(repository.UsersCollection).InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	return err
}

// insertEvents writes events shaped as the repository writes them today.
func (b *bench) insertEvents(ctx context.Context, evs []models.Event) error {
	docs := make([]any, len(evs))
	for i, ev := range evs {
		d := bson.D{
			{Key: "_id", Value: docID(ev.EventID)},
			{Key: "eventId", Value: ev.EventID}, {Key: "type", Value: ev.Type},
			{Key: "eventType", Value: ev.EventType}, {Key: "userId", Value: ev.UserID},
		}
		if !b.ferretDB {
			var payload bson.D
			_ = bson.UnmarshalExtJSON(ev.RawBody, false, &payload)
			d = append(d, bson.E{Key: "payload", Value: payload})
		}
		d = append(d, bson.D{
			{Key: "rawBody", Value: string(ev.RawBody)}, {Key: "source", Value: ev.Source},
			{Key: "signature", Value: ev.Signature}, {Key: "signatureValid", Value: ev.SignatureValid},
			{Key: "sourceTimestamp", Value: ev.SourceTimestamp}, {Key: "receivedAt", Value: ev.ReceivedAt},
		}...)
		if ev.ProcessedAt != nil {
			d = append(d, bson.E{Key: "processedAt", Value: *ev.ProcessedAt})
		}
		d = append(d, bson.E{Key: "status", Value: ev.Status})
		if ev.Outcome != "" {
			d = append(d, bson.E{Key: "outcome", Value: ev.Outcome})
		}
		d = append(d, bson.E{Key: "attempts", Value: ev.Attempts})
		if ev.Error != "" {
			d = append(d, bson.E{Key: "error", Value: ev.Error})
		}
		if ev.RetryAt != nil {
			d = append(d, bson.E{Key: "retryAt", Value: *ev.RetryAt})
		}
		docs[i] = d
	}
	_, err := b.store.Database().Collection(repository.EventsCollection).InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	return err
}

// docID is the repository's document id of an event with an eventId.
func docID(eventID string) bson.ObjectID {
	sum := sha256.Sum256([]byte(eventID))
	var id bson.ObjectID
	copy(id[:], sum[:len(id)])
	return id
}
