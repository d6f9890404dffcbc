package mongo

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// counters are the counts of processed events per outcome, kept so that
// stats never count processed events, which are nearly all events. Each
// outcome's count is spread over counterStripes documents of the counters
// collection, "outcome:<outcome>:<stripe>" → {n}, so that concurrent
// increments do not all queue on one document; a count is the sum of its
// stripes.
//
// A counter moves with the write that makes an event processed (+1) and
// with retention's deletes (-n), in a second write: a crash between the
// two leaves it off by one event. Stats never reports a count below 0.
type counters struct {
	coll *mongo.Collection
}

const counterStripes = 16

const outcomePrefix = "outcome:"

func outcomeCounterID(o models.Outcome, stripe uint32) string {
	return fmt.Sprintf("%s%s:%02d", outcomePrefix, o, stripe)
}

// add adds n to the count of outcome, on the stripe of event id.
func (c *counters) add(ctx context.Context, outcome models.Outcome, id bson.ObjectID, n int64) error {
	if n == 0 {
		return nil
	}
	h := fnv.New32a()
	_, _ = h.Write(id[:])
	key := outcomeCounterID(outcome, h.Sum32()%counterStripes)
	_, err := c.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: key}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: n}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("count %s events: %w", outcome, translate(err))
	}
	return nil
}

// outcomes returns the count of processed events per outcome: one read
// of at most counterStripes documents per outcome, by an _id range.
func (c *counters) outcomes(ctx context.Context) (map[models.Outcome]int64, error) {
	cur, err := c.coll.Find(ctx, outcomeCountersFilter)
	if err != nil {
		return nil, fmt.Errorf("read event counters: %w", translate(err))
	}
	var docs []struct {
		ID string `bson:"_id"`
		N  int64  `bson:"n"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read event counters: %w", translate(err))
	}
	by := map[models.Outcome]int64{}
	for _, d := range docs {
		rest := strings.TrimPrefix(d.ID, outcomePrefix)
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			by[models.Outcome(rest[:i])] += d.N
		}
	}
	return by, nil
}

// outcomeCountersFilter selects the outcome counters: the _id range
// "outcome:" ≤ _id < "outcome;" (";" follows ":").
var outcomeCountersFilter = bson.D{{Key: "_id", Value: bson.D{
	{Key: "$gte", Value: outcomePrefix}, {Key: "$lt", Value: "outcome;"},
}}}
