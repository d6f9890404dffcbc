// Package mongo is usersync's MongoDB store: one store per collection,
// their indexes, and the one place where driver errors become the
// sentinel errors of package models.
//
// Everything here stays inside what MongoDB and the DocumentDB-based
// engines do the same way (docs/mongodb.md): no
// transactions, no partial indexes, no collations; every write whose
// result depends on a document's state is one conditional write, which
// the server applies atomically.
package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Collection names, before Options.CollectionPrefix.
const (
	UsersCollection         = "users"
	OrganizationsCollection = "organizations"
	MembershipsCollection   = "memberships"
	EventsCollection        = "user_events"
	// CountersCollection holds the event counters (see counters.go), and
	// the marks of migrations of earlier versions.
	CountersCollection = "counters"
)

// Store is a connection to one database and its stores.
type Store struct {
	client    *mongo.Client
	db        *mongo.Database
	uri       string
	opTimeout time.Duration
	names     collNames
	server    Server
	// owned is set once this store has checked, or made, the database's
	// mark (see ownership.go); nothing builds indexes before.
	owned    bool
	users    *Users
	orgs     *Organizations
	members  *Memberships
	invites  *Invitations
	events   *Events
	activity *Activity
	runs     *Runs
	billing  *Billing
	outbound *Outbound
	// batch, if set, shares the round trips of concurrent deliveries.
	batch *batcher
}

// Options tune a connection.
type Options struct {
	// ServerSelectionTimeout bounds how long an operation waits for a
	// reachable server before failing with models.ErrUnavailable (default
	// 5 s; the URI's serverSelectionTimeoutMS wins).
	ServerSelectionTimeout time.Duration
	// OperationTimeout bounds every operation whose context has no
	// deadline of its own (default 10 s; the URI's timeoutMS wins).
	OperationTimeout time.Duration
	// Monitor, if set, sees every command sent (tests count round trips).
	Monitor *event.CommandMonitor
	// CollectionPrefix is put before the name of each of usersync's
	// collections, for a database usersync must share with another
	// program: "usersync_" gives usersync_users, usersync_user_events and
	// so on. Letters, digits, _, - and . only.
	CollectionPrefix string
	// WalkBatch is how many documents one batch of a WalkActive's cursor
	// holds (default 1000); tests make it small.
	WalkBatch int
	// DeliveryBatch is how many deliveries in flight at once share their
	// round trips at most (default DefaultDeliveryBatch); 1 turns the
	// sharing off: each delivery makes its own writes.
	DeliveryBatch int
}

// DefaultOperationTimeout bounds an operation whose context has no deadline.
const DefaultOperationTimeout = 10 * time.Second

// indexBuildTimeout bounds one index build: long enough for any
// collection usersync keeps, and a deadline of its own so that the
// client's operation timeout does not apply to it.
const indexBuildTimeout = 24 * time.Hour

