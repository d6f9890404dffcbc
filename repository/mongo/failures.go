package mongo

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// failedFilter selects the failed events; sorted by eventLogOrder, it is
// a range of the status_1_receivedAt_-1__id_-1 index read in order.
var failedFilter = bson.D{{Key: "status", Value: models.StatusFailed}}

// failureFields are the fields a failure group needs of an event.
var failureFields = bson.D{
	{Key: "_id", Value: 1}, {Key: "eventId", Value: 1}, {Key: "receivedAt", Value: 1},
	{Key: "status", Value: 1}, {Key: "error", Value: 1}, {Key: "retryAt", Value: 1},
}

// FailureGroups reads at most scan (1 to models.MaxFailureScan) failed
// events, newest first, through the status index (only the fields a group
// needs), and groups them by reason.
func (e *Events) FailureGroups(ctx context.Context, scan int) (models.FailureGroups, error) {
	scan = min(max(scan, 1), models.MaxFailureScan)
	docs, err := e.findAll(ctx, failedFilter, options.Find().
		SetSort(eventLogOrder).SetLimit(int64(scan)+1).SetProjection(failureFields))
	if err != nil {
		return models.FailureGroups{}, fmt.Errorf("read failed events: %w", err)
	}
	complete := len(docs) <= scan
	failed := make([]models.Event, 0, min(len(docs), scan))
	for _, d := range docs[:min(len(docs), scan)] {
		failed = append(failed, d.model())
	}
	return models.GroupFailures(failed, complete), nil
}
