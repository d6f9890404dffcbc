package mongo

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Pages of users, organizations and memberships, and their change feeds,
// are bounded the same way (see window.go): a page in _id order walks
// the _id space in windows, a change feed walks updatedAt. Their _ids are
// derived from their Clerk ids (docID), so they are spread evenly over
// the _id space.

// pageDoc is a document of users, organizations or memberships as their
// pages read it.
type pageDoc interface {
	pageID() bson.ObjectID
	changedAt() time.Time // updatedAt: the change feed's key
}

func (d userDoc) pageID() bson.ObjectID       { return d.ID }
func (d userDoc) changedAt() time.Time        { return d.UpdatedAt }
func (d orgDoc) pageID() bson.ObjectID        { return d.ID }
func (d orgDoc) changedAt() time.Time         { return d.UpdatedAt }
func (d membershipDoc) pageID() bson.ObjectID { return d.ID }
func (d membershipDoc) changedAt() time.Time  { return d.UpdatedAt }

// source is what a page reads of a collection: the first limit matches
// of filter in the order sort (nil: any), and an estimate of how many
// documents it holds.
type source[T any] interface {
	find(ctx context.Context, filter, sort bson.D, limit int) ([]T, error)
	estimate(ctx context.Context) (int64, error)
}

// collSource reads documents of type T from coll.
type collSource[T any] struct{ coll *mongo.Collection }

func (c collSource[T]) find(ctx context.Context, filter, sort bson.D, limit int) ([]T, error) {
	opts := options.Find().SetLimit(int64(limit))
	if sort != nil {
		opts.SetSort(sort)
	}
	return findDocs[T](ctx, c.coll, filter, opts)
}

func (c collSource[T]) estimate(ctx context.Context) (int64, error) {
	n, err := c.coll.EstimatedDocumentCount(ctx)
	return n, translate(err)
}

// findDocs returns every document of coll that filter selects, decoded
// as T.
func findDocs[T any](ctx context.Context, coll *mongo.Collection, filter bson.D, opts *options.FindOptionsBuilder) ([]T, error) {
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, translate(err)
	}
	var docs []T
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err)
	}
	return docs, nil
}

// idOrder is the order of the pages of users, organizations and
// memberships.
var idOrder = bson.D{{Key: "_id", Value: 1}}

// allKeys is the window of a query that is not walked: every key.
var allKeys = window{noLo: true, noHi: true, last: true}

// withIDRange is filter of a page after the cursor after (an _id in hex;
// "" for the first page), within window w of _id. A malformed cursor
// wraps models.ErrInvalid.
//
// One bound a side: the cursor or the window's lower end, whichever is
// higher. (Two lower bounds on one field, $gt and $gte, lead the
// DocumentDB engines to scan the index from the lower of them.)
func withIDRange(filter bson.D, after string, w window) (bson.D, error) {
	id := w.idRange()
	if after != "" {
		oid, err := bson.ObjectIDFromHex(after)
		if err != nil {
			return nil, models.ErrBadCursor()
		}
		if lo := keyID(w.lo); w.noLo || bytes.Compare(lo[:], oid[:]) <= 0 {
			id = slices.DeleteFunc(id, func(e bson.E) bool { return e.Key == "$gte" })
			id = append(bson.D{{Key: "$gt", Value: oid}}, id...)
		}
	}
	if len(id) > 0 {
		filter = append(filter, bson.E{Key: "_id", Value: id})
	}
	return filter, nil
}

// walkIDs returns the first want documents of src after the cursor after
// (an _id in hex; "" for the first page) in _id order, walking the _id
// space up from the cursor in windows: filter(w) selects the page's
// documents within window w (withIDRange). A window holds about its share
// of the _id space of the matches; the first walk of a kind sizes its
// first window from the estimated number of documents (every one a
// match: the narrowest guess), the next ones from the density the last
// walk of that kind met.
func walkIDs[T pageDoc](ctx context.Context, src source[T], d *densities, kind, after string, want int,
	filter func(window) (bson.D, error)) ([]T, error) {
	plan := windowPlan{end: math.MaxUint64}
	if after != "" {
		oid, err := bson.ObjectIDFromHex(after)
		if err != nil {
			return nil, models.ErrBadCursor()
		}
		plan.start = idKey(oid)
	}
	density, ok := d.get(kind)
	if !ok {
		n, err := src.estimate(ctx)
		if err != nil {
			return nil, fmt.Errorf("estimate the number of documents: %w", err)
		}
		density = float64(n) / math.MaxUint64
	}
	plan.width = firstWidth(want, density, math.MaxUint64)
	docs, _, err := walkWindows(&plan, want, nil, func(w window, limit int) ([]T, error) {
		f, err := filter(w)
		if err != nil {
			return nil, err
		}
		return src.find(ctx, f, idOrder, limit)
	})
	if err != nil {
		return nil, err
	}
	reach := uint64(math.MaxUint64)
	if len(docs) >= want {
		reach = idKey(docs[len(docs)-1].pageID())
	}
	d.note(kind, len(docs), covered(plan.start, reach, false))
	return docs, nil
}

// changesPage reads one page of the change feed of src (users,
// organizations or memberships, deleted or not): the documents whose
// updatedAt is within [f.Since, f.Until], oldest change first (updatedAt,
// then _id), after the cursor f.After, at most f.Limit; and the next
// cursor, always set: on the last page it is where the next poll starts.
// A malformed cursor wraps models.ErrInvalid; other errors say what
// (users, organizations, memberships) was read.
//
// The {updatedAt: 1, _id: 1} index answers it, walked in windows of
// updatedAt from the cursor up (see window.go): a client catching up from
// long ago costs an engine that sorts every match about a page per page.
func changesPage[T pageDoc](ctx context.Context, src source[T], d *densities, what string, f models.ChangeFilter) ([]T, string, error) {
	filter, next, err := changesFilter(f)
	if err != nil {
		return nil, "", err
	}
	from := filter[0].Value.(bson.D)[0].Value.(time.Time)
	plan := windowPlan{start: timeKey(from), end: timeKey(f.Until.UTC()) + 1, width: defaultLogWidth}
	const kind = "feed"
	if density, ok := d.get(kind); ok {
		plan.width = firstWidth(f.Limit+1, density, math.MaxUint64)
	}
	// A client catching up from long ago crosses the time before the
	// first change in one window, then walks up from where it was.
	plan = plan.withEdge(d.edge(kind))
	docs, _, err := walkWindows(&plan, f.Limit+1, nil, func(w window, limit int) ([]T, error) {
		return src.find(ctx, changesWindowFilter(filter, w), changesOrder, limit)
	})
	if err != nil {
		return nil, "", fmt.Errorf("list changed %s: %w", what, err)
	}
	reach := plan.end
	if len(docs) > f.Limit {
		reach = timeKey(docs[len(docs)-1].changedAt())
	}
	d.note(kind, len(docs), max(covered(spanStart(plan, len(docs) > 0, func() uint64 { return timeKey(docs[0].changedAt()) }), reach, false), 1))
	if len(docs) > 0 && f.After == "" {
		d.noteEdge(kind, timeKey(docs[0].changedAt()))
	}
	if len(docs) > f.Limit {
		docs = docs[:f.Limit]
	}
	if n := len(docs); n > 0 {
		next = fmt.Sprintf("%d_%s", docs[n-1].changedAt().UnixMilli(), docs[n-1].pageID().Hex())
	}
	return docs, next, nil
}