// Open connects to the database named dbName at uri. It does not wait for
// the server: Prepare does, and must be called before the store is used.
//
// The URI is the user's: what it sets wins over every default here (see
// clientOptions). A URI that asks for unacknowledged writes (w=0) is
// refused with an error wrapping models.ErrInvalid.
func Open(ctx context.Context, uri, dbName string, o Options) (*Store, error) {
	if o.OperationTimeout == 0 {
		o.OperationTimeout = DefaultOperationTimeout
	}
	if err := checkPrefix(o.CollectionPrefix); err != nil {
		return nil, err
	}
	opts, err := clientOptions(uri, o)
	if err != nil {
		return nil, err
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURI(uri), err)
	}
	db := client.Database(dbName)
	names := collNames{prefix: o.CollectionPrefix}
	if o.WalkBatch <= 0 {
		o.WalkBatch = defaultWalkBatch
	}
	primary := options.Collection().SetReadPreference(readpref.Primary())
	counters := &counters{coll: db.Collection(names.of(CountersCollection), primary)}
	s := &Store{
		client:    client,
		db:        db,
		uri:       uri,
		opTimeout: o.OperationTimeout,
		names:     names,
		users: &Users{
			coll: db.Collection(names.of(UsersCollection)), primary: db.Collection(names.of(UsersCollection), primary),
			events: db.Collection(names.of(EventsCollection), primary), walkBatch: o.WalkBatch,
		},
		orgs: &Organizations{
			coll: db.Collection(names.of(OrganizationsCollection)), primary: db.Collection(names.of(OrganizationsCollection), primary),
			walkBatch: o.WalkBatch,
		},
		members: &Memberships{
			coll: db.Collection(names.of(MembershipsCollection)), primary: db.Collection(names.of(MembershipsCollection), primary),
			users: db.Collection(names.of(UsersCollection), primary), walkBatch: o.WalkBatch,
		},
		invites: &Invitations{
			coll: db.Collection(names.of(InvitationsCollection)), primary: db.Collection(names.of(InvitationsCollection), primary),
			orgs: db.Collection(names.of(OrganizationsCollection), primary),
		},
		events: &Events{
			coll: db.Collection(names.of(EventsCollection)), primary: db.Collection(names.of(EventsCollection), primary),
			users:       db.Collection(names.of(UsersCollection), primary),
			memberships: db.Collection(names.of(MembershipsCollection), primary),
			invitations: db.Collection(names.of(InvitationsCollection), primary), counters: counters,
		},
		activity: &Activity{coll: db.Collection(names.of(ActivityCollection))},
		runs:     &Runs{coll: db.Collection(names.of(RunsCollection))},
		billing: &Billing{
			subs: db.Collection(names.of(SubscriptionsCollection)), subsP: db.Collection(names.of(SubscriptionsCollection), primary),
			items: db.Collection(names.of(SubscriptionItemsCollection)), itemsP: db.Collection(names.of(SubscriptionItemsCollection), primary),
			attempts: db.Collection(names.of(PaymentAttemptsCollection)), attemptsP: db.Collection(names.of(PaymentAttemptsCollection), primary),
			plans: db.Collection(names.of(BillingPlansCollection)), plansP: db.Collection(names.of(BillingPlansCollection), primary),
		},
	}
	s.outbound = &Outbound{
		events: db.Collection(names.of(EventsCollection), primary), endpoints: db.Collection(names.of(EndpointsCollection), primary),
		slots:      db.Collection(names.of(LeasesCollection), primary),
		deliveries: db.Collection(names.of(DeliveriesCollection), primary),
		attempts:   db.Collection(names.of(DeliveryAttemptsCollection)), share: newShare(),
	}
	s.users.members, s.orgs.members, s.members.orgs = s.members, s.members, s.orgs
	s.orgs.invites = s.invites
	if o.DeliveryBatch <= 0 {
		o.DeliveryBatch = DefaultDeliveryBatch
	}
	if o.DeliveryBatch > 1 {
		s.batch = newBatcher(s, o.DeliveryBatch)
	}
	return s, nil
}

// Defaults of a connection, where the URI says nothing.
const (
	defaultServerSelectionTimeout = 5 * time.Second
	defaultAppName                = "usersync"
)

// clientOptions are the driver's options for uri: the URI's own, and a
// default for what it leaves unset. The driver parses the URI
// (connstring, and for mongodb+srv its DNS records) once, in ApplyURI;
// an option it leaves nil is one the URI did not set. So a URI's w,
// journal, timeoutMS, serverSelectionTimeoutMS, connectTimeoutMS,
// appName, readPreference and retryWrites all stand: Amazon DocumentDB
// and Cosmos DB are used with retryWrites=false, a w=1 or a
// secondaryPreferred is a choice of the user's. The defaults:
//   - writes are acknowledged by a majority of the replica set (w:
//     "majority"; a URI that sets only journal keeps it), so that an
//     acknowledged event survives a failover;
//   - an operation without a deadline of its own gets o.OperationTimeout;
//   - server selection and connecting give up after
//     o.ServerSelectionTimeout (5 s), and the server sees the application
//     name "usersync".
//
// Reads that decide a write go to the primary, whatever the URI's read
// preference (see Users.Apply and Events.Record): that is part of the
// write, not a preference. Every other read follows the URI.
func clientOptions(uri string, o Options) (*options.ClientOptions, error) {
	opts := options.Client().ApplyURI(uri)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("MONGODB_URI %s: %w: %w", redactURI(uri), models.ErrInvalid, err)
	}
	if wc := opts.WriteConcern; wc != nil && !wc.Acknowledged() {
		return nil, fmt.Errorf("MONGODB_URI %s asks for unacknowledged writes (w=0): usersync answers a webhook only once its event is stored: %w",
			redactURI(uri), models.ErrInvalid)
	}
	switch {
	case opts.WriteConcern == nil:
		opts.SetWriteConcern(writeconcern.Majority())
	case opts.WriteConcern.W == nil: // journal alone
		wc := *opts.WriteConcern
		wc.W = writeconcern.Majority().W
		opts.SetWriteConcern(&wc)
	}
	if opts.Timeout == nil && o.OperationTimeout > 0 {
		opts.SetTimeout(o.OperationTimeout)
	}
	selection := o.ServerSelectionTimeout
	if selection == 0 {
		selection = defaultServerSelectionTimeout
	}
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(selection)
	}
	if opts.ConnectTimeout == nil {
		opts.SetConnectTimeout(selection)
	}
	if opts.AppName == nil {
		opts.SetAppName(defaultAppName)
	}
	if o.Monitor != nil {
		opts.SetMonitor(o.Monitor)
	}
	return opts, nil
}

