package mongo

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// Changes returns one page of the users' change feed (see changesPage):
// users, deleted or not, whose updatedAt is within [f.Since, f.Until],
// oldest change first, after the cursor f.After. NextCursor is always
// set. A malformed cursor wraps models.ErrInvalid.
func (u *Users) Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error) {
	docs, next, err := changesPage(ctx, collSource[userDoc]{u.coll}, &u.density, "users", f)
	if err != nil {
		return models.UserPage{}, err
	}
	page := models.UserPage{Users: make([]models.User, 0, len(docs)), NextCursor: next}
	for _, d := range docs {
		m, err := d.model()
		if err != nil {
			return models.UserPage{}, err
		}
		page.Users = append(page.Users, m)
	}
	return page, nil
}

// changesOrder is the change feed's order, which the updatedAt_1__id_1
// index holds.
var changesOrder = bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}

// changesWindowFilter is filter (of changesFilter) within window w of
// updatedAt, with one bound a side (two bounds on one side of a field
// lead the DocumentDB engines to scan the index between the wider ones).
func changesWindowFilter(filter bson.D, w window) bson.D {
	r := filter[0].Value.(bson.D)
	lo, until := r[0].Value.(time.Time), r[1].Value.(time.Time)
	if !w.noLo && keyTime(w.lo).After(lo) {
		lo = keyTime(w.lo)
	}
	upper := bson.E{Key: "$lte", Value: until}
	if !w.noHi && !keyTime(w.hi).After(until) {
		upper = bson.E{Key: "$lt", Value: keyTime(w.hi)}
	}
	return append(bson.D{{Key: "updatedAt", Value: bson.D{{Key: "$gte", Value: lo}, upper}}}, filter[1:]...)
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
