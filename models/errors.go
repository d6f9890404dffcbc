// Package models holds usersync's domain types: users, events and their
// statuses, the Clerk webhook payload shapes, and the sentinel errors every
// other package wraps.
package models

import "errors"

// Sentinel errors. Stores and services wrap them with %w; the HTTP layer maps
// them to statuses in one place (api/errors.go).
var (
	// ErrNotFound: the thing asked for does not exist (or is hidden).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique rule or a state rule forbids the change.
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

// ErrEmailTaken: the user's email is held by another active user. The
// change may apply once that user changes email or is deleted; Clerk
// itself forbids two users one email, so it is a matter of order.
var ErrEmailTaken = errors.New("the user's email is held by another active user")

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
