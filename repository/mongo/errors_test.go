package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/usersync/usersync/models"
	repository "github.com/usersync/usersync/repository/mongo"
)

// TestTranslate_FailoverIsUnavailableAndACancelledRequestIsNot classifies
// errors as the driver builds them: what a retry may heal (an election,
// a shutdown, a network error) is models.ErrUnavailable, which becomes a
// 503 and is counted; a caller that went away is not.
func TestTranslate_FailoverIsUnavailableAndACancelledRequestIsNot(t *testing.T) {
	cmd := func(code int32, labels ...string) error {
		return mongo.CommandError{Code: code, Message: "x", Labels: labels}
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
		{"DocumentDB deadlock", cmd(16908292), models.ErrUnavailable},
		{"RetryableWriteError label", cmd(262, "RetryableWriteError"), models.ErrUnavailable},
		{"NetworkError label", cmd(0, "NetworkError"), models.ErrUnavailable},
		{"write concern error: primary stepped down", mongo.WriteException{
			WriteConcernError: &mongo.WriteConcernError{Code: 189, Message: "stepped down"}}, models.ErrUnavailable},
		{"server selection", topology.ServerSelectionError{Wrapped: errors.New("no primary")}, models.ErrUnavailable},
		{"deadline", fmt.Errorf("find: %w", context.DeadlineExceeded), models.ErrUnavailable},
		{"client disconnected", mongo.ErrClientDisconnected, models.ErrUnavailable},
		{"duplicate key", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 11000,
			Message: "E11000 duplicate key error collection: db.users index: userId_1 dup key"}}}, models.ErrConflict},
		{"duplicate email", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 11000,
			Message: `E11000 duplicate key error collection: db.users index: email_1 dup key: { email: "a@example.com" }`}}}, models.ErrEmailTaken},
		{"embedded engine: email taken by an update", mongo.CommandError{Code: 1,
			Message: "UNIQUE constraint failed: index 'users_5e7cc513_email_1'"}, models.ErrEmailTaken},
		{"no documents", mongo.ErrNoDocuments, models.ErrNotFound},
		{"unauthorized", cmd(13), nil},
	}
	sentinels := []error{models.ErrUnavailable, models.ErrConflict, models.ErrEmailTaken, models.ErrNotFound}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := repository.TranslateForTest(tc.err)
			for _, s := range sentinels {
				if errors.Is(got, s) != (s == tc.want) {
					t.Errorf("translate(%v) = %v: is %v = %v, want %v", tc.err, got, s, errors.Is(got, s), s == tc.want)
				}
			}
		})
	}
	for _, err := range []error{context.Canceled, fmt.Errorf("read: %w", context.Canceled),
		mongo.CommandError{Code: 0, Labels: []string{"NetworkError"}, Wrapped: context.Canceled}} {
		got := repository.TranslateForTest(err)
		if errors.Is(got, models.ErrUnavailable) || !errors.Is(got, context.Canceled) {
			t.Errorf("translate(%v) = %v; want context.Canceled, not unavailable", err, got)
		}
	}
}
