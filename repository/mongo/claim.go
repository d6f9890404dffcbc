package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// A claim is one conditional update (see claimCond): on MongoDB its answer
// is the truth. On the DocumentDB engines, concurrent writes to one
// document (several sweeps claim the same due events, in the same order)
// can be answered with PostgreSQL's "deadlock detected" (16908292) or an
// InternalError (1), and any engine can lose the answer of a write that
// committed (a network error, a failover). An error is then no answer:
// the claim may have been taken. Claim used to hand it to the sweep,
// which stopped; and a sweep that took an event and stopped leaves it to
// no one until the lease runs out.
//
// So a claim that is answered with an error, or that matched nothing,
// reads the event back before it concludes: taken when the event carries
// this claim's token (claimedBy, new for each claim: two sweeps may read
// the same clock, and expiries have millisecond precision), lost only
// when another sweep's lease, another attempt or the processed status is
// there to show for it, and tried again when the event is still free.

// maxClaimTries bounds the claims of one event by one sweep.
const maxClaimTries = 3

// claimState is what decides a claim when the update's answer does not:
// the event as read back by _id from the primary.
type claimState struct {
	Status       string        `bson:"status"`
	Attempts     int           `bson:"attempts"`
	ClaimedUntil *time.Time    `bson:"claimedUntil"`
	ClaimedBy    bson.ObjectID `bson:"claimedBy"`
}

// claimVerdict is what a claim's answer and the event read back say.
type claimVerdict int

const (
	claimTaken claimVerdict = iota + 1
	claimLost
	claimRetry // the event is free: claim it again
)

// decideClaim decides the claim token, made at now of an event read with
// attempts attempts, from the event read back (nil: no such event).
func decideClaim(st *claimState, token bson.ObjectID, attempts int, now time.Time) claimVerdict {
	switch {
	case st == nil, models.EventStatus(st.Status).Finished(), st.Attempts != attempts:
		return claimLost
	case st.ClaimedUntil == nil || !st.ClaimedUntil.After(now):
		return claimRetry
	case st.ClaimedBy == token:
		return claimTaken
	}
	return claimLost // another sweep's lease
}

// uncertainWrite reports whether err, the answer to a write, leaves open
// whether the write was made: anything but the caller going away.
func uncertainWrite(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// claim is Claim's decision, with the write and the read back as
// functions: update makes the conditional write, with token, and says
// whether it matched; read reads the event back (nil when there is none).
func claim(token bson.ObjectID, attempts int, now time.Time,
	update func() (bool, error), read func() (*claimState, error),
) (bool, error) {
	var err error
	for try := 1; try <= maxClaimTries; try++ {
		var matched bool
		matched, err = update()
		switch {
		case err == nil && matched:
			return true, nil
		case err != nil && !uncertainWrite(err):
			return false, err
		}
		st, rerr := read()
		if rerr != nil {
			if err == nil {
				err = rerr
			}
			return false, err
		}
		switch decideClaim(st, token, attempts, now) {
		case claimTaken:
			return true, nil
		case claimLost:
			return false, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("the event stayed free through %d claims: %w", maxClaimTries, models.ErrUnavailable)
	}
	return false, err
}

// claimByID claims the event with _id id (see Claim).
func (e *Events) claimByID(ctx context.Context, id bson.ObjectID, attempts int, now time.Time, lease time.Duration) (bool, error) {
	token := bson.NewObjectID()
	return claim(token, attempts, now,
		func() (bool, error) {
			res, err := e.primary.UpdateOne(ctx, append(bson.D{{Key: "_id", Value: id}}, claimCond(attempts, now)...),
				bson.D{{Key: "$set", Value: bson.D{{Key: "claimedUntil", Value: now.Add(lease)}, {Key: "claimedBy", Value: token}}}})
			if err != nil {
				return false, translate(err)
			}
			return res.MatchedCount > 0, nil
		},
		func() (*claimState, error) {
			var st claimState
			err := translate(e.primary.FindOne(ctx, bson.D{{Key: "_id", Value: id}}, options.FindOne().SetProjection(bson.D{
				{Key: "status", Value: 1}, {Key: "attempts", Value: 1}, {Key: "claimedUntil", Value: 1}, {Key: "claimedBy", Value: 1},
			})).Decode(&st))
			if errors.Is(err, models.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("read the claim back: %w", err)
			}
			return &st, nil
		})
}
