package mongo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// ActivityCollection holds the per-minute and per-hour counts of the
// console's charts: one document per bucket,
//
//	{_id: "m:<start, Unix seconds, 12 digits>", start: <date>, n: {<kind>: <count>, ...}}
//
// ("h:" for an hour), so that the buckets of a time range are one range
// of _id, whatever the number of events, and the collection needs no
// index but _id's. When a write starts a new bucket, the buckets past
// their retention are deleted: the collection holds a few thousand
// documents at most.
const ActivityCollection = "event_activity"

// Activity is the activity collection.
type Activity struct {
	coll *mongo.Collection
}

type activityDoc struct {
	ID    string           `bson:"_id"`
	Start time.Time        `bson:"start"`
	N     map[string]int64 `bson:"n"`
}

// activityPrefix is the _id prefix of the buckets of size.
func activityPrefix(size time.Duration) (string, error) {
	switch size {
	case models.ActivityMinute:
		return "m:", nil
	case models.ActivityHour:
		return "h:", nil
	}
	return "", fmt.Errorf("%w: activity bucket size %s (a minute or an hour)", models.ErrInvalid, size)
}

func activityID(prefix string, start time.Time) string {
	return fmt.Sprintf("%s%012d", prefix, start.Unix())
}

// Add adds n to kind in the minute bucket and in the hour bucket that
// hold at: an upsert by _id with $inc each, which the server applies
// atomically, so that adds of several instances all count. When an upsert
// creates its bucket, the buckets of that size past their retention are
// deleted by an _id range.
func (a *Activity) Add(ctx context.Context, at time.Time, kind string, n int64) error {
	if !models.ValidActivityKind(kind) {
		return fmt.Errorf("%w: activity kind %s", models.ErrInvalid, models.Quote(kind))
	}
	if n == 0 {
		return nil
	}
	for _, b := range []struct{ size, keep time.Duration }{
		{models.ActivityMinute, models.ActivityMinuteRetention},
		{models.ActivityHour, models.ActivityHourRetention},
	} {
		prefix, _ := activityPrefix(b.size)
		start := at.UTC().Truncate(b.size)
		created, err := a.addToBucket(ctx, activityID(prefix, start), start, kind, n)
		if err != nil {
			return fmt.Errorf("count %s activity: %w", kind, err)
		}
		if created {
			if _, err := a.coll.DeleteMany(ctx, activityPruneFilter(prefix, start.Add(-b.keep))); err != nil {
				return fmt.Errorf("delete old activity: %w", translate(err))
			}
		}
	}
	return nil
}

// addToBucket adds n to kind in the bucket id, creating it, and reports
// whether it did create it (see incCreating: not an upsert).
func (a *Activity) addToBucket(ctx context.Context, id string, start time.Time, kind string, n int64) (bool, error) {
	return incCreating(ctx, a.coll, id, bson.D{{Key: "n." + kind, Value: n}}, bson.D{{Key: "start", Value: start}})
}

// Buckets returns the buckets of size that start in [from, to), oldest
// first: one range of _id. Its error wraps models.ErrInvalid for a size
// other than a minute or an hour.
func (a *Activity) Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error) {
	prefix, err := activityPrefix(size)
	if err != nil {
		return nil, err
	}
	cur, err := a.coll.Find(ctx, activityRangeFilter(prefix, from, to), options.Find().SetSort(activityOrder))
	if err != nil {
		return nil, fmt.Errorf("read activity: %w", translate(err))
	}
	var docs []activityDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read activity: %w", translate(err))
	}
	out := make([]models.ActivityBucket, 0, len(docs))
	for _, d := range docs {
		sec, err := strconv.ParseInt(strings.TrimPrefix(d.ID, prefix), 10, 64)
		if err != nil {
			continue // not a bucket usersync wrote
		}
		counts := make(map[string]int64, len(d.N))
		for k, n := range d.N {
			counts[models.ReadActivityKind(k)] += n // an earlier version's deleted_user is deleted
		}
		out = append(out, models.ActivityBucket{Start: time.Unix(sec, 0).UTC(), Counts: counts})
	}
	return out, nil
}

var activityOrder = bson.D{{Key: "_id", Value: 1}}

// activityRangeFilter selects the buckets of prefix that start in
// [from, to): a range of _id. A start that is not a whole second is
// rounded up, as no bucket starts within a second.
func activityRangeFilter(prefix string, from, to time.Time) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{
		{Key: "$gte", Value: activityID(prefix, ceilSecond(from))}, {Key: "$lt", Value: activityID(prefix, ceilSecond(to))},
	}}}
}

// activityPruneFilter selects the buckets of prefix that start before
// cutoff: a range of _id.
func activityPruneFilter(prefix string, cutoff time.Time) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: activityID(prefix, cutoff)}}}}
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}
