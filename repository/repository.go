// Package repository is the contract between usersync and the stores that
// keep its data: the MongoDB store (package repository/mongo), for
// production and any number of instances, and the embedded SQLite store
// (package repository/sqlite), for a single process with nothing to
// install. Both implement Store and pass one behaviour suite
// (repository/storetest); the consumers (sync, api) declare the smaller
// interfaces they use, which these satisfy. cmd/usersync chooses the store
// once, from the configuration.
//
// Error contract, for every method of every store: an error wraps
// models.ErrNotFound for something that does not exist, models.ErrInvalid
// for an argument (a cursor, a document) that can never be used,
// models.ErrEmailTaken for an email another active user holds,
// models.ErrUnavailable (with models.ErrStorageFull when the disk is full)
// for a database that cannot serve now but may later. A write that lost a
// race is retried inside the store. A cancelled context is returned as it
// is, so that callers can tell a client that left from a database failing.
package repository

import (
	"context"
	"time"

	"github.com/usersync/usersync/models"
)

// Store is one opened store.
type Store interface {
	Users() Users
	Events() Events
	Leases() Leases
	Activity() Activity
	Runs() Runs

	// EraseUser erases now the personal data kept in the events of a
	// deleted user; it wraps models.ErrNotFound for an unknown user and
	// models.ErrConflict for an active one.
	EraseUser(ctx context.Context, userID string, now time.Time) (models.Erasure, error)
	// EraseDeletedBefore erases the events of users deleted before
	// cutoff, except events still to be processed (Pending).
	EraseDeletedBefore(ctx context.Context, cutoff, now time.Time) (models.Erasure, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// BuildIndexes builds what serving needs beyond correctness (indexes
	// that are slow to build on a large collection), however long it
	// takes; serve runs it in the background, migrate in the foreground.
	BuildIndexes(ctx context.Context) error
	// Close releases the store.
	Close(ctx context.Context) error
}

// Users is the users of a store.
type Users interface {
	// Apply writes ch if it is newer than the stored state of an active
	// user (models.Decide says what it does). It returns the outcome;
	// OutcomeApplied also for a retry of the change already applied.
	Apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error)
	// Get returns the user, deleted or not.
	Get(ctx context.Context, userID string) (models.User, error)
	// List returns one page of users in a stable order; with an email,
	// the one active user holding it.
	List(ctx context.Context, f models.UserFilter) (models.UserPage, error)
	// Changes returns one page of the change feed, oldest change first;
	// NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error)
	// WalkActive calls fn with the id of every active user first written
	// before writtenBefore, and stops at fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error
}

// Events is the event inbox and log of a store.
type Events interface {
	// Record stores ev as stored, or returns the event already stored
	// under its eventId with created=false.
	Record(ctx context.Context, ev models.Event) (stored models.Event, created bool, err error)
	// MarkProcessed marks the event processed with outcome, unless it is
	// processed already: the first outcome stays.
	MarkProcessed(ctx context.Context, id string, outcome models.Outcome, now time.Time) error
	// MarkFailed records a failed attempt, unless the event is processed.
	MarkFailed(ctx context.Context, id string, cause string, retryAt *time.Time) error
	// Claim leases the event, read with attempts attempts, to one sweep
	// until now+lease; false when another sweep holds it, or it has had
	// another attempt since, or it is processed.
	Claim(ctx context.Context, id string, attempts int, now time.Time, lease time.Duration) (bool, error)

	// Get returns the event whose id or eventId is id, body included.
	Get(ctx context.Context, id string) (models.Event, error)
	// List returns one page of the event log, newest first, without bodies.
	List(ctx context.Context, f models.EventFilter) (models.EventPage, error)
	// Stats counts events per status and per outcome without reading the
	// processed ones.
	Stats(ctx context.Context) (models.EventStats, error)
	// Due returns up to limit events for the recovery sweep: stored ones
	// received before stuckBefore and failed ones whose retry time has
	// come, oldest Clerk state first, bodies included.
	Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error)
	// DeleteProcessedBefore deletes up to limit events processed before
	// cutoff, never stored or failed ones, and says how many.
	DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error)
	// FailureGroups reads at most scan (1 to models.MaxFailureScan) failed
	// events, newest first, through the status index, and groups them by
	// models.FailureReason (see models.GroupFailures).
	FailureGroups(ctx context.Context, scan int) (models.FailureGroups, error)
}

// Activity is the per-minute and per-hour counts of events received and
// of processing outcomes that the operator's console charts. They are
// written as events arrive (sync.Activity) and never counted from the
// event log.
type Activity interface {
	// Add adds n to the count of kind in the minute bucket and in the
	// hour bucket that hold at, and deletes the buckets older than
	// models.ActivityMinuteRetention (minutes) and
	// models.ActivityHourRetention (hours). A kind that is not
	// [a-z][a-z_]{0,31} wraps models.ErrInvalid. Several processes may
	// add to one bucket at once: every count stays.
	Add(ctx context.Context, at time.Time, kind string, n int64) error
	// Buckets returns the buckets of size (models.ActivityMinute or
	// models.ActivityHour, else models.ErrInvalid) that start in
	// [from, to), oldest first: one range of buckets, whatever the number
	// of events. A bucket without counts may be absent.
	Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error)
}

// Runs keeps the summaries of the last models.KeptReconcileRuns reconcile
// and backfill runs, for the console.
type Runs interface {
	// Record keeps r, with an ID set here and its error cut to
	// models.MaxRunError bytes, and deletes all but the last
	// models.KeptReconcileRuns summaries (by start time).
	Record(ctx context.Context, r models.ReconcileSummary) (models.ReconcileSummary, error)
	// Last returns the last n (1 to models.KeptReconcileRuns) summaries,
	// the latest start first.
	Last(ctx context.Context, n int) ([]models.ReconcileSummary, error)
}

// Leases let one process at a time, among all those on a database, do a
// piece of work (a scheduled reconcile).
type Leases interface {
	// Acquire takes the lease until until if it is free (never taken, or
	// expired by now), and reports whether owner holds it.
	Acquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	// Extend moves the expiry of the lease owner holds; false when owner
	// no longer holds it.
	Extend(ctx context.Context, name, owner string, until time.Time) (bool, error)
	// Reclaim takes the lease for owner until until if it expires after
	// horizon (later than any schedule sets it: stale), and reports
	// whether owner holds it now.
	Reclaim(ctx context.Context, name, owner string, horizon, until time.Time) (bool, error)
}

// Seeder writes users and events in bulk, as they would be after their
// events were applied, for the scale program and tests: never on a path
// that serves requests.
type Seeder interface {
	SeedUsers(ctx context.Context, changes []models.Change, now time.Time) error
	SeedEvents(ctx context.Context, events []models.Event) error
}

// Migrator brings a store's data to this version of usersync.
type Migrator interface {
	// Migrate changes only data it recognises as usersync's, never
	// removes a document before its replacement is durable, and can be run
	// again after a crash at any point. With dryRun it changes nothing and
	// reports what it would do.
	Migrate(ctx context.Context, dryRun bool) (MigrateReport, error)
}

// MigrateReport says what a migration did, or would do.
type MigrateReport struct {
	Changed int    // documents or rows changed (or to change)
	Summary string // one line for an operator
}
