package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
)

// TestTranslate_FailoverIsUnavailableAndACancelledRequestIsNot classifies
// errors as the driver builds them: what a retry may heal (an election,
// a shutdown, a network error) is models.ErrUnavailable, which becomes a
// 503 and is counted; a transient conflict between concurrent writes (a
// deadlock on the DocumentDB engines) is a retry later, not an outage; a
// caller that went away is not.
func TestTranslate_FailoverIsUnavailableAndACancelledRequestIsNot(t *testing.T) {
	cmd := func(code int32, labels ...string) error {
		return driver.CommandError{Code: code, Message: "x", Labels: labels}
	}
	tests := []struct {
		name string
		err  error
		want error // nil: no sentinel
	}{
		{"NotWritablePrimary", cmd(10107), models.ErrUnavailable},
		{"NotPrimaryNoSecondaryOk", cmd(13435), models.ErrUnavailable},
		{"NotPrimaryOrSecondary", cmd(13436), models.ErrUnavailable},
		{"InterruptedDueToReplStateChange", cmd(11602), models.ErrUnavailable},
		{"PrimarySteppedDown", cmd(189), models.ErrUnavailable},
		{"ShutdownInProgress", cmd(91), models.ErrUnavailable},
		{"InterruptedAtShutdown", cmd(11600), models.ErrUnavailable},
		{"HostUnreachable", cmd(6), models.ErrUnavailable},
		{"HostNotFound", cmd(7), models.ErrUnavailable},
		{"NetworkTimeout", cmd(89), models.ErrUnavailable},
		{"SocketException", cmd(9001), models.ErrUnavailable},
		{"DocumentDB deadlock", cmd(16908292), models.ErrRetryLater},
		{"deadlock in a write error", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 1, Message: "deadlock detected"}}}, models.ErrRetryLater},
		{"WriteConflict", cmd(112), models.ErrRetryLater},
		{"TransientTransactionError label", cmd(251, "TransientTransactionError"), models.ErrRetryLater},
		{"RetryableWriteError label", cmd(262, "RetryableWriteError"), models.ErrUnavailable},
		{"NetworkError label", cmd(0, "NetworkError"), models.ErrUnavailable},
		{"write concern error: primary stepped down", driver.WriteException{
			WriteConcernError: &driver.WriteConcernError{Code: 189, Message: "stepped down"}}, models.ErrUnavailable},
		{"server selection", topology.ServerSelectionError{Wrapped: errors.New("no primary")}, models.ErrUnavailable},
		{"deadline", fmt.Errorf("find: %w", context.DeadlineExceeded), models.ErrUnavailable},
		{"client disconnected", driver.ErrClientDisconnected, models.ErrUnavailable},
		{"duplicate key", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: "E11000 duplicate key error collection: db.users index: userId_1 dup key"}}}, mongo.ErrDuplicateForTest},
		{"duplicate email", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: `E11000 duplicate key error collection: db.users index: email_1 dup key: { email: "a@example.com" }`}}}, models.ErrEmailTaken},
		{"no documents", driver.ErrNoDocuments, models.ErrNotFound},
		{"unauthorized", cmd(13), nil},
	}
	sentinels := []error{models.ErrUnavailable, models.ErrRetryLater, mongo.ErrDuplicateForTest, models.ErrEmailTaken, models.ErrNotFound}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mongo.TranslateForTest(tc.err)
			for _, s := range sentinels {
				if errors.Is(got, s) != (s == tc.want) {
					t.Errorf("translate(%v) = %v: is %v = %v, want %v", tc.err, got, s, errors.Is(got, s), s == tc.want)
				}
			}
		})
	}
	for _, err := range []error{context.Canceled, fmt.Errorf("read: %w", context.Canceled),
		driver.CommandError{Code: 0, Labels: []string{"NetworkError"}, Wrapped: context.Canceled}} {
		got := mongo.TranslateForTest(err)
		if errors.Is(got, models.ErrUnavailable) || !errors.Is(got, context.Canceled) {
			t.Errorf("translate(%v) = %v; want context.Canceled, not unavailable", err, got)
		}
	}
}

// rawDoc is the BSON document of extended JSON s.
func rawDoc(t *testing.T, s string) bson.Raw {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return raw
}

