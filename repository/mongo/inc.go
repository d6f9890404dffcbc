package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
)

// incCreating applies inc (a $inc document) to the document of coll with
// _id id, creating the document first (with the fields of onCreate) when
// there is none, and reports whether this call created it.
//
// Not one upsert: of concurrent $inc upserts of a new _id, the DocumentDB
// engines (FerretDB 2.5 on DocumentDB 0.106) may report two as inserted
// and keep only one's count (measured: 8 writers adding 1 ten times each
// to a new document counted 79). So the count is only ever added by an
// update of an existing document, which every engine applies atomically;
// the document is created by an insert, of which a unique _id lets one
// through. Once the document exists, as it does for all but the first add,
// this is one round trip.
func incCreating(ctx context.Context, coll *mongo.Collection, id any, inc, onCreate bson.D) (created bool, err error) {
	for try := range 2 {
		res, err := updateOne(ctx, coll, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$inc", Value: inc}})
		if err != nil {
			return created, translate(err)
		}
		if res.MatchedCount > 0 {
			return created, nil
		}
		if try > 0 {
			break
		}
		doc := append(bson.D{{Key: "_id", Value: id}}, onCreate...)
		switch err := translate(insertOne(ctx, coll, doc)); {
		case err == nil:
			created = true
		case !errors.Is(err, errDuplicate): // a duplicate: created by another add meanwhile
			return false, err
		}
	}
	return created, fmt.Errorf("document %v vanished while counting: %w", id, models.ErrRetryLater)
}
