package mongo

import (
	"context"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// unprocessedFilter selects the stored and failed events, through the
// status index: the $match of countUnprocessed.
var unprocessedFilter = bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{models.StatusStored, models.StatusFailed}}}}}

// countUnprocessed counts the stored and failed events, in all and per
// kind, and those failed for good (no retryAt): one aggregation that reads
// them through the status index and groups them by status, type and
// whether a retry is to come.
func (e *Events) countUnprocessed(ctx context.Context) (models.EventStats, error) {
	st := models.NewEventStats()
	cur, err := e.coll.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$match", Value: unprocessedFilter}},
		{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{
				{Key: "status", Value: "$status"}, {Key: "type", Value: "$type"},
				// A date is true, a missing or null retryAt false.
				{Key: "retry", Value: bson.D{{Key: "$cond", Value: bson.A{
					bson.D{{Key: "$ifNull", Value: bson.A{"$retryAt", false}}}, true, false}}}},
			}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
		}}},
	})
	if err != nil {
		return st, translate(err)
	}
	var groups []struct {
		ID struct {
			Status models.EventStatus `bson:"status"`
			Type   string             `bson:"type"`
			Retry  bool               `bson:"retry"`
		} `bson:"_id"`
		N int64 `bson:"n"`
	}
	if err := cur.All(ctx, &groups); err != nil {
		return st, translate(err)
	}
	for _, g := range groups {
		st.AddUnprocessed(g.ID.Status, models.StoredKindOf(g.ID.Type), g.ID.Retry, g.N)
	}
	return st, nil
}

// dueStored returns up to limit stored events received before
// stuckBefore, the oldest first (by receivedAt, then _id), walking
// receivedAt up from the oldest event in windows (see window.go).
func (e *Events) dueStored(ctx context.Context, stuckBefore time.Time, limit int) ([]eventDoc, error) {
	return e.walkDue(ctx, "due:stored", timeKey(stuckBefore), limit, func(w window, limit int) ([]eventDoc, error) {
		return e.findAll(ctx, dueStoredWindow(stuckBefore, w), options.Find().
			SetSort(bson.D{{Key: "receivedAt", Value: 1}, {Key: "_id", Value: 1}}).
			SetLimit(int64(limit)))
	}, func(d eventDoc) time.Time { return d.ReceivedAt })
}

// dueFailed returns up to limit events whose retryAt is at or before now,
// the earliest first, walking retryAt up in windows from the oldest event
// (a retry comes after its event was received).
func (e *Events) dueFailed(ctx context.Context, now time.Time, limit int) ([]eventDoc, error) {
	return e.walkDue(ctx, "due:failed", timeKey(now)+1, limit, func(w window, limit int) ([]eventDoc, error) {
		return e.findAll(ctx, dueFailedWindow(now, w), options.Find().
			SetSort(bson.D{{Key: "retryAt", Value: 1}}).
			SetLimit(int64(limit)))
	}, func(d eventDoc) time.Time { return *d.RetryAt })
}

// walkDue walks up to end in windows from the oldest event, the first
// window unbounded below. While a kind of search finds little, its first
// window covers everything: one query, as small as what is due.
func (e *Events) walkDue(ctx context.Context, kind string, end uint64, limit int,
	query func(window, int) ([]eventDoc, error), key func(eventDoc) time.Time) ([]eventDoc, error) {
	plan := windowPlan{end: end, width: math.MaxUint64, openStart: true}
	if d, ok := e.density.get(kind); ok {
		plan.width = firstWidth(limit, d, math.MaxUint64)
	}
	if plan.width < math.MaxUint64 {
		oldest, ok, err := e.oldestReceived(ctx)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, nil
		}
		plan.start = timeKey(oldest)
	}
	docs, _, err := walkWindows(&plan, limit, nil, query)
	if err != nil {
		return nil, err
	}
	reach := end
	if len(docs) >= limit && limit > 0 {
		reach = timeKey(key(docs[len(docs)-1]))
	}
	if plan.start == 0 {
		plan.start = reach // no start: the density of what one query found
		if n := len(docs); n > 0 {
			plan.start = timeKey(key(docs[0]))
		}
	}
	e.density.note(kind, len(docs), max(covered(plan.start, reach, false), 1))
	return docs, nil
}

// dueStoredWindow is dueStoredFilter within window w of receivedAt.
func dueStoredWindow(stuckBefore time.Time, w window) bson.D {
	r := bson.D{{Key: "$lt", Value: stuckBefore}}
	if !w.noLo {
		r = append(r, bson.E{Key: "$gte", Value: keyTime(w.lo)})
	}
	if !w.noHi && keyTime(w.hi).Before(stuckBefore) {
		r[0].Value = keyTime(w.hi)
	}
	return bson.D{{Key: "status", Value: models.StatusStored}, {Key: "receivedAt", Value: r}}
}

// dueFailedWindow is dueFailedFilter within window w of retryAt.
func dueFailedWindow(now time.Time, w window) bson.D {
	r := bson.D{}
	if !w.noHi && !keyTime(w.hi).After(now) {
		r = append(r, bson.E{Key: "$lt", Value: keyTime(w.hi)})
	} else {
		r = append(r, bson.E{Key: "$lte", Value: now})
	}
	if !w.noLo {
		r = append(r, bson.E{Key: "$gte", Value: keyTime(w.lo)})
	}
	return bson.D{{Key: "retryAt", Value: r}}
}

// processedBefore returns the _id and outcome of up to limit events
// processed before cutoff that the counters count, and whose outbox entry
// (outbound.go) has been fanned out: an entry is set only by the mark,
// so one found without it never gets one. The ones not counted
// yet (fold has just counted all but those processed meanwhile) are left
// out here, not by the filter: a condition {uncounted: null} leads the
// DocumentDB engines to read the sparse uncounted_1 index for every event
// without the field (2 s at 270k events, against 7 ms through
// processedAt_1).
func (e *Events) processedBefore(ctx context.Context, cutoff time.Time, limit int) ([]eventDoc, error) {
	cur, err := e.coll.Find(ctx, retentionFilter(cutoff), options.Find().SetLimit(int64(limit)).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "outcome", Value: 1}, {Key: "uncounted", Value: 1}, {Key: "outboxSeq", Value: 1}}))
	if err != nil {
		return nil, translate(err)
	}
	var docs []struct {
		ID        bson.ObjectID  `bson:"_id"`
		Outcome   string         `bson:"outcome"`
		Uncounted *string        `bson:"uncounted"`
		OutboxSeq *bson.ObjectID `bson:"outboxSeq"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	out := make([]eventDoc, 0, len(docs))
	for _, d := range docs {
		if d.Uncounted == nil && d.OutboxSeq == nil {
			out = append(out, eventDoc{ID: d.ID, Outcome: d.Outcome})
		}
	}
	return out, nil
}