// TestTranslate_UniqueViolationsInEveryEngineWords gives translate the
// duplicate-key answers of MongoDB (with keyPattern, as current servers
// send it, and with the message alone) and of the DocumentDB engines, in
// every form the driver returns them: the email
// index's is ErrEmailTaken, any other's ErrConflict.
func TestTranslate_UniqueViolationsInEveryEngineWords(t *testing.T) {
	const mongoEmail = `E11000 duplicate key error collection: usersync.users index: email_1 dup key: { email: "holder@example.com" }`
	const mongoUserID = `E11000 duplicate key error collection: usersync.users index: userId_1 dup key: { userId: "user_1" }`
	const docdbEmail = `Duplicate key violation on the requested collection: Index 'email_1'`
	withRaw := func(code int, msg, raw string) driver.WriteException {
		return driver.WriteException{WriteErrors: []driver.WriteError{{Code: code, Message: msg, Raw: rawDoc(t, raw)}}}
	}
	tests := []struct {
		name      string
		err       error
		want      error
		wantIndex string
	}{
		{"MongoDB insert, keyPattern", withRaw(11000, mongoEmail,
			`{"index": 0, "code": 11000, "errmsg": "x", "keyPattern": {"email": 1}, "keyValue": {"email": "holder@example.com"}}`),
			models.ErrEmailTaken, "email_1"},
		{"keyPattern wins over the message", withRaw(11000, mongoEmail,
			`{"code": 11000, "keyPattern": {"userId": 1}, "keyValue": {"userId": "user_1"}}`),
			mongo.ErrDuplicateForTest, "userId_1"},
		{"MongoDB insert, message only", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000, Message: mongoEmail}}},
			models.ErrEmailTaken, "email_1"},
		{"MongoDB insert, userId", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000, Message: mongoUserID}}},
			mongo.ErrDuplicateForTest, "userId_1"},
		{"MongoDB, _id", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: `E11000 duplicate key error collection: usersync.user_events index: _id_ dup key: { _id: ObjectId('116b88f173007be5e05df2a8') }`}}},
			mongo.ErrDuplicateForTest, "_id_"},
		{"MongoDB update on an old server (11001)", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11001, Message: mongoEmail}}},
			models.ErrEmailTaken, "email_1"},
		{"MongoDB bulk write", driver.BulkWriteException{WriteErrors: []driver.BulkWriteError{{WriteError: driver.WriteError{
			Index: 3, Code: 11000, Message: mongoEmail, Raw: rawDoc(t, `{"index": 3, "code": 11000, "keyPattern": {"email": 1}}`)}}}},
			models.ErrEmailTaken, "email_1"},
		{"MongoDB findAndModify (a command error)", driver.CommandError{Code: 11000, Name: "DuplicateKey", Message: mongoEmail,
			Raw: rawDoc(t, `{"ok": 0, "code": 11000, "errmsg": "x", "keyPattern": {"email": 1}, "keyValue": {"email": "holder@example.com"}}`)},
			models.ErrEmailTaken, "email_1"},
		{"mongos insert (16460)", driver.CommandError{Code: 16460, Message: "write failed :: caused by :: " + mongoEmail},
			models.ErrEmailTaken, "email_1"},
		{"DocumentDB insert", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000, Message: docdbEmail}}},
			models.ErrEmailTaken, "email_1"},
		{"DocumentDB eventId", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: `Duplicate key violation on the requested collection: Index 'eventId_1'`}}},
			mongo.ErrDuplicateForTest, "eventId_1"},
		{"DocumentDB bulk write", driver.BulkWriteException{WriteErrors: []driver.BulkWriteError{{WriteError: driver.WriteError{Code: 11000, Message: docdbEmail}}}},
			models.ErrEmailTaken, "email_1"},
		{"DocumentDB findOneAndUpdate onto a taken value (code 1)", driver.CommandError{Code: 1, Name: "InternalError",
			Message: "conflicting key value violates exclusion constraint \"documents_rum_index_74\""},
			mongo.ErrDuplicateForTest, ""},
		{"a server that names no index", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: "E11000 duplicate key error collection: usersync.users. Failed _id or unique index constraint."}}},
			mongo.ErrDuplicateForTest, ""},
		{"wrapped by the caller", fmt.Errorf("insert: %w", driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000, Message: docdbEmail}}}),
			models.ErrEmailTaken, "email_1"},
		{"code 1 for something else", driver.CommandError{Code: 1, Message: "internal error"}, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mongo.TranslateForTest(tc.err)
			for _, s := range []error{models.ErrEmailTaken, mongo.ErrDuplicateForTest} {
				if errors.Is(got, s) != (s == tc.want) {
					t.Errorf("translate(%v) = %v: is %v = %v, want %v", tc.err, got, s, errors.Is(got, s), s == tc.want)
				}
			}
			if index := mongo.ConflictIndexForTest(got); index != tc.wantIndex {
				t.Errorf("index of %v = %q, want %q", got, index, tc.wantIndex)
			}
			if again := mongo.TranslateForTest(got); again.Error() != got.Error() {
				t.Errorf("translate twice = %q, want %q", again, got)
			}
		})
	}
}