// Close disconnects from the server.
func (s *Store) Close(ctx context.Context) error {
	if s.batch != nil {
		s.batch.close()
	}
	return s.client.Disconnect(ctx)
}

// Ping checks that the database answers; its error wraps
// models.ErrUnavailable when it does not.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.RunCommand(ctx, map[string]int{"ping": 1}).Err(); err != nil {
		return fmt.Errorf("ping: %w", translate(err))
	}
	return nil
}

// Prepare checks that usersync may use the database, and makes what
// correctness needs before the first write. In order, writing nothing
// before it has decided:
//   - it names the engine (see Server) and refuses, with an error wrapping
//     models.ErrUnsupportedEngine, one that cannot hold usersync's rules;
//   - it refuses a database that is not usersync's (see ownership.go): one
//     whose collections of usersync's names hold another program's
//     documents and no mark of usersync's is an error wrapping
//     models.ErrForeignData, naming MONGODB_DATABASE; one of an older
//     usersync an error wrapping models.ErrNeedsMigration, naming usersync
//     migrate (see Migrate);
//   - it creates the collections and the unique indexes (userId, email,
//     eventId; built without a time limit however large the collections),
//     checks with listIndexes that the engine keeps them unique and sparse
//     as asked, and refuses it (models.ErrUnsupportedEngine) if not;
//   - it marks a database it prepared for the first time.
//
// The other indexes are built by EnsureIndexes: serve runs it in the
// background, usersync migrate in the foreground.
func (s *Store) Prepare(ctx context.Context) error {
	own, sv, err := s.inspect(ctx)
	if err != nil {
		return err
	}
	if own == ownOlder {
		return fmt.Errorf("database %q holds data of an older usersync: stop it and run `usersync migrate`: %w",
			s.db.Name(), models.ErrNeedsMigration)
	}
	return s.setUp(ctx, sv, true)
}

// Server returns the engine Prepare or Migrate found.
func (s *Store) Server() Server { return s.server }

// inspect names the server, refuses one that cannot hold usersync's
// rules, and judges the database (see decideOwnership), writing nothing.
func (s *Store) inspect(ctx context.Context) (ownership, survey, error) {
	var info bson.Raw
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return 0, survey{}, fmt.Errorf("buildInfo: %w", translate(err))
	}
	s.server = identifyServer(info, s.uri)
	if err := refuseServer(s.server); err != nil {
		return 0, survey{}, err
	}
	sv, err := s.survey(ctx)
	if err != nil {
		return 0, sv, err
	}
	own, err := decideOwnership(sv)
	return own, sv, err
}

// setUp makes, in a database inspect found to be usersync's, what
// correctness needs: the collections and the unique indexes, checked;
// with mark, it then marks the database (Migrate marks it only once the
// data is in shape).
func (s *Store) setUp(ctx context.Context, sv survey, mark bool) error {
	missing, populated := map[string][]string{}, map[string]bool{}
	for _, r := range uniqueRules {
		c, ok := sv.colls[r.base]
		populated[r.base] = ok && len(c.sample) > 0
		if !ok || !slices.ContainsFunc(c.indexes, func(sp indexSpec) bool { return sp.Name == r.index }) {
			missing[r.base] = append(missing[r.base], r.index)
		}
	}
	if err := checkCanCreateUnique(s.server, missing, populated); err != nil {
		return err
	}
	if err := s.createCollections(ctx); err != nil {
		return err
	}
	bctx, cancel := context.WithTimeout(ctx, indexBuildTimeout)
	defer cancel()
	if err := s.ensureIndexes(bctx, true); err != nil {
		return err
	}
	specs := map[string][]indexSpec{}
	for _, coll := range []*mongo.Collection{s.users.primary, s.orgs.primary, s.members.primary, s.invites.primary, s.events.primary} {
		sp, err := listIndexes(ctx, coll)
		if err != nil {
			return err
		}
		specs[strings.TrimPrefix(coll.Name(), s.names.prefix)] = sp
	}
	if err := checkUniqueIndexes(s.server, specs); err != nil {
		return err
	}
	if mark && (sv.mark == nil || sv.mark.Schema != schemaVersion) {
		if err := s.writeMark(ctx, time.Now()); err != nil {
			return err
		}
	}
	s.owned = mark
	return nil
}

