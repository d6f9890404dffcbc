package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// defaultWalkBatch is how many documents one batch of a WalkActive's
// cursor holds (Options.WalkBatch).
const defaultWalkBatch = 1000

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
	return walk(ctx, u.coll, u.walkBatch, "users", "userId", writtenBefore, fn)
}

// WalkActive calls fn with the id of every active organization first
// written before writtenBefore, as Users.WalkActive does users.
func (o *Organizations) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(orgID string) error) error {
	return walk(ctx, o.coll, o.walkBatch, "organizations", "organizationId", writtenBefore, fn)
}

// WalkActive calls fn with the id of every membership that is not a
// tombstone and was first written before writtenBefore, as
// Users.WalkActive does users.
func (mb *Memberships) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(membershipID string) error) error {
	return walk(ctx, mb.coll, mb.walkBatch, "memberships", "membershipId", writtenBefore, fn)
}

// walk calls fn with the field (a string) of every document of coll that
// walkFilter selects, in _id order (one query, walkTimeout).
func walk(ctx context.Context, coll *mongo.Collection, batch int, what, field string, writtenBefore time.Time, fn func(id string) error) error {
	ctx, cancel := context.WithTimeout(ctx, walkTimeout)
	defer cancel()
	cur, err := coll.Find(ctx, walkFilter(writtenBefore), options.Find().
		SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetBatchSize(int32(batch)).
		SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: field, Value: 1}}))
	if err != nil {
		return fmt.Errorf("walk %s: %w", what, translate(err))
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		id, ok := cur.Current.Lookup(field).StringValueOK()
		if !ok {
			return fmt.Errorf("walk %s: a document without a string %s", what, field)
		}
		if err := fn(id); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("walk %s: %w", what, translate(err))
	}
	return nil
}

// walkFilter selects the active users, organizations or memberships first
// written before writtenBefore.
func walkFilter(writtenBefore time.Time) bson.D {
	return bson.D{
		{Key: "deletedAt", Value: nil},
		{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: writtenBefore.UTC()}}},
	}
}