// TestTranslate_AConflictNeverSaysTheServersMessage checks that the text of
// a translated unique violation, and of every error that wraps it, says
// which rule refused the write but not the server's message, which quotes
// the duplicate value: another user's email, which would reach an HTTP
// body, the event's stored error and the logs. The driver's error stays
// reachable for code that asks for it.
func TestTranslate_AConflictNeverSaysTheServersMessage(t *testing.T) {
	const email = "holder@example.com"
	driverErrs := []error{
		driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000,
			Message: `E11000 duplicate key error collection: usersync.users index: email_1 dup key: { email: "` + email + `" }`,
			Raw:     rawDoc(t, `{"code": 11000, "keyPattern": {"email": 1}, "keyValue": {"email": "`+email+`"}}`)}}},
		driver.CommandError{Code: 11000, Message: `E11000 duplicate key error collection: usersync.users index: email_1 dup key: { email: "` + email + `" }`},
		driver.BulkWriteException{WriteErrors: []driver.BulkWriteError{{WriteError: driver.WriteError{Code: 11000,
			Message: `E11000 duplicate key error collection: usersync.users index: email_1 dup key: { email: "` + email + `" }`}}}},
		driver.WriteException{WriteErrors: []driver.WriteError{{Code: 11000, Message: `Duplicate key violation on the requested collection: Index 'email_1'`}}},
	}
	for _, derr := range driverErrs {
		got := mongo.TranslateForTest(derr)
		wrapped := fmt.Errorf("apply event msg_1 to user user_2: %w", fmt.Errorf("update: %w", got))
		for _, e := range []error{got, wrapped} {
			for _, leak := range []string{email, "E11000", "dup key", "Duplicate key violation", "keyValue"} {
				if strings.Contains(e.Error(), leak) {
					t.Errorf("error text %q carries %q", e.Error(), leak)
				}
			}
			if !strings.Contains(e.Error(), "email_1") || !errors.Is(e, models.ErrEmailTaken) {
				t.Errorf("error %q: want ErrEmailTaken naming the email index", e)
			}
		}
		var se driver.ServerError
		if !errors.As(wrapped, &se) || !driver.IsDuplicateKeyError(wrapped) {
			t.Errorf("%q: the driver's error is not reachable with errors.As", wrapped)
		}
	}
}

// TestTranslate_StorageFull: a write refused for lack of space, in
// MongoDB's code and in PostgreSQL's words under a DocumentDB engine, is
// models.ErrStorageFull and models.ErrUnavailable.
func TestTranslate_StorageFull(t *testing.T) {
	for _, err := range []error{
		driver.CommandError{Code: 14031, Name: "OutOfDiskSpace", Message: "out of disk space"},
		driver.WriteException{WriteErrors: []driver.WriteError{{Code: 1,
			Message: `could not extend file "base/16384/16403": No space left on device`}}},
	} {
		got := mongo.TranslateForTest(err)
		if !errors.Is(got, models.ErrStorageFull) || !errors.Is(got, models.ErrUnavailable) {
			t.Errorf("translate(%v) = %v, want ErrStorageFull and ErrUnavailable", err, got)
		}
	}
}

// TestTranslate_ATransientConflictNeverCarriesTheDriversText: what a
// deadlock leaves of an error is a fixed text (it is stored as an event's
// error and may reach a client), with the driver's error still reachable
// for logs.
func TestTranslate_ATransientConflictNeverCarriesTheDriversText(t *testing.T) {
	werr := driver.WriteException{WriteErrors: []driver.WriteError{{Code: 16908292,
		Message: `deadlock detected: Process 81 waits for ShareLock on transaction 1203; blocked by process 77 (user a@example.com)`}}}
	got := mongo.TranslateForTest(werr)
	if strings.Contains(got.Error(), "Process") || strings.Contains(got.Error(), "example.com") {
		t.Errorf("translate = %q: carries the driver's text", got)
	}
	var we driver.WriteException
	if !errors.As(got, &we) {
		t.Errorf("translate = %v: the driver's error is not reachable", got)
	}
}

// TestRetryConflicts_AWriteRefusedByADeadlockIsMadeAgain: a write
// refused by a transient conflict is made again, a bounded number of
// times, and a write refused for another reason is not.
func TestRetryConflicts_AWriteRefusedByADeadlockIsMadeAgain(t *testing.T) {
	deadlock := driver.CommandError{Code: 16908292, Message: "deadlock detected"}
	for _, tc := range []struct {
		name      string
		failures  int   // tries refused before one succeeds
		err       error // what refuses them
		wantTries int
		wantErr   bool
	}{
		{"a deadlock, then through", 2, deadlock, 3, false},
		{"deadlocks every time", 100, deadlock, mongo.MaxConflictTriesForTest, true},
		{"another error is not retried", 100, driver.CommandError{Code: 13, Message: "unauthorized"}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := mongo.RetryConflictsForTest(context.Background(), func() error {
				tries++
				if tries <= tc.failures {
					return tc.err
				}
				return nil
			})
			if tries != tc.wantTries || (err != nil) != tc.wantErr {
				t.Errorf("%d tries, err %v; want %d tries, error %v", tries, err, tc.wantTries, tc.wantErr)
			}
		})
	}
}