// createCollections creates the collections that do not exist yet.
func (s *Store) createCollections(ctx context.Context) error {
	names, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("list collections: %w", translate(err))
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	bases := []string{UsersCollection, OrganizationsCollection, MembershipsCollection, InvitationsCollection, EventsCollection, CountersCollection, MetaCollection}
	for _, base := range slices.Concat(bases, billingCollections, outboundCollections) {
		n := s.names.of(base)
		if have[n] {
			continue
		}
		err := s.db.CreateCollection(ctx, n)
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Code == 48 { // NamespaceExists: created meanwhile
			err = nil
		}
		if err != nil {
			return fmt.Errorf("create collection %s: %w", n, translate(err))
		}
	}
	return nil
}

// Drop removes usersync's collections, and the database when nothing
// else is left in it. Tests use it to clean up.
func (s *Store) Drop(ctx context.Context) error {
	for _, base := range ownedCollections {
		if err := s.db.Collection(s.names.of(base)).Drop(ctx); err != nil {
			return fmt.Errorf("drop %s: %w", s.names.of(base), translate(err))
		}
	}
	names, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("list collections: %w", translate(err))
	}
	if len(names) == 0 {
		return translate(s.db.Drop(ctx))
	}
	return nil
}

// CollectionName is the name of the collection base (UsersCollection,
// say) in this store's database, prefixed as Options.CollectionPrefix
// says.
func (s *Store) CollectionName(base string) string { return s.names.of(base) }

// Database returns the underlying database, for tools that seed or inspect
// it directly (tests, benchmarks).
func (s *Store) Database() *mongo.Database { return s.db }

// EnsureIndexes creates every index of every collection that is missing
// and drops the ones no query uses any more. It is idempotent. An index
// build on a large collection takes as long as it takes (up to 24 h):
// call it with a context that has no shorter deadline.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	if !s.owned {
		return errors.New("build indexes: the database has not been prepared (Prepare or Migrate)")
	}
	ctx, cancel := context.WithTimeout(ctx, indexBuildTimeout)
	defer cancel()
	return s.ensureIndexes(ctx, false)
}

// ensureIndexes builds the indexes of the users, organizations,
// memberships, events, subscriptions, subscription items, payment
// attempts, billing plans, deliveries and delivery attempts (endpoints
// are read by _id alone). The leases, activity and reconcile_runs
// collections are read and written by _id alone (activity and runs by
// ranges of an _id that sorts as they are read): they need no index of
// their own, and are made by their first write.
func (s *Store) ensureIndexes(ctx context.Context, uniqueOnly bool) error {
	for _, c := range []struct {
		coll     *mongo.Collection
		want     []mongo.IndexModel
		obsolete []string
	}{
		{s.users.coll, userIndexes, obsoleteUserIndexes},
		{s.orgs.coll, orgIndexes, nil},
		{s.members.coll, membershipIndexes, nil},
		{s.invites.coll, invitationIndexes, nil},
		{s.events.coll, eventIndexes, obsoleteEventIndexes},
		{s.billing.subs, subIndexes, nil},
		{s.billing.items, itemIndexes, nil},
		{s.billing.attempts, attemptIndexes, nil},
		{s.billing.plans, planIndexes, nil},
		{s.outbound.deliveries, deliveryIndexes, nil},
		{s.outbound.attempts, deliveryAttemptIndexes, nil},
	} {
		want := c.want
		if uniqueOnly {
			want = nil
			for _, m := range c.want {
				name := indexName(m.Keys.(bson.D))
				if slices.ContainsFunc(uniqueRules, func(r uniqueRule) bool { return r.index == name }) {
					want = append(want, m)
				}
			}
		}
		if err := createIndexes(ctx, c.coll, want, c.obsolete); err != nil {
			return err
		}
	}
	return nil
}

