package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// RunsCollection keeps the summaries of the last models.KeptReconcileRuns
// reconcile and backfill runs, one document each, with an _id that sorts
// by start time, "<start, Unix ms, 15 digits>-<ObjectID>": the collection
// is read and pruned in _id order and needs no index but _id's.
const RunsCollection = "reconcile_runs"

// Runs is the reconcile_runs collection.
type Runs struct {
	coll *mongo.Collection
}

type runDoc struct {
	ID         string    `bson:"_id"`
	Kind       string    `bson:"kind"`
	Trigger    string    `bson:"trigger"`
	StartedAt  time.Time `bson:"startedAt"`
	DurationMS int64     `bson:"durationMs"`
	Success    bool      `bson:"success"`
	Error      string    `bson:"error,omitempty"`
	// The users' counts, as the runs recorded before kinds, which every
	// run still writes (zeros and localUsers -1 when it did not read
	// users): an instance of an earlier version reads them. Refused is the
	// run's.
	ClerkUsers int  `bson:"clerkUsers"`
	LocalUsers int  `bson:"localUsers"`
	Applied    int  `bson:"applied"`
	Stale      int  `bson:"stale"`
	Unchanged  int  `bson:"unchanged"`
	Deleted    int  `bson:"deleted"`
	Failed     int  `bson:"failed"`
	Refused    bool `bson:"refused,omitempty"`
	ToDelete   int  `bson:"toDelete,omitempty"`
	// Kinds has the counts of each kind the run read; absent on the runs
	// recorded before it, whose counts are the users' above.
	Kinds *runKindsDoc `bson:"kinds,omitempty"`
}

// runKindsDoc has a member per kind a run read: a kind not asked for, or
// turned off in the Clerk instance, is absent.
type runKindsDoc struct {
	Users         *runCountsDoc `bson:"users,omitempty"`
	Organizations *runCountsDoc `bson:"organizations,omitempty"`
	Memberships   *runCountsDoc `bson:"memberships,omitempty"`
	// Absent from the runs kept before invitations were counted.
	Invitations *runCountsDoc `bson:"invitations,omitempty"`
	// Absent from the runs kept before subscription items were counted:
	// not read.
	SubscriptionItems *runCountsDoc `bson:"subscriptionItems,omitempty"`
}

type runCountsDoc struct {
	Clerk     int  `bson:"clerk"`
	Local     int  `bson:"local"`
	Applied   int  `bson:"applied"`
	Stale     int  `bson:"stale"`
	Unchanged int  `bson:"unchanged"`
	Deleted   int  `bson:"deleted"`
	Failed    int  `bson:"failed"`
	Refused   bool `bson:"refused"`
	ToDelete  int  `bson:"toDelete"`
}

func newRunCountsDoc(c *models.ReconcileCounts) *runCountsDoc {
	if c == nil {
		return nil
	}
	d := runCountsDoc(*c)
	return &d
}

func (d *runCountsDoc) model() *models.ReconcileCounts {
	if d == nil {
		return nil
	}
	c := models.ReconcileCounts(*d)
	return &c
}

func newRunDoc(sum models.ReconcileSummary) runDoc {
	users := models.ReconcileCounts{Local: -1}
	if sum.Users != nil {
		users = *sum.Users
	}
	return runDoc{
		ID: sum.ID, Kind: sum.Kind, Trigger: sum.Trigger, StartedAt: sum.StartedAt, DurationMS: sum.Duration.Milliseconds(),
		Success: sum.Success, Error: sum.Error, ClerkUsers: users.Clerk, LocalUsers: users.Local, Applied: users.Applied,
		Stale: users.Stale, Unchanged: users.Unchanged, Deleted: users.Deleted, Failed: users.Failed, Refused: sum.Refused(),
		ToDelete: users.ToDelete,
		Kinds: &runKindsDoc{
			Users: newRunCountsDoc(sum.Users), Organizations: newRunCountsDoc(sum.Organizations), Memberships: newRunCountsDoc(sum.Memberships),
			Invitations: newRunCountsDoc(sum.Invitations), SubscriptionItems: newRunCountsDoc(sum.SubscriptionItems),
		},
	}
}

func (d runDoc) model() models.ReconcileSummary {
	s := models.ReconcileSummary{
		ID: d.ID, Kind: d.Kind, Trigger: d.Trigger, StartedAt: d.StartedAt.UTC(),
		Duration: time.Duration(d.DurationMS) * time.Millisecond, Success: d.Success, Error: d.Error,
	}
	if d.Kinds == nil {
		s.Users = &models.ReconcileCounts{
			Clerk: d.ClerkUsers, Local: d.LocalUsers, Applied: d.Applied, Stale: d.Stale, Unchanged: d.Unchanged,
			Deleted: d.Deleted, Failed: d.Failed, Refused: d.Refused, ToDelete: d.ToDelete,
		}
		return s
	}
	s.Users, s.Organizations, s.Memberships = d.Kinds.Users.model(), d.Kinds.Organizations.model(), d.Kinds.Memberships.model()
	s.Invitations, s.SubscriptionItems = d.Kinds.Invitations.model(), d.Kinds.SubscriptionItems.model()
	return s
}

// runsOrder is the order of the runs, the latest start first.
var runsOrder = bson.D{{Key: "_id", Value: -1}}

// Record keeps r and deletes the summaries older than the last
// models.KeptReconcileRuns: an insert, a read of the oldest one kept (by
// _id, skipping the newer ones), and a delete of an _id range. Two
// instances recording at once may each keep one more for a moment; the
// next record deletes it.
func (r *Runs) Record(ctx context.Context, sum models.ReconcileSummary) (models.ReconcileSummary, error) {
	sum = sum.Bounded()
	sum.ID = fmt.Sprintf("%015d-%s", sum.StartedAt.UnixMilli(), bson.NewObjectID().Hex())
	if _, err := r.coll.InsertOne(ctx, newRunDoc(sum)); err != nil {
		return sum, fmt.Errorf("record reconcile run: %w", translate(err))
	}
	var oldest runDoc
	err := translate(r.coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(runsOrder).
		SetSkip(models.KeptReconcileRuns-1).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&oldest))
	if errors.Is(err, models.ErrNotFound) {
		return sum, nil // fewer than kept
	}
	if err != nil {
		return sum, fmt.Errorf("read old reconcile runs: %w", err)
	}
	if _, err := r.coll.DeleteMany(ctx, runsPruneFilter(oldest.ID)); err != nil {
		return sum, fmt.Errorf("delete old reconcile runs: %w", translate(err))
	}
	return sum, nil
}

// runsPruneFilter selects the runs older than the one with _id oldest.
func runsPruneFilter(oldest string) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: oldest}}}}
}

// Last returns the last n summaries (1 to models.KeptReconcileRuns), the
// latest start first, read in _id order.
func (r *Runs) Last(ctx context.Context, n int) ([]models.ReconcileSummary, error) {
	n = min(max(n, 1), models.KeptReconcileRuns)
	cur, err := r.coll.Find(ctx, bson.D{}, options.Find().SetSort(runsOrder).SetLimit(int64(n)))
	if err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
	}
	var docs []runDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("read reconcile runs: %w", translate(err))
	}
	out := make([]models.ReconcileSummary, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.model())
	}
	return out, nil
}
