package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// LeasesCollection holds one document per lease: who holds it and until when.
const LeasesCollection = "leases"

// Leases lets one process at a time, among all those on a database, do a
// piece of work (a scheduled reconcile): a lease document names its owner
// and expires unless the owner renews it.
type Leases struct {
	coll *mongo.Collection
}

// NewLeases returns the leases of s's database.
func NewLeases(s *Store) *Leases {
	return &Leases{coll: s.db.Collection(s.names.of(LeasesCollection))}
}

type leaseDoc struct {
	Name      string    `bson:"_id"`
	Owner     string    `bson:"owner"`
	ExpiresAt time.Time `bson:"expiresAt"`
}

// Acquire takes the lease name for owner until until, if it is free: it
// never existed, or it has expired by now. It reports whether owner holds
// it now; errors wrap models.ErrUnavailable when the database is down.
func (l *Leases) Acquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	res, err := updateOne(ctx, l.coll, bson.D{{Key: "_id", Value: name}, {Key: "expiresAt", Value: bson.D{{Key: "$lte", Value: now.UTC()}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: owner}, {Key: "expiresAt", Value: until.UTC()}}}})
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, translate(err))
	}
	if res.MatchedCount > 0 {
		return true, nil
	}
	// Not there, or held: the unique _id lets only one insert through.
	_, err = l.coll.InsertOne(ctx, leaseDoc{Name: name, Owner: owner, ExpiresAt: until.UTC()})
	err = translate(err)
	if errors.Is(err, errDuplicate) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return true, nil
}

// Extend moves the expiry of a lease owner holds to until (a renewal, or
// the end of a run that keeps others away until the next one is due). It
// reports false when owner no longer holds the lease.
func (l *Leases) Extend(ctx context.Context, name, owner string, until time.Time) (bool, error) {
	res, err := updateOne(ctx, l.coll, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expiresAt", Value: until.UTC()}}}})
	if err != nil {
		return false, fmt.Errorf("extend lease %s: %w", name, translate(err))
	}
	return res.MatchedCount > 0, nil
}

// Reclaim takes the lease name for owner until until if it expires after
// horizon: later than any schedule sets it, so it is stale (the schedule's
// interval was shortened, or a clock went back after a lease was set). It
// reports whether owner holds it now; errors are Acquire's.
func (l *Leases) Reclaim(ctx context.Context, name, owner string, horizon, until time.Time) (bool, error) {
	res, err := updateOne(ctx, l.coll, bson.D{{Key: "_id", Value: name}, {Key: "expiresAt", Value: bson.D{{Key: "$gt", Value: horizon.UTC()}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: owner}, {Key: "expiresAt", Value: until.UTC()}}}})
	if err != nil {
		return false, fmt.Errorf("reclaim lease %s: %w", name, translate(err))
	}
	return res.MatchedCount > 0, nil
}

// Release deletes the lease name if owner holds it.
func (l *Leases) Release(ctx context.Context, name, owner string) error {
	if _, err := l.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: owner}}); err != nil {
		return fmt.Errorf("release lease %s: %w", name, translate(err))
	}
	return nil
}
