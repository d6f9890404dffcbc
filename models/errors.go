// Package models holds usersync's domain types: users, events and their
// statuses, the Clerk webhook payload shapes, and the sentinel errors every
// other package wraps.
package models

import (
	"errors"
	"fmt"
)

// Sentinel errors. Stores and services wrap them with %w; the HTTP layer maps
// them to statuses in one place (api/errors.go).
var (
	// ErrNotFound: the thing asked for does not exist (or is hidden).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a state rule forbids the change (erasing an active
	// user, replaying a processed or erased event). A duplicate key stays
	// inside the store that met it; a lost race is retried there, or
	// answered ErrRetryLater.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request or payload can never be applied as it is.
	ErrInvalid = errors.New("invalid")
	// ErrUnauthorized: missing or wrong credentials or signature.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: valid credentials without the right to do this.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the database cannot be reached; a retry may succeed.
	ErrUnavailable = errors.New("database unavailable")
	// ErrStorageFull: the database has no space left to write. It is
	// always wrapped together with ErrUnavailable (a retry may succeed once
	// space is freed); readiness reports it although the database still
	// answers a ping.
	ErrStorageFull = errors.New("database storage is full")
	// ErrRetryLater: the event is valid but cannot be applied yet (for
	// example its email is still held by another active user); a later
	// delivery may succeed.
	ErrRetryLater = errors.New("cannot be applied yet")
)

// ErrCorrupt: the database file is damaged (a page that is not a page,
// a stored value that is not what was written). It is always wrapped
// together with ErrUnavailable; a damaged file does not heal by itself,
// so readiness reports it from the first time it is met: restore the
// file from a backup.
var ErrCorrupt = errors.New("the database file is damaged")

// ErrStalled: the database's writes do not go ahead (a disk that does not
// answer): a write could not start within its deadline. It is always
// wrapped together with ErrUnavailable; readiness reports it while the
// writes stay stalled.
var ErrStalled = errors.New("the database's writes are stalled")

// ErrEmailTaken: the user's email is held by another active user. The
// change may apply once that user changes email or is deleted; Clerk
// itself forbids two users one email, so it is a matter of order.
var ErrEmailTaken = errors.New("the user's email is held by another active user")

// ErrOverloaded: the instance has as much work in flight as it takes; a
// retry shortly after may succeed.
var ErrOverloaded = errors.New("overloaded")

// ErrTimeout: the client did not send its request within the time it is
// given.
var ErrTimeout = errors.New("request not received in time")

// ErrTooManyRequests: this client has as many requests of this kind in
// flight as it may; a retry once one has finished may succeed.
var ErrTooManyRequests = errors.New("too many requests")

// ErrBadUpstream: a service usersync relies on (Clerk's API) answered
// with something usersync cannot use.
var ErrBadUpstream = errors.New("unusable answer from an upstream service")

// ErrFeatureOff: the Clerk instance has the feature asked for turned off
// (organizations, which Clerk answers 403 organization_not_enabled_in_instance
// for): it has none of those objects.
var ErrFeatureOff = errors.New("the feature is not enabled in the Clerk instance")

// ErrNeedsMigration: the database holds data written by an older usersync;
// `usersync migrate` must run before usersync serves it.
var ErrNeedsMigration = errors.New("the database needs `usersync migrate`")

// ErrReadOnly: the database refuses writes (a file or a disk that became
// read-only). It is always wrapped together with ErrUnavailable;
// readiness reports it although the database still answers a ping.
var ErrReadOnly = errors.New("the database cannot be written")

// ErrForeignData: the database holds data usersync did not write (an
// application's own collections, another program's file). usersync
// refuses it before writing anything.
var ErrForeignData = errors.New("the database holds data usersync did not write")

// ErrUnsupportedEngine: the database engine at MONGODB_URI cannot keep a
// rule usersync depends on (a unique index as usersync needs it, atomic
// single-document updates). usersync refuses it at start rather than at
// the first write that would break the rule.
var ErrUnsupportedEngine = errors.New("the database engine cannot keep a rule usersync depends on")

// PublicError is an error whose message a client may read. Its message is
// written in usersync's own words, with a client's values only quoted and
// bounded (Quote), never the text of another layer's error (a driver's, a
// library's, which may hold other users' data). The HTTP layer sends a
// client only the message of a PublicError; any other error's text stays
// in the server's log.
type PublicError struct {
	// Kind is the sentinel the error wraps (ErrInvalid, ErrNotFound...).
	Kind error
	// Msg is the message a client sees.
	Msg string
	// Field names the field or parameter at fault, when there is one. It
	// is always one of usersync's own names (never a key a client made up),
	// so logs and metrics may carry it.
	Field string
	// Reason, when set, is a fixed word that says what is wrong for logs
	// and metrics ("not_utf8", "duplicate_key").
	Reason string
	// Cause is the error behind it, for the log; it is never shown to a
	// client.
	Cause error
}

// Public returns a PublicError of kind with the message format makes of
// args. Values a client chose must be passed through Quote.
func Public(kind error, format string, args ...any) *PublicError {
	return &PublicError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// In sets the field at fault, one of usersync's own names.
func (e *PublicError) In(field string) *PublicError { e.Field = field; return e }

// Because sets the cause, for the log.
func (e *PublicError) Because(cause error) *PublicError { e.Cause = cause; return e }

// For sets the reason, a fixed word.
func (e *PublicError) For(reason string) *PublicError { e.Reason = reason; return e }

// Error is the message, followed by the cause's when there is one: what the
// log and an event's stored error say.
func (e *PublicError) Error() string {
	if e.Cause != nil {
		return e.Msg + ": " + e.Cause.Error()
	}
	return e.Msg
}

// Unwrap returns Kind: errors.Is(err, ErrInvalid) holds for an invalid
// PublicError. The cause is not unwrapped: its kind is not this error's.
func (e *PublicError) Unwrap() error { return e.Kind }

// ErrBadCursor returns the error of a cursor that no page of this API
// answered: a client's to fix, named as the parameter it came in.
func ErrBadCursor() error {
	return Public(ErrInvalid, "cursor is not one this API returned").In("cursor")
}
