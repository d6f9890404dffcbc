package mongo

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
)

// TestClaim_DecidesFromTheEventWhenTheAnswerDoesNot plays a claim against
// recorded answers of the engines: the update's (matched, not matched, or
// an error that may hide a committed write: DocumentDB's deadlock and
// InternalError, a lost connection, a write concern that timed out after
// the primary applied the write) and the event read back. A claim is
// taken when the event carries its expiry, lost only when the event shows
// why (another sweep's lease, another attempt, processed, gone), and
// tried again while the event is free. Another sweep's claim made at the
// same millisecond (the same expiry) is told apart by its token.
func TestClaim_DecidesFromTheEventWhenTheAnswerDoesNot(t *testing.T) {
	now := time.Date(2026, 11, 24, 3, 30, 41, 558_123_456, time.UTC)
	until := now.Add(time.Minute).Truncate(time.Millisecond) // as the server keeps it
	past := now.Add(-time.Hour)
	token, other := bson.NewObjectID(), bson.NewObjectID()
	const attempts = 2

	deadlock := mongo.CommandError{Code: 16908292, Message: "deadlock detected"}
	internal := mongo.CommandError{Code: 1, Name: "InternalError", Message: "tuple concurrently updated"}
	network := mongo.CommandError{Labels: []string{"NetworkError"}, Message: "connection reset by peer"}
	wcTimeout := mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed",
		Message: "waiting for replication timed out"}}

	type answer struct {
		matched bool
		err     error
	}
	free := &claimState{Status: "stored", Attempts: attempts}
	expired := &claimState{Status: "failed", Attempts: attempts, ClaimedUntil: &past}
	oursSt := &claimState{Status: "stored", Attempts: attempts, ClaimedUntil: &until, ClaimedBy: token}
	// Another sweep's, made at the same millisecond: the same expiry.
	theirsSt := &claimState{Status: "stored", Attempts: attempts, ClaimedUntil: &until, ClaimedBy: other}
	processed := &claimState{Status: "processed", Attempts: attempts + 1}
	retried := &claimState{Status: "failed", Attempts: attempts + 1}

	for _, tc := range []struct {
		name    string
		updates []answer
		reads   []*claimState // nil: the event is gone
		readErr error
		want    bool
		wantErr error // a sentinel the error wraps; nil for no error
	}{
		{"matched", []answer{{matched: true}}, nil, nil, true, nil},
		{"not matched: another sweep's lease", []answer{{}}, []*claimState{theirsSt}, nil, false, nil},
		{"not matched: processed", []answer{{}}, []*claimState{processed}, nil, false, nil},
		{"not matched: another attempt since", []answer{{}}, []*claimState{retried}, nil, false, nil},
		{"not matched: gone", []answer{{}}, []*claimState{nil}, nil, false, nil},
		{"not matched, yet free: claimed again", []answer{{}, {matched: true}}, []*claimState{free}, nil, true, nil},
		{"deadlock, the write made", []answer{{err: deadlock}}, []*claimState{oursSt}, nil, true, nil},
		{"deadlock, the write not made: claimed again", []answer{{err: deadlock}, {matched: true}}, []*claimState{free}, nil, true, nil},
		{"deadlock, an expired lease: claimed again", []answer{{err: deadlock}, {matched: true}}, []*claimState{expired}, nil, true, nil},
		{"deadlock, another sweep won", []answer{{err: deadlock}}, []*claimState{theirsSt}, nil, false, nil},
		{"InternalError, the write made", []answer{{err: internal}}, []*claimState{oursSt}, nil, true, nil},
		{"InternalError, another sweep won", []answer{{err: internal}}, []*claimState{theirsSt}, nil, false, nil},
		{"connection lost, the write made", []answer{{err: network}}, []*claimState{oursSt}, nil, true, nil},
		{"write concern timed out, the primary made the write", []answer{{err: wcTimeout}}, []*claimState{oursSt}, nil, true, nil},
		{"connection lost, and the read back fails", []answer{{err: network}}, nil, network, false, models.ErrUnavailable},
		{"deadlock every time, free every time", []answer{{err: deadlock}, {err: deadlock}, {err: deadlock}},
			[]*claimState{free, free, free}, nil, false, models.ErrRetryLater},
		{"the caller went away", []answer{{err: fmt.Errorf("update: %w", context.Canceled)}}, nil, nil, false, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var updates, reads int
			got, err := claim(token, attempts, now,
				func() (bool, error) {
					a := tc.updates[updates]
					updates++
					return a.matched, translate(a.err)
				},
				func() (*claimState, error) {
					if tc.readErr != nil {
						return nil, translate(tc.readErr)
					}
					st := tc.reads[reads]
					reads++
					return st, nil
				})
			if got != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("claim = %v, %v; want %v, %v", got, err, tc.want, tc.wantErr)
			}
			if updates != len(tc.updates) {
				t.Errorf("%d claims made, want %d", updates, len(tc.updates))
			}
		})
	}
}
