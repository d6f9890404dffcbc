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
	"errors"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// Store is one opened store.
type Store interface {
	Users() Users
	Organizations() Organizations
	Memberships() Memberships
	Invitations() Invitations
	Events() Events
	Leases() Leases
	Activity() Activity
	Runs() Runs
	Billing() Billing
	Outbound() Outbound

	// Deliver stores ev as Events.Record does, applies ch (the change ev
	// carries, of any kind) as its kind's Apply does, and marks ev
	// processed with the outcome. An event finished before (processed or
	// discarded) is returned as it is, with no outcome: a duplicate is
	// never applied again. An error with a stored event (Delivered.Event.ID
	// set) leaves the event stored, for the caller to mark it failed; an
	// error without one stored nothing. The embedded store makes the three
	// steps one transaction; the MongoDB store makes them in turn, each
	// idempotent, so that a crash between two is healed by the event's
	// next delivery or the recovery sweep (deliveries in flight at once
	// share their writes, and write a new event once, processed: see
	// docs/mongodb.md).
	Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)
	// Reapply applies ch, the change of the stored event ev, and marks ev
	// processed: Deliver for an event stored before (the recovery sweep's
	// and a replay's). An error leaves ev as it was, for the caller to
	// mark it failed.
	Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)

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
	// OutcomeApplied also for a retry of the change already applied. A
	// deletion deletes the user's active memberships too, every time it is
	// applied or found applied (so that its next delivery heals a crash
	// between the two writes, where they are two).
	Apply(ctx context.Context, ch models.UserChange, now time.Time) (models.Outcome, error)
	// Get returns the user, deleted or not.
	Get(ctx context.Context, userID string) (models.User, error)
	// List returns one page of users in a stable order; with an email,
	// the one active user holding it. Active users are neither deleted
	// nor deprovisioned; IncludeDeleted lists both.
	List(ctx context.Context, f models.UserFilter) (models.UserPage, error)
	// Changes returns one page of the change feed, oldest change first;
	// NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error)
	// WalkActive calls fn with the id of every active user first written
	// before writtenBefore, and stops at fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error
}

// Organizations is the organizations of a store.
type Organizations interface {
	// Apply writes ch as models.Decide says and returns the outcome
	// (OutcomeDeleted for a deleted organization). A deletion deletes the
	// organization's active memberships too, every time it is applied or
	// found applied.
	Apply(ctx context.Context, ch models.OrganizationChange, now time.Time) (models.Outcome, error)
	// Get returns the organization, deleted or not.
	Get(ctx context.Context, orgID string) (models.Organization, error)
	// List returns one page of organizations in a stable order: active
	// ones, or all with IncludeDeleted; with a slug, those holding it.
	List(ctx context.Context, f models.OrganizationFilter) (models.OrganizationPage, error)
	// Changes returns one page of the change feed, oldest change first;
	// NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.OrganizationPage, error)
	// WalkActive calls fn with the id of every active organization first
	// written before writtenBefore, and stops at fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(orgID string) error) error
}

// Memberships is the organization memberships of a store. Every read
// shows a membership's member from the user's current record when the
// store has the user (models.MemberOf), else from the membership's
// public_user_data: it is joined when read, never copied.
type Memberships interface {
	// Apply applies the organization state ch nests as Organizations.Apply
	// does, then ch to its membership as models.Decide says. A state of a
	// membership whose organization or user is deleted is written as a
	// tombstone, and so is one that an active membership of the same
	// (organization, user) with a newer state holds the pair against (Clerk
	// has one membership per pair at a time: the older one was left); a
	// holder with an older state becomes a tombstone instead. The outcome
	// is OutcomeDeleted when the membership, its organization or its user
	// is deleted.
	Apply(ctx context.Context, ch models.MembershipChange, now time.Time) (models.Outcome, error)
	// Get returns the membership, deleted or not.
	Get(ctx context.Context, membershipID string) (models.Membership, error)
	// List returns one page of the memberships of an organization or of a
	// user, in a stable order: those models.ActiveMember counts as active,
	// or all with IncludeDeleted. A user's memberships carry their
	// organization's summary.
	List(ctx context.Context, f models.MembershipFilter) (models.MembershipPage, error)
	// Changes returns one page of the change feed of every membership,
	// oldest change first; NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.MembershipPage, error)
	// WalkActive calls fn with the id of every membership that is not a
	// tombstone and was first written before writtenBefore, and stops at
	// fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(membershipID string) error) error
}

