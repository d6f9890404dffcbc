package mongo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// codeOutOfDiskSpace is MongoDB's OutOfDiskSpace error code.
const codeOutOfDiskSpace = 14031

// storageFullMessages are how the engines word a write refused for lack of
// space: the operating system's ENOSPC, as MongoDB's storage engine and
// PostgreSQL under the DocumentDB engines ("could not extend file …: No
// space left on device") report it.
var storageFullMessages = []string{"no space left on device"}

// isStorageFull reports whether err says that the database has no space
// left to write.
func isStorageFull(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeOutOfDiskSpace) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range storageFullMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// storageFull wraps err as an availability failure (a retry may succeed once
// space is freed) that says why.
func storageFull(err error) error {
	return fmt.Errorf("%w: %w: %w", models.ErrUnavailable, models.ErrStorageFull, err)
}

// Transient conflicts. A write can be refused because a concurrent write
// held what it needed: on the DocumentDB engines PostgreSQL's deadlock
// detector aborts one of two updates of the same rows ("deadlock
// detected", code 16908292; an email swap writes two users in opposite
// orders), on MongoDB a WriteConflict (112) or a TransientTransactionError.
// The aborted statement made no change, and every write of the store is
// conditional on the state it reads, so the write is simply made again,
// after a short pause, a bounded number of times (retryConflicts). What is
// still refused after that is a retry later, never an outage (translate).

// transientCodes are the server codes of a transient conflict.
var transientCodes = []int{
	112,      // WriteConflict
	16908292, // DocumentDB: deadlock detected
}

// deadlockMessage is PostgreSQL's word for the statement its deadlock
// detector aborted, as the DocumentDB engines pass it on (in a write
// error, with whatever code the engine gave it).
const deadlockMessage = "deadlock detected"

// isTransientConflict reports whether err is a write refused because of a
// concurrent one.
func isTransientConflict(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if se.HasErrorLabel("TransientTransactionError") || se.HasErrorMessage(deadlockMessage) {
		return true
	}
	for _, code := range transientCodes {
		if se.HasErrorCode(code) {
			return true
		}
	}
	return false
}

// transientError is a transient conflict that retries did not get past,
// as translate reports it: a retry later. The driver's error stays
// reachable (errors.As) for logs, never through Error(): the text ends up
// in an event's stored error and in HTTP bodies.
type transientError struct{ driver error }

func (e *transientError) Error() string {
	return "concurrent writes conflicted: " + models.ErrRetryLater.Error()
}

func (e *transientError) Unwrap() []error { return []error{models.ErrRetryLater, e.driver} }

// maxConflictTries bounds the tries of one write refused by transient
// conflicts; the pauses between them add up to about a second, within the
// 10 s write deadline the change feed's settle time relies on (and each
// try ends at the caller's deadline). Eight writers of one membership pair
// at once on DocumentDB, whose deadlock detector waits a second, needed
// more than five tries 30 ms apart.
const maxConflictTries = 10

// conflictPause is the pause before try try+1: 4 ms doubled each time up
// to 256 ms, with jitter, so that writers that deadlocked do not meet
// again.
func conflictPause(try int) time.Duration {
	d := min(4*time.Millisecond<<(try-1), 256*time.Millisecond)
	return d/2 + rand.N(d)
}

// retryConflicts runs write until it is not refused by a transient
// conflict, at most maxConflictTries times, and returns its last answer
// (untranslated: callers translate it).
func retryConflicts[T any](ctx context.Context, write func() (T, error)) (T, error) {
	for try := 1; ; try++ {
		r, err := write()
		if err == nil || try == maxConflictTries || !isTransientConflict(err) {
			return r, err
		}
		t := time.NewTimer(conflictPause(try))
		select {
		case <-ctx.Done():
			t.Stop()
			return r, err
		case <-t.C:
		}
	}
}

// updateOne is coll.UpdateOne, made again when a transient conflict
// refused it.
func updateOne(ctx context.Context, coll *mongo.Collection, filter, update any,
	opts ...options.Lister[options.UpdateOneOptions]) (*mongo.UpdateResult, error) {
	return retryConflicts(ctx, func() (*mongo.UpdateResult, error) { return coll.UpdateOne(ctx, filter, update, opts...) })
}

// updateMany is coll.UpdateMany, made again when a transient conflict
// refused it (it is idempotent: its filter selects what is still to do).
func updateMany(ctx context.Context, coll *mongo.Collection, filter, update any) (*mongo.UpdateResult, error) {
	return retryConflicts(ctx, func() (*mongo.UpdateResult, error) { return coll.UpdateMany(ctx, filter, update) })
}
