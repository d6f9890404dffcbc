package mongo

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Changes returns one page of the change feed: users, deleted or not, whose
// updatedAt is within [f.Since, f.Until], oldest change first (updatedAt,
// then _id), after the cursor f.After. NextCursor is always set: on the
// last page it is where the next poll starts. A malformed cursor wraps
// models.ErrInvalid.
//
// The {updatedAt: 1, _id: 1} index answers it, walked in windows of
// updatedAt from the cursor up (see window.go): a client catching up from
// long ago costs an engine that sorts every match about a page per page.
func (u *Users) Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error) {
	filter, next, err := changesFilter(f)
	if err != nil {
		return models.UserPage{}, err
	}
	from := filter[0].Value.(bson.D)[0].Value.(time.Time)
	plan := windowPlan{start: timeKey(from), end: timeKey(f.Until.UTC()) + 1, width: defaultLogWidth}
	const kind = "feed"
	if d, ok := u.density.get(kind); ok {
		plan.width = firstWidth(f.Limit+1, d, math.MaxUint64)
	}
	docs, _, err := walkWindows(&plan, f.Limit+1, nil, func(w window, limit int) ([]userDoc, error) {
		cur, err := u.coll.Find(ctx, changesWindowFilter(filter, w), options.Find().
			SetSort(changesOrder).
			SetLimit(int64(limit)))
		if err != nil {
			return nil, translate(err)
		}
		var docs []userDoc
		if err := cur.All(ctx, &docs); err != nil {
			return nil, translate(err)
		}
		return docs, nil
	})
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list changed users: %w", err)
	}
	reach := plan.end
	if len(docs) > f.Limit {
		reach = timeKey(docs[len(docs)-1].UpdatedAt)
	}
	u.density.note(kind, len(docs), max(covered(plan.start, reach, false), 1))
	if len(docs) > f.Limit {
		docs = docs[:f.Limit]
	}
	page := models.UserPage{Users: make([]models.User, 0, len(docs))}
	for _, d := range docs {
		m, err := d.model()
		if err != nil {
			return models.UserPage{}, err
		}
		page.Users = append(page.Users, m)
		next = fmt.Sprintf("%d_%s", d.UpdatedAt.UnixMilli(), d.ID.Hex())
	}
	page.NextCursor = next
	return page, nil
}

// changesOrder is the change feed's order, which the updatedAt_1__id_1
// index holds.
var changesOrder = bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}

// changesWindowFilter is filter (of changesFilter) within window w of
// updatedAt.
func changesWindowFilter(filter bson.D, w window) bson.D {
	r := filter[0].Value.(bson.D)
	from := r[0].Value.(time.Time)
	r = slices.Clone(r)
	if !w.noLo && keyTime(w.lo).After(from) {
		r[0].Value = keyTime(w.lo)
	}
	if !w.noHi {
		r = append(r, bson.E{Key: "$lt", Value: keyTime(w.hi)})
	}
	return append(bson.D{{Key: "updatedAt", Value: r}}, filter[1:]...)
}

// changesFilter is the filter of one page of the change feed, and the
// cursor of an empty page. Its first element is the updatedAt range, with
// $gte first.
func changesFilter(f models.ChangeFilter) (filter bson.D, next string, err error) {
	// Stored times have millisecond precision: Since rounded up to the
	// millisecond selects the same documents.
	since := f.Since.UTC().Add(time.Millisecond - time.Nanosecond).Truncate(time.Millisecond)
	next = fmt.Sprintf("%d_%s", since.UnixMilli(), bson.ObjectID{}.Hex())
	from := since
	var after bson.D
	if f.After != "" {
		at, id, err := parseEventCursor(f.After)
		if err != nil {
			return nil, "", err
		}
		next = f.After
		// updatedAt >= at bounds the index range; the $nor leaves out the
		// users of that very millisecond already listed ($nor, not $or: an
		// $or of indexed clauses invites a union of two index scans and a
		// sort in memory, as in Events.List).
		if at.After(from) {
			from = at
		}
		after = bson.D{{Key: "$nor", Value: bson.A{
			bson.D{{Key: "updatedAt", Value: at}, {Key: "_id", Value: bson.D{{Key: "$lte", Value: id}}}},
		}}}
	}
	filter = append(bson.D{{Key: "updatedAt", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lte", Value: f.Until.UTC()}}}}, after...)
	return filter, next, nil
}