// Invitations is the organization invitations of a store. Clerk never
// deletes an invitation; its organization's deletion makes it a
// tombstone (Organizations.Apply, in every order of arrival).
type Invitations interface {
	// Apply applies ch to its invitation as models.Decide says. A state of
	// an invitation whose organization is deleted is written as a
	// tombstone; the outcome is then OutcomeDeleted.
	Apply(ctx context.Context, ch models.InvitationChange, now time.Time) (models.Outcome, error)
	// Get returns the invitation, deleted or not.
	Get(ctx context.Context, invitationID string) (models.Invitation, error)
	// List returns one page of the invitations of an organization in
	// invitation id order, those f.KeepInvitation keeps. A page may hold
	// fewer than the limit while NextCursor is set.
	List(ctx context.Context, f models.InvitationFilter) (models.InvitationPage, error)
	// Changes returns one page of the change feed of every invitation,
	// oldest change first; NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.InvitationPage, error)
}

// Billing is the Clerk Billing objects of a store: subscriptions, their
// items, payment attempts, and each payer's plan. A store applies them as
// every kind, through Deliver and Reapply (models.Decide orders each
// object's states by data.updated_at; Clerk deletes none of them):
//   - a subscription's state, then each item it lists as the item's own
//     state (a models.SubscriptionItemChange, by the item's version: the
//     very write of a standalone item event);
//   - after any item write, the payer's plan (models.PlanOf of all the
//     payer's stored items), in the same transaction on the embedded store
//     and before the event's mark on MongoDB, so that a crash between the
//     two is healed by the event's next delivery or the sweep.
//
// The outcome of a subscription's event is applied when the subscription
// or any of its items was written, stale when none was.
type Billing interface {
	// Plan returns the payer's stored plan; an error wrapping
	// models.ErrNotFound when the payer has no item.
	Plan(ctx context.Context, payer models.Payer) (models.StoredPlan, error)
	// Items returns the payer's stored items (each item's newest state),
	// the newest Clerk time first, at most models.MaxPayerItems.
	Items(ctx context.Context, payer models.Payer) ([]models.SubscriptionItem, error)
	// Subscription returns one subscription, or an error wrapping
	// models.ErrNotFound.
	Subscription(ctx context.Context, subscriptionID string) (models.Subscription, error)
	// Item and PaymentAttempt read one object (models.ErrNotFound: none).
	Item(ctx context.Context, itemID string) (models.SubscriptionItem, error)
	PaymentAttempt(ctx context.Context, attemptID string) (models.PaymentAttempt, error)
	// PaymentAttempts returns one page of payment attempts as f selects
	// them, the newest Clerk time first; NextCursor is "" on the last
	// page. A malformed cursor wraps models.ErrInvalid.
	PaymentAttempts(ctx context.Context, f models.PaymentAttemptFilter) (models.PaymentAttemptPage, error)
	// Subscriptions returns one page of subscriptions as f selects them,
	// the newest Clerk time first, then the larger id; NextCursor is ""
	// on the last page. A malformed cursor wraps models.ErrInvalid.
	Subscriptions(ctx context.Context, f models.SubscriptionFilter) (models.SubscriptionPage, error)
	// PlanChanges returns one page of the plans' change feed: the payers'
	// plans whose UpdatedAt is within [f.Since, f.Until], oldest change
	// first, then the payer, after the cursor f.After, at most f.Limit.
	// NextCursor is always set. A malformed cursor wraps
	// models.ErrInvalid.
	PlanChanges(ctx context.Context, f models.ChangeFilter) (models.PlanPage, error)
}

