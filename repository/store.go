// Package repository keeps usersync's data in MongoDB or in the embedded
// engine: one store per collection, their indexes, and the one place where
// driver errors become the sentinel errors of package models.
//
// Everything here stays inside what MongoDB and FerretDB 1.x do the same
// way: no transactions, no partial indexes, no collations.
package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/usersync/usersync/models"
)

// Collection names.
const (
	UsersCollection  = "users"
	EventsCollection = "user_events"
)

// Store is a connection to one database and its stores.
type Store struct {
	client *mongo.Client
	db     *mongo.Database
	Users  *Users
	Events *Events
}

// Options tune a connection.
type Options struct {
	// ServerSelectionTimeout bounds how long an operation waits for a
	// reachable server before failing with models.ErrUnavailable.
	ServerSelectionTimeout time.Duration
	// Monitor, if set, sees every command sent (tests count round trips).
	Monitor *event.CommandMonitor
}

// Open connects to the database named dbName at uri. It does not wait for
// the server: Prepare does, and must be called before the store is used.
func Open(ctx context.Context, uri, dbName string, o Options) (*Store, error) {
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 5 * time.Second
	}
	opts := options.Client().ApplyURI(uri).
		SetServerSelectionTimeout(o.ServerSelectionTimeout).
		SetConnectTimeout(o.ServerSelectionTimeout).
		SetAppName("usersync")
	if o.Monitor != nil {
		opts.SetMonitor(o.Monitor)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURI(uri), err)
	}
	db := client.Database(dbName)
	return &Store{
		client: client,
		db:     db,
		Users:  &Users{coll: db.Collection(UsersCollection)},
		Events: &Events{coll: db.Collection(EventsCollection), payloadDocs: true},
	}, nil
}

// Close disconnects from the server.
func (s *Store) Close(ctx context.Context) error {
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

// Prepare makes sure the indexes exist and sets the store up for the
// server it talks to. On FerretDB (the embedded engine, or a FerretDB at
// MONGODB_URI), which it reports:
//   - writes to one user, and to one event, take turns within this process
//     (see keyLocks): FerretDB's updates are not atomic;
//   - events keep their body raw only, without the "payload" document:
//     FerretDB parses whole documents even to find one by _id, and a
//     payload document makes that about six times slower.
func (s *Store) Prepare(ctx context.Context) (ferretDB bool, err error) {
	if err := s.EnsureIndexes(ctx); err != nil {
		return false, err
	}
	var info bson.Raw
	if err := s.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return false, fmt.Errorf("buildInfo: %w", translate(err))
	}
	if _, err := info.LookupErr("ferretdbVersion"); err != nil {
		return false, nil
	}
	s.Users.locks, s.Events.locks = new(keyLocks), new(keyLocks)
	s.Events.payloadDocs = false
	return true, nil
}

// Drop removes the whole database. Tests use it to clean up.
func (s *Store) Drop(ctx context.Context) error {
	return translate(s.db.Drop(ctx))
}

// Database returns the underlying database, for tools that seed or inspect
// it directly (tests, benchmarks).
func (s *Store) Database() *mongo.Database { return s.db }

// EnsureIndexes creates the indexes of every collection. It is idempotent.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	if err := s.Users.ensureIndexes(ctx); err != nil {
		return err
	}
	if err := s.ensureErasureIndexes(ctx); err != nil {
		return err
	}
	return s.Events.ensureIndexes(ctx)
}

// createIndexes creates the indexes that coll lacks, by name. Asking the
// embedded engine to create an index that exists drops the connection, so
// existing ones are listed first.
func createIndexes(ctx context.Context, coll *mongo.Collection, want []mongo.IndexModel) error {
	specs, err := coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		return fmt.Errorf("list indexes of %s: %w", coll.Name(), translate(err))
	}
	have := map[string]bool{}
	for _, s := range specs {
		have[s.Name] = true
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
	if _, err := coll.Indexes().CreateMany(ctx, missing); err != nil {
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
// one applies, keeping the driver error in the chain for logs.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return models.ErrNotFound
	case isUniqueViolation(err):
		return fmt.Errorf("%w: %w", models.ErrConflict, err)
	case isUnavailable(err):
		return fmt.Errorf("%w: %w", models.ErrUnavailable, err)
	}
	return err
}

// isUniqueViolation is true for E11000 and for the embedded engine's way of
// reporting the same violation from an update (code 1, "UNIQUE constraint
// failed"); see ../shared/FERRETDB.md.
func isUniqueViolation(err error) bool {
	if mongo.IsDuplicateKeyError(err) {
		return true
	}
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(1) && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func isUnavailable(err error) bool {
	var sse topology.ServerSelectionError
	return mongo.IsNetworkError(err) || mongo.IsTimeout(err) ||
		errors.Is(err, context.Canceled) || errors.As(err, &sse) ||
		errors.Is(err, mongo.ErrClientDisconnected)
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
