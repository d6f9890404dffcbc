package mongo

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// schemaMark is the counters document that says the database is in this
// version's shape: every user has the _id derived from its userId, and
// the outcome counters count the processed events.
const schemaMark = "migration:schema_2"

// rekeyCollection keeps each user being re-keyed, so that a migration
// stopped half-way loses no user: the next one finishes it.
const rekeyCollection = "users_rekey"

// checkSchema fails with models.ErrNeedsMigration when the database holds data
// of an older usersync (users with random ObjectIDs, which lookups by
// derived _id would miss; processed events the counters do not count). A
// database with no user and no event yet is marked as migrated at once.
func (s *Store) checkSchema(ctx context.Context) error {
	counters := s.events.counters.coll
	err := counters.FindOne(ctx, bson.D{{Key: "_id", Value: schemaMark}}).Err()
	if err == nil {
		return nil
	}
	if err = translate(err); !errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("read migration mark: %w", err)
	}
	for _, coll := range []*mongo.Collection{s.users.primary, s.events.primary} {
		err = coll.FindOne(ctx, bson.D{}, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
		if err == nil {
			return fmt.Errorf("the database holds data of an older usersync: stop it and run `usersync migrate`: %w", models.ErrNeedsMigration)
		}
		if err = translate(err); !errors.Is(err, models.ErrNotFound) {
			return fmt.Errorf("read %s: %w", coll.Name(), err)
		}
	}
	return s.markSchema(ctx)
}

func (s *Store) markSchema(ctx context.Context) error {
	_, err := s.events.counters.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: schemaMark}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "done", Value: true}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("write migration mark: %w", translate(err))
	}
	return nil
}

// Migrate brings a database written by an older usersync up to this one,
// and may run any number of times: it prepares the store as Prepare does,
// gives every user the _id derived from its userId, counts the processed
// events into the outcome counters (once: a full read of the events),
// builds every missing index and drops the obsolete ones (EnsureIndexes).
// It returns how many users it re-keyed. No older usersync may write to
// the database meanwhile. A run that stops half-way (a crash, the
// database down) is finished by the next one; no user is lost.
func (s *Store) Migrate(ctx context.Context) (rekeyed int, err error) {
	// One deadline for the whole run: the client's operation timeout would
	// otherwise bound the cursor over every user.
	ctx, cancel := context.WithTimeout(ctx, indexBuildTimeout)
	defer cancel()
	if err := s.prepare(ctx); err != nil {
		return 0, err
	}
	err = s.events.counters.coll.FindOne(ctx, bson.D{{Key: "_id", Value: schemaMark}}).Err()
	if err = translate(err); err == nil {
		return 0, s.EnsureIndexes(ctx) // migrated before
	}
	if !errors.Is(err, models.ErrNotFound) {
		return 0, fmt.Errorf("read migration mark: %w", err)
	}
	if rekeyed, err = s.rekeyUsers(ctx); err != nil {
		return rekeyed, err
	}
	if err := s.recount(ctx); err != nil {
		return rekeyed, err
	}
	if err := s.markSchema(ctx); err != nil {
		return rekeyed, err
	}
	return rekeyed, s.EnsureIndexes(ctx)
}

// recount sets the outcome counters to the processed events there are.
func (s *Store) recount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, indexBuildTimeout) // a full read
	defer cancel()
	c := s.events.counters
	if _, err := c.coll.DeleteMany(ctx, outcomeCountersFilter); err != nil {
		return fmt.Errorf("reset event counters: %w", translate(err))
	}
	for _, o := range models.Outcomes {
		n, err := s.events.primary.CountDocuments(ctx, bson.D{
			{Key: "status", Value: models.StatusProcessed}, {Key: "outcome", Value: o},
			{Key: "uncounted", Value: nil}, // the flagged ones are counted as such (see counters.go)
		})
		if err != nil {
			return fmt.Errorf("count %s events: %w", o, translate(err))
		}
		if err := c.add(ctx, o, bson.ObjectID{}, n); err != nil {
			return err
		}
	}
	return nil
}

// rekeyUsers gives every user the _id derived from its userId. Each user
// is copied aside, deleted, inserted under its new _id, and the copy
// removed: the unique userId and email indexes never see two copies.
func (s *Store) rekeyUsers(ctx context.Context) (int, error) {
	aside := s.db.Collection(rekeyCollection)
	rekeyed := 0
	// First what a stopped run left aside.
	left, err := readUsers(ctx, aside, bson.D{})
	if err != nil {
		return 0, err
	}
	for _, d := range left {
		if err := s.rekeyUser(ctx, aside, d, false); err != nil {
			return rekeyed, err
		}
		rekeyed++
	}
	for {
		// Passes until one finds nothing: a cursor over a collection that
		// changes may skip documents.
		n := 0
		cur, err := s.users.primary.Find(ctx, bson.D{})
		if err != nil {
			return rekeyed, fmt.Errorf("read users: %w", translate(err))
		}
		for cur.Next(ctx) {
			var d userDoc
			if err := cur.Decode(&d); err != nil {
				cur.Close(ctx)
				return rekeyed, fmt.Errorf("read users: %w", err)
			}
			if d.ID == docID(d.UserID) {
				continue
			}
			if err := s.rekeyUser(ctx, aside, d, true); err != nil {
				cur.Close(ctx)
				return rekeyed, err
			}
			n++
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return rekeyed, fmt.Errorf("read users: %w", translate(err))
		}
		rekeyed += n
		if n == 0 {
			break
		}
	}
	if err := aside.Drop(ctx); err != nil {
		return rekeyed, fmt.Errorf("drop %s: %w", rekeyCollection, translate(err))
	}
	return rekeyed, nil
}

// rekeyUser moves user d, whose _id is old, to its derived _id. copyAside
// is false when d is already the copy aside.
func (s *Store) rekeyUser(ctx context.Context, aside *mongo.Collection, d userDoc, copyAside bool) error {
	old := d.ID
	if copyAside {
		_, err := aside.ReplaceOne(ctx, bson.D{{Key: "_id", Value: old}}, d, options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("copy user %s aside: %w", d.UserID, translate(err))
		}
	}
	if _, err := s.users.primary.DeleteOne(ctx, bson.D{{Key: "_id", Value: old}}); err != nil {
		return fmt.Errorf("re-key user %s: %w", d.UserID, translate(err))
	}
	d.ID = docID(d.UserID)
	if err := translate(insertOne(ctx, s.users.primary, d)); err != nil && !errors.Is(err, models.ErrConflict) {
		return fmt.Errorf("re-key user %s: %w", d.UserID, err)
	}
	if _, err := aside.DeleteOne(ctx, bson.D{{Key: "_id", Value: old}}); err != nil {
		return fmt.Errorf("re-key user %s: %w", d.UserID, translate(err))
	}
	return nil
}

func readUsers(ctx context.Context, coll *mongo.Collection, filter bson.D) ([]userDoc, error) {
	cur, err := coll.Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", coll.Name(), translate(err))
	}
	var docs []userDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read %s: %w", coll.Name(), translate(err))
	}
	return docs, nil
}
