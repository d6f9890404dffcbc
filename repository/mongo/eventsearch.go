package mongo

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// eventCount is a kind of event that Stats counts.
type eventCount int

const (
	countStored eventCount = iota // status stored
	countFailed                   // status failed
	countGaveUp                   // status failed, no retryAt: no retries left
)

// countFilter is the filter of each eventCount.
func countFilter(k eventCount) bson.D {
	switch k {
	case countStored:
		return bson.D{{Key: "status", Value: models.StatusStored}}
	case countFailed:
		return bson.D{{Key: "status", Value: models.StatusFailed}}
	default:
		return bson.D{{Key: "status", Value: models.StatusFailed}, {Key: "retryAt", Value: nil}}
	}
}

// dueStored returns up to limit stored events received before
// stuckBefore, the oldest first (by receivedAt, then _id).
func (e *Events) dueStored(ctx context.Context, stuckBefore time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, dueStoredFilter(stuckBefore), options.Find().
		SetSort(bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(int64(limit)))
}

// dueFailed returns up to limit events whose retryAt is at or before now,
// the earliest first.
func (e *Events) dueFailed(ctx context.Context, now time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, dueFailedFilter(now), options.Find().
		SetSort(bson.D{{Key: "retryAt", Value: 1}}).
		SetLimit(int64(limit)))
}

// processedBefore returns the _id and outcome of up to limit events
// processed before cutoff.
func (e *Events) processedBefore(ctx context.Context, cutoff time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, retentionFilter(cutoff), options.Find().SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "outcome", Value: 1}}))
}

// count counts the events of one of the kinds Stats reports.
func (e *Events) count(ctx context.Context, k eventCount) (int64, error) {
	n, err := e.coll.CountDocuments(ctx, countFilter(k))
	if err != nil {
		return 0, translate(err)
	}
	return n, nil
}
