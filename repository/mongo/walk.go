package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// walkBatch is how many users one batch of WalkActive's cursor holds.
var walkBatch = 1000

// walkTimeout bounds a whole walk. It is one query, sorted by _id: on
// MongoDB a walk of the _id index; an engine that sorts every match sorts
// the active users once, for the whole walk, not once per batch. That
// takes longer than one operation's default deadline on a large
// collection, so the walk gets its own.
const walkTimeout = 30 * time.Minute

// WalkActive calls fn with the id of every active user whose document was
// first written (createdAt) before writtenBefore, in _id order, a batch at
// a time, and stops at fn's first error, which it returns. Users written
// while it walks may or may not be seen. Other errors wrap
// models.ErrUnavailable when the database is down.
func (u *Users) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error {
	ctx, cancel := context.WithTimeout(ctx, walkTimeout)
	defer cancel()
	cur, err := u.coll.Find(ctx, walkFilter(writtenBefore), options.Find().
		SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetBatchSize(int32(walkBatch)).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "userId", Value: 1}}))
	if err != nil {
		return fmt.Errorf("walk users: %w", translate(err))
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		var d struct {
			UserID string `bson:"userId"`
		}
		if err := cur.Decode(&d); err != nil {
			return fmt.Errorf("walk users: %w", err)
		}
		if err := fn(d.UserID); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("walk users: %w", translate(err))
	}
	return nil
}

// walkFilter selects the active users first written before writtenBefore.
func walkFilter(writtenBefore time.Time) bson.D {
	return bson.D{
		{Key: "deletedAt", Value: nil},
		{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: writtenBefore.UTC()}}},
	}
}
