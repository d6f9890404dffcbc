package mongo

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// eventSearch is how the background work finds its events in
// user_events: the recovery sweep's due events, retention's old
// processed events, and the counts of Stats. Prepare chooses it once:
//   - driverSearch (MongoDB, and a FerretDB usersync cannot reach the
//     files of): queries through the driver and the collection's indexes;
//   - sqliteSearch (the embedded engine): the same questions in SQL on
//     the engine's own table, through SQLite indexes of its own (see
//     sqlitesearch.go), because the engine answers any filter other than
//     {_id: v} by reading and decoding every document.
//
// Both return the same events; an event is read whole only by _id.
type eventSearch interface {
	// dueStored returns up to limit stored events received before
	// stuckBefore, the oldest first (by receivedAt, then _id).
	dueStored(ctx context.Context, e *Events, stuckBefore time.Time, limit int) ([]eventDoc, error)
	// dueFailed returns up to limit events whose retryAt is at or before
	// now, the earliest first.
	dueFailed(ctx context.Context, e *Events, now time.Time, limit int) ([]eventDoc, error)
	// processedBefore returns the _id and outcome of up to limit events
	// processed before cutoff.
	processedBefore(ctx context.Context, e *Events, cutoff time.Time, limit int) ([]eventDoc, error)
	// count counts the events of one of the kinds Stats reports.
	count(ctx context.Context, e *Events, k eventCount) (int64, error)
}

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

// driverSearch asks the server, through the driver.
type driverSearch struct{}

func (driverSearch) dueStored(ctx context.Context, e *Events, stuckBefore time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, dueStoredFilter(stuckBefore), options.Find().
		SetSort(bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetLimit(int64(limit)))
}

func (driverSearch) dueFailed(ctx context.Context, e *Events, now time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, dueFailedFilter(now), options.Find().
		SetSort(bson.D{{Key: "retryAt", Value: 1}}).
		SetLimit(int64(limit)))
}

func (driverSearch) processedBefore(ctx context.Context, e *Events, cutoff time.Time, limit int) ([]eventDoc, error) {
	return e.findAll(ctx, retentionFilter(cutoff), options.Find().SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "outcome", Value: 1}}))
}

func (driverSearch) count(ctx context.Context, e *Events, k eventCount) (int64, error) {
	n, err := e.coll.CountDocuments(ctx, countFilter(k))
	if err != nil {
		return 0, translate(err)
	}
	return n, nil
}