// Outbound is what outbound webhooks keep: the endpoints, the outbox of
// changes that applied (written with each change: Deliver and Reapply
// record one while recording is on), each endpoint's delivery of each
// object, and the attempts.
type Outbound interface {
	// SetRecording says whether Deliver and Reapply record the changes
	// that apply in the outbox: while some endpoint is enabled.
	SetRecording(on bool)

	// Endpoints returns every endpoint, by id.
	Endpoints(ctx context.Context) ([]models.Endpoint, error)
	// Endpoint returns one endpoint (models.ErrNotFound: none).
	Endpoint(ctx context.Context, id string) (models.Endpoint, error)
	// No write of an endpoint replaces it whole: each changes its own
	// fields, conditionally, so that none undoes another (an admin's
	// change and the sender's record of the endpoint's health, on any
	// instance). The settings are written over the revision read, which
	// each write of them moves on; the health (FailingSince) only by
	// EndpointFailing and EndpointAnswered.
	//
	// CreateEndpoint stores e, a new endpoint, at revision 1. One from the
	// API is refused (models.EndpointsFull) while models.MaxEndpoints are
	// stored, however many creates race; one from the configuration
	// (FromConfig) is stored whatever their number.
	CreateEndpoint(ctx context.Context, e models.Endpoint) error
	// UpdateEndpoint writes what an admin or the configuration sets of an
	// endpoint (every field but its id, creation, health and revision) from e,
	// if the stored endpoint is still at e.Revision, the revision it was
	// read at: models.ErrEndpointChanged when it moved on meanwhile,
	// models.ErrNotFound when it is gone. It never creates one.
	UpdateEndpoint(ctx context.Context, e models.Endpoint) error
	// EndpointFailing records that endpoint id has failed since at, unless
	// it is failing already; EndpointAnswered records that it answered, or
	// that an admin enabled it again (it is failing no more). Neither
	// writes an endpoint that is gone.
	EndpointFailing(ctx context.Context, id string, at time.Time) error
	EndpointAnswered(ctx context.Context, id string) error
	// DisableEndpoint disables endpoint id for reason if it is enabled
	// and, when failingBefore is set, has been failing since before then
	// (an admin who enabled it again meanwhile cleared that). It reports
	// whether it disabled it.
	DisableEndpoint(ctx context.Context, id, reason string, failingBefore, now time.Time) (bool, error)
	// StartResync starts the resync r of endpoint id, in place of one
	// under way (models.ErrNotFound: no endpoint). SaveResync records its
	// progress if it is still the endpoint's (false: another started
	// since, or the endpoint is gone); a resync done clears NeedsResync.
	// MarkNeedsResync marks a disabled endpoint as needing one. None of
	// them is an admin's setting: UpdateEndpoint leaves them.
	StartResync(ctx context.Context, id string, r models.Resync) error
	SaveResync(ctx context.Context, id string, r models.Resync) (bool, error)
	MarkNeedsResync(ctx context.Context, id string) error
	// DeleteEndpoint deletes an endpoint and its deliveries
	// (models.ErrNotFound: none). A fan-out under way writes none for it.
	DeleteEndpoint(ctx context.Context, id string) error

	// Outbox returns up to limit entries of the outbox, oldest first where
	// the store reads its index in order (a DocumentDB engine does not).
	Outbox(ctx context.Context, limit int) ([]models.Outboxed, error)
	// OutboxOldest returns when the oldest entry of the outbox (the first
	// recorded) applied; false when the outbox is empty.
	OutboxOldest(ctx context.Context) (time.Time, bool, error)
	// Fanout queues each change for the endpoints that want it
	// (models.Delivery.Queue), then takes the entries done out of the
	// outbox. Doing it again changes nothing. It writes no delivery for an
	// endpoint that does not exist, even one deleted while it runs.
	Fanout(ctx context.Context, fs []models.Fanout, done []string, now time.Time) error
	// Due returns up to limit pending deliveries of an endpoint due by
	// now, soonest first where the store reads its index in order (a
	// DocumentDB engine does not: each is due).
	Due(ctx context.Context, endpointID string, now time.Time, limit int) ([]models.Delivery, error)
	// Settle records what became of each attempt of ss (models.Settled)
	// and the attempt: a batch in one write where the store can (one
	// transaction; on MongoDB one bulk write of the deliveries still
	// waiting for the message sent, and one insert of the attempts).
	Settle(ctx context.Context, ss ...models.Settlement) error
	// Delivery returns an endpoint's delivery of one object
	// (models.ErrNotFound: none).
	Delivery(ctx context.Context, endpointID string, kind models.Kind, objectID string) (models.Delivery, error)
	// Deliveries returns a page of an endpoint's deliveries, by key.
	Deliveries(ctx context.Context, f models.DeliveryFilter) (items []models.Delivery, next string, err error)
	// Requeue makes the deliveries f selects pending again, due at now,
	// their last state received forgotten (so it is sent whole): the
	// operator's replay, and an endpoint enabled again (its failed ones).
	// It returns how many it requeued.
	Requeue(ctx context.Context, f models.Requeue, now time.Time) (int, error)
	// Backlog returns the pending deliveries of each endpoint of ids (none:
	// every endpoint) that has some.
	Backlog(ctx context.Context, ids ...string) (map[string]models.Backlog, error)
	// Attempts returns a page of attempts, newest first.
	Attempts(ctx context.Context, f models.AttemptFilter) (items []models.Attempt, next string, err error)
	// DeleteAttemptsBefore deletes up to limit attempts made before
	// cutoff, and returns how many it deleted.
	DeleteAttemptsBefore(ctx context.Context, cutoff time.Time, limit int) (int, error)
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
	// processed ones. Events stored with an earlier version's outcome
	// deleted_user are counted as deleted (models.ReadOutcome), as Get
	// and List read them.
	Stats(ctx context.Context) (models.EventStats, error)
	// Due returns up to limit events for the recovery sweep: stored ones
	// received before stuckBefore and failed ones whose retry time has
	// come, oldest Clerk state first, bodies included.
	Due(ctx context.Context, stuckBefore, now time.Time, limit int) ([]models.Event, error)
	// DeleteProcessedBefore deletes up to limit events processed before
	// cutoff, never stored or failed ones, and says how many.
	DeleteProcessedBefore(ctx context.Context, cutoff time.Time, limit int) (int, error)
	// Discard marks the failed event whose id or eventId is id discarded,
	// as d says, and returns it as it is then: finished, with processedAt
	// d.At (retention deletes it as a processed event), never processed,
	// claimed or replayed again. An event that is not failed, or that a
	// sweep or replay holds (claimed until after d.At), is left as it is,
	// with an error wrapping models.ErrConflict (models.DiscardConflict);
	// an unknown id wraps models.ErrNotFound.
	Discard(ctx context.Context, id string, d models.Discard) (models.Event, error)
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
	// of events. A bucket without counts may be absent. Counts stored
	// under deleted_user (by earlier versions) are read as deleted
	// (models.ReadActivityKind).
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
	// Release gives the lease up if owner holds it, so that another
	// process may take it at once (a graceful stop).
	Release(ctx context.Context, name, owner string) error
}

