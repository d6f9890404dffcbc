package mongo

import (
	"context"
	"fmt"
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
// On MongoDB the {updatedAt: 1, _id: 1} index answers it; the embedded
// engine reads the whole collection.
func (u *Users) Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error) {
	filter, next, err := changesFilter(f)
	if err != nil {
		return models.UserPage{}, err
	}
	cur, err := u.coll.Find(ctx, filter, options.Find().
		SetSort(changesOrder).
		SetLimit(int64(f.Limit)+1))
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list changed users: %w", translate(err))
	}
	var docs []userDoc
	if err := cur.All(ctx, &docs); err != nil {
		return models.UserPage{}, fmt.Errorf("list changed users: %w", translate(err))
	}
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

// changesFilter is the filter of one page of the change feed, and the
// cursor of an empty page.
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
