package mongo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// counters are the counts of processed events per outcome, kept so that
// stats never count processed events, which are nearly all events.
//
// The write that makes an event processed also flags it uncounted (the
// field uncounted holds its outcome; a sparse index holds only flagged
// events): counting costs the webhook path no round trip of its own, and
// a processed event is always either flagged or counted. A fold moves
// flagged events into the counter documents of the counters collection,
// a batch at a time, exactly once (see fold); Stats and retention fold
// before they count or delete. A count is the counter documents' sum plus
// the events still flagged.
//
// The counter documents of an outcome are "outcome:<outcome>:<stripe>"
// → {n} (written by earlier versions, by seeds, migrations and
// retention's deletes: -n) and "outcome:<outcome>:fold" → {n, pending},
// written by folds. Retention's delete and its decrement are two writes:
// a crash between them leaves the count too high by the deleted events.
// Stats never reports a count below 0.
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
	if _, err := incCreating(ctx, c.coll, key, bson.D{{Key: "n", Value: n}}, nil); err != nil {
		return fmt.Errorf("count %s events: %w", outcome, err)
	}
	return nil
}

// outcomes returns the count of processed events per outcome that the
// counters hold, and the events of folds still pending: one read of at
// most counterStripes+1 documents per outcome, by an _id range.
func (c *counters) outcomes(ctx context.Context) (counted map[models.Outcome]int64, pending map[models.Outcome][]bson.ObjectID, err error) {
	cur, err := c.coll.Find(ctx, outcomeCountersFilter)
	if err != nil {
		return nil, nil, fmt.Errorf("read event counters: %w", translate(err))
	}
	var docs []struct {
		ID      string          `bson:"_id"`
		N       int64           `bson:"n"`
		Pending []bson.ObjectID `bson:"pending"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, nil, fmt.Errorf("read event counters: %w", translate(err))
	}
	by := map[models.Outcome]int64{}
	pending = map[models.Outcome][]bson.ObjectID{}
	for _, d := range docs {
		rest := strings.TrimPrefix(d.ID, outcomePrefix)
		if i := strings.LastIndex(rest, ":"); i >= 0 {
			by[models.Outcome(rest[:i])] += d.N
			pending[models.Outcome(rest[:i])] = append(pending[models.Outcome(rest[:i])], d.Pending...)
		}
	}
	return by, pending, nil
}

// outcomeCountersFilter selects the outcome counters: the _id range
// "outcome:" ≤ _id < "outcome;" (";" follows ":").
var outcomeCountersFilter = bson.D{{Key: "_id", Value: bson.D{
	{Key: "$gte", Value: outcomePrefix}, {Key: "$lt", Value: "outcome;"},
}}}

// foldBatch is how many flagged events one fold moves into the counters.
const foldBatch = 1000

// foldCounterID is the counter document that folds of outcome write.
func foldCounterID(o models.Outcome) string { return outcomePrefix + string(o) + ":fold" }

// foldDoc is the fold counter of one outcome. Pending lists the events a
// fold has counted in N and is still unflagging: a fold that stopped
// half-way (a crash) is finished by the next one.
type foldDoc struct {
	N       int64           `bson:"n"`
	Pending []bson.ObjectID `bson:"pending,omitempty"`
}

// outcomes are the outcomes counted, as events store them: every outcome,
// and deleted_user, which earlier versions wrote (flagged and counted
// under that name; Stats counts them as deleted).
var outcomes = append(slices.Clone(models.Outcomes), models.OutcomeDeletedUserLegacy)

// fold moves every event flagged uncounted into the counters, a batch at
// a time. Each batch is counted once: the fold counter takes the batch's
// size and its ids (pending) in one conditional write, which no other
// fold can make while a batch is pending; then the batch's events are
// unflagged, and pending is cleared. Stats counts a pending event once
// (see pendingFlagged). Concurrent folds (several instances) are safe:
// one wins each batch, the others finish it or leave it.
func (e *Events) fold(ctx context.Context) error {
	for _, o := range outcomes {
		for {
			n, err := e.foldBatch(ctx, o)
			if err != nil {
				return fmt.Errorf("count %s events: %w", o, err)
			}
			if n < foldBatch {
				break
			}
		}
	}
	return nil
}

// foldBatch folds up to foldBatch events of outcome o and says how many
// it found.
func (e *Events) foldBatch(ctx context.Context, o models.Outcome) (int, error) {
	c := e.counters.coll
	var fd foldDoc
	err := translate(c.FindOne(ctx, bson.D{{Key: "_id", Value: foldCounterID(o)}}).Decode(&fd))
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return 0, err
	}
	if len(fd.Pending) > 0 {
		if err := e.finishFold(ctx, o, fd.Pending); err != nil {
			return 0, err
		}
	}
	docs, err := e.findAll(ctx, bson.D{{Key: "uncounted", Value: o}}, options.Find().
		SetProjection(bson.D{{Key: "_id", Value: 1}}).SetLimit(foldBatch))
	if err != nil || len(docs) == 0 {
		return 0, err
	}
	ids := make([]bson.ObjectID, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	_, err = updateOne(ctx, c, bson.D{{Key: "_id", Value: foldCounterID(o)}, {Key: "pending", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(len(ids))}}}, {Key: "$set", Value: bson.D{{Key: "pending", Value: ids}}}},
		options.UpdateOne().SetUpsert(true))
	if err = translate(err); errors.Is(err, errDuplicate) {
		return 0, nil // another fold has a batch pending: it finishes it
	}
	if err != nil {
		return 0, err
	}
	return len(ids), e.finishFold(ctx, o, ids)
}

// finishFold unflags the events of a pending batch, then clears it.
func (e *Events) finishFold(ctx context.Context, o models.Outcome, ids []bson.ObjectID) error {
	_, err := updateMany(ctx, e.primary, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "uncounted", Value: o}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "uncounted", Value: ""}}}})
	if err != nil {
		return translate(err)
	}
	_, err = updateOne(ctx, e.counters.coll, bson.D{{Key: "_id", Value: foldCounterID(o)}, {Key: "pending", Value: ids}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "pending", Value: ""}}}})
	return translate(err)
}

// uncountedFilter selects the processed events of outcome o that no
// counter counts yet, through the sparse uncounted_1 index.
func uncountedFilter(o models.Outcome) bson.D { return bson.D{{Key: "uncounted", Value: o}} }
