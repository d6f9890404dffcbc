package repository

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// walkBatch is how many users one read of WalkActive returns.
var walkBatch = 1000

// WalkActive calls fn with the id of every active user whose document was
// first written (createdAt) before writtenBefore, in _id order, a batch at
// a time, and stops at fn's first error, which it returns. Users written
// while it walks may or may not be seen. Other errors wrap
// models.ErrUnavailable when the database is down.
func (u *Users) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error {
	filter := bson.D{
		{Key: "deletedAt", Value: nil},
		{Key: "createdAt", Value: bson.D{{Key: "$lt", Value: writtenBefore.UTC()}}},
	}
	var after *bson.RawValue
	for {
		f := filter
		if after != nil {
			f = append(bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: *after}}}}, filter...)
		}
		cur, err := u.coll.Find(ctx, f, options.Find().
			SetSort(bson.D{{Key: "_id", Value: 1}}).
			SetLimit(int64(walkBatch)).
			SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "userId", Value: 1}}))
		if err != nil {
			return fmt.Errorf("walk users: %w", translate(err))
		}
		var docs []struct {
			ID     bson.RawValue `bson:"_id"`
			UserID string        `bson:"userId"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return fmt.Errorf("walk users: %w", translate(err))
		}
		for _, d := range docs {
			if err := fn(d.UserID); err != nil {
				return err
			}
		}
		if len(docs) < walkBatch {
			return nil
		}
		after = &docs[len(docs)-1].ID
	}
}
