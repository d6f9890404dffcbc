package mongo

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// engine is how the stores write where the result depends on a
// document's state. Prepare chooses it once for the server at hand and
// hands the same value to every store:
//   - atomicEngine (MongoDB and the engines that behave like it): one
//     conditional update, which the server applies atomically;
//   - serialEngine (FerretDB): FerretDB runs an update as a read, a check
//     and a rewrite, not atomically, and filters in SQL only a filter of
//     exactly {_id: value}. So the state is read by _id, the decision is
//     made in Go, the write is by _id, and the three take turns per key
//     within this process (see keyLocks).
type engine interface {
	// payloadDocs reports whether events keep their body as a document
	// as well as raw. FerretDB parses whole documents even to find one by
	// _id, and a payload document makes that about six times slower.
	payloadDocs() bool
	// turn waits for key's turn and returns the function that ends it; on
	// an atomic engine there is nothing to wait for.
	turn(key string) (done func())
	// updateIf applies update to the document of coll with _id id if the
	// document is in the state that cond matches (on an atomic engine) or
	// that ok accepts (on a serial one: the same rule in Go), and reports
	// whether it did. A missing document is not updated.
	updateIf(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, cond bson.D, ok func(bson.Raw) bool, update bson.D) (bool, error)
	// deleteIf deletes the documents of coll with _ids ids that are in the
	// state that cond matches (on an atomic engine: one delete) or that
	// ok accepts (on a serial one: read and deleted by _id, one at a
	// time), and returns how many it deleted.
	deleteIf(ctx context.Context, coll *mongo.Collection, ids []bson.ObjectID, cond bson.D, ok func(bson.Raw) bool) (int64, error)
	// applyUser writes w to its user; see Users.Apply.
	applyUser(ctx context.Context, u *Users, w userWrite) (models.Outcome, error)
}

// atomicEngine is the engine of servers whose single-document updates
// are atomic.
type atomicEngine struct{}

func (atomicEngine) payloadDocs() bool { return true }

func (atomicEngine) turn(string) func() { return func() {} }

func (atomicEngine) updateIf(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, cond bson.D, _ func(bson.Raw) bool, update bson.D) (bool, error) {
	res, err := coll.UpdateOne(ctx, append(bson.D{{Key: "_id", Value: id}}, cond...), update)
	if err != nil {
		return false, translate(err)
	}
	return res.MatchedCount > 0, nil
}

func (atomicEngine) deleteIf(ctx context.Context, coll *mongo.Collection, ids []bson.ObjectID, cond bson.D, _ func(bson.Raw) bool) (int64, error) {
	res, err := coll.DeleteMany(ctx, append(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, cond...))
	if err != nil {
		return 0, translate(err)
	}
	return res.DeletedCount, nil
}

// serialEngine is the engine of FerretDB, whose updates are not atomic.
type serialEngine struct {
	locks *keyLocks
}

func (serialEngine) payloadDocs() bool { return false }

func (e serialEngine) turn(key string) func() { return e.locks.lock(key) }

func (e serialEngine) updateIf(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, _ bson.D, ok func(bson.Raw) bool, update bson.D) (bool, error) {
	defer e.turn(id.Hex())()
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if err != nil {
		if err = translate(err); errors.Is(err, models.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	if !ok(raw) {
		return false, nil
	}
	if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}}, update); err != nil {
		return false, translate(err)
	}
	return true, nil
}

// deleteIf deletes by _id, the one filter FerretDB answers in SQL (a
// filter of _ids and a condition would read every document).
func (e serialEngine) deleteIf(ctx context.Context, coll *mongo.Collection, ids []bson.ObjectID, _ bson.D, ok func(bson.Raw) bool) (int64, error) {
	var deleted int64
	for _, id := range ids {
		n, err := e.deleteOneIf(ctx, coll, id, ok)
		if err != nil {
			return deleted, err
		}
		deleted += n
	}
	return deleted, nil
}

func (e serialEngine) deleteOneIf(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, ok func(bson.Raw) bool) (int64, error) {
	defer e.turn(id.Hex())()
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if err != nil {
		if err = translate(err); errors.Is(err, models.ErrNotFound) {
			return 0, nil
		}
		return 0, err
	}
	if !ok(raw) {
		return 0, nil
	}
	res, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return 0, translate(err)
	}
	return res.DeletedCount, nil
}

// findByID reads the document with _id id into v, or returns an error
// wrapping models.ErrNotFound.
func findByID(ctx context.Context, coll *mongo.Collection, id bson.ObjectID, v any, projection bson.D) error {
	opts := options.FindOne()
	if projection != nil {
		opts.SetProjection(projection)
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, opts).Decode(v); err != nil {
		return translate(err)
	}
	return nil
}