// Seeder writes users and events in bulk, as they would be after their
// events were applied, for the scale program and tests: never on a path
// that serves requests.
type Seeder interface {
	SeedUsers(ctx context.Context, changes []models.UserChange, now time.Time) error
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

// Page reads one page of at most limit items from a list in a stable
// order, keeping those keep accepts: read(after, n) returns the next n
// items after the cursor after, id an item's cursor. A page is full unless
// the list ends, and next is "" only then, however many items keep
// refuses. Stores use it where a rule that decides what a list shows is
// stated once in Go (models.ActiveMember) rather than in each query
// language.
func Page[T any](limit int, after string, read func(after string, n int) ([]T, error), keep func(T) bool, id func(T) string) (items []T, next string, err error) {
	items = []T{}
	for {
		batch, err := read(after, limit+1)
		if err != nil {
			return nil, "", err
		}
		for _, it := range batch {
			after = id(it)
			if !keep(it) {
				continue
			}
			if len(items) == limit {
				// One more to show: the page is full and the list goes on.
				return items, id(items[limit-1]), nil
			}
			items = append(items, it)
		}
		if len(batch) < limit+1 {
			return items, "", nil
		}
	}
}

// MigrateReport says what a migration did, or would do.
type MigrateReport struct {
	Changed int    // documents or rows changed (or to change)
	Summary string // one line for an operator
}

// EndpointIDs is ids, or when there are none the ids of every endpoint
// of o: the endpoints a read of several is about.
func EndpointIDs(ctx context.Context, o interface {
	Endpoints(ctx context.Context) ([]models.Endpoint, error)
}, ids []string) ([]string, error) {
	if len(ids) > 0 {
		return ids, nil
	}
	eps, err := o.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.ID
	}
	return out, nil
}

// changeEndpointTries bounds the reads and writes of one ChangeEndpoint:
// each retry follows another write of the endpoint.
const changeEndpointTries = 8

// ChangeEndpoint reads endpoint id, changes it with change and writes it
// over the revision it read (UpdateEndpoint), from a new read each time
// another write came between, so that it undoes none: an admin's change,
// or the configuration's. Enabling a disabled endpoint clears its health
// first (it is failing no more: while disabled, nothing is sent to it),
// so that the sender does not disable it again at its next failure for
// having failed too long. It returns the endpoint as written; change's
// error as it is; models.ErrNotFound when the endpoint is gone; an error
// wrapping models.ErrRetryLater when other writes kept coming between.
func ChangeEndpoint(ctx context.Context, o Outbound, id string, change func(*models.Endpoint) error) (models.Endpoint, error) {
	for try := 0; try < changeEndpointTries; try++ {
		e, err := o.Endpoint(ctx, id)
		if err != nil {
			return e, err
		}
		enabled := e.Enabled
		if err := change(&e); err != nil {
			return e, err
		}
		if e.Enabled && !enabled {
			if err := o.EndpointAnswered(ctx, id); err != nil {
				return e, err
			}
			e.FailingSince = nil
		}
		err = o.UpdateEndpoint(ctx, e)
		if errors.Is(err, models.ErrEndpointChanged) {
			continue
		}
		if err != nil {
			return e, err
		}
		e.Revision++
		return e, nil
	}
	return models.Endpoint{}, fmt.Errorf("endpoint %s: other writes kept changing it: %w", models.Quote(id), models.ErrRetryLater)
}