// createIndexes creates the indexes that coll lacks, by name, and drops
// the obsolete ones it has. An index of that name made otherwise is left
// as it is: Prepare's check of the unique ones refuses it (see
// checkUniqueIndexes).
func createIndexes(ctx context.Context, coll *mongo.Collection, want []mongo.IndexModel, obsolete []string) error {
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		return fmt.Errorf("list indexes of %s: %w", coll.Name(), translate(err))
	}
	have := map[string]bool{}
	for _, s := range specs {
		have[s.Name] = true
	}
	for _, name := range obsolete {
		if have[name] {
			if err := coll.Indexes().DropOne(ctx, name); err != nil {
				return fmt.Errorf("drop index %s of %s: %w", name, coll.Name(), translate(err))
			}
		}
	}
	var missing []mongo.IndexModel
	for _, m := range want {
		if !have[indexName(m.Keys.(bson.D))] {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// Instances starting at once on a new database create the same
	// indexes at once: the DocumentDB engines can answer one of them with
	// a deadlock.
	if _, err := retryConflicts(ctx, func() ([]string, error) { return coll.Indexes().CreateMany(ctx, missing) }); err != nil {
		return fmt.Errorf("create indexes on %s: %w", coll.Name(), translate(err))
	}
	return nil
}

// indexName is the name the server gives an index of keys: field_1_other_-1.
func indexName(keys bson.D) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s_%v", k.Key, k.Value))
	}
	return strings.Join(parts, "_")
}

// translate turns a driver error into one that wraps a models sentinel where
// one applies, keeping the driver error in the chain for logs. A cancelled
// context is left as it is: it is the caller going away, not the database
// failing, and callers tell the two apart. A unique-index violation is
// models.ErrEmailTaken for the email index and errDuplicate (which stays in
// the store) for any
// other, whatever code or words the engine used, and its text never
// carries the server's message, which quotes the duplicate value (see
// conflictError).
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, mongo.ErrNoDocuments) {
		return models.ErrNotFound
	}
	var translated *conflictError
	var transient *transientError
	if errors.Is(err, context.Canceled) || errors.As(err, &translated) || errors.As(err, &transient) {
		return err
	}
	if index, ok := uniqueViolation(err); ok {
		return translateConflict(err, index)
	}
	switch {
	case isStorageFull(err):
		return storageFull(err)
	case isTransientConflict(err):
		return &transientError{driver: err}
	case isUnavailable(err):
		return fmt.Errorf("%w: %w", models.ErrUnavailable, err)
	}
	return err
}

// unavailableCodes are the server errors a retry may heal: a replica set
// electing a new primary or shutting down, an unreachable host.
var unavailableCodes = []int{
	6,     // HostUnreachable
	7,     // HostNotFound
	89,    // NetworkTimeout
	91,    // ShutdownInProgress
	189,   // PrimarySteppedDown
	9001,  // SocketException
	10107, // NotWritablePrimary
	11600, // InterruptedAtShutdown
	11602, // InterruptedDueToReplStateChange
	13435, // NotPrimaryNoSecondaryOk
	13436, // NotPrimaryOrSecondary
}

// isUnavailable reports whether err says the database cannot serve now
// but may soon: network errors, no server to select, timeouts, failover.
func isUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	var sse topology.ServerSelectionError
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.As(err, &sse) ||
		errors.Is(err, mongo.ErrClientDisconnected) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if se.HasErrorLabel("RetryableWriteError") || se.HasErrorLabel("NetworkError") {
		return true
	}
	for _, code := range unavailableCodes {
		if se.HasErrorCode(code) {
			return true
		}
	}
	return false
}

// redactURI drops the credentials from a MongoDB URI for error messages.
func redactURI(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "the configured URI"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "REDACTED@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// Users returns the users collection.
func (s *Store) Users() repository.Users { return s.users }

// Organizations returns the organizations collection.
func (s *Store) Organizations() repository.Organizations { return s.orgs }

// Memberships returns the memberships collection.
func (s *Store) Memberships() repository.Memberships { return s.members }

// Invitations returns the invitations collection.
func (s *Store) Invitations() repository.Invitations { return s.invites }

// Events returns the events collection.
func (s *Store) Events() repository.Events { return s.events }

// Leases returns the leases of the database.
func (s *Store) Leases() repository.Leases { return NewLeases(s) }

// Activity returns the activity collection: the counts of the console's
// charts.
func (s *Store) Activity() repository.Activity { return s.activity }

// Billing returns the Clerk Billing collections.
func (s *Store) Billing() repository.Billing { return s.billing }

// Runs returns the reconcile_runs collection.
func (s *Store) Runs() repository.Runs { return s.runs }

// BuildIndexes is EnsureIndexes.
func (s *Store) BuildIndexes(ctx context.Context) error { return s.EnsureIndexes(ctx) }

var (
	_ repository.Store    = (*Store)(nil)
	_ repository.Migrator = (*Store)(nil)
)
