// Package repotest gives tests a fresh store: the embedded SQLite store in
// a directory of the test's own by default, or a new database at the
// MongoDB at MONGODB_URI when it is set.
package repotest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/sqlite"
)

// Store is a store as tests use it: the contract, and seeding.
type Store interface {
	repository.Store
	repository.Seeder
}

var dbs atomic.Int64

// Main runs a package's tests, then removes what DataDir copies.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run runs a package's tests and removes what DataDir copies: for a
// TestMain that does more than Main.
func Run(m *testing.M) int {
	code := m.Run()
	if tmpl.dir != "" {
		_ = os.RemoveAll(tmpl.dir)
	}
	return code
}

// NewStore returns a fresh, empty store, closed (and, on MongoDB,
// dropped) when the test ends.
func NewStore(t testing.TB) Store {
	s, _ := NewStoreEnv(t)
	return s
}

// NewStoreEnv is NewStore, with the environment that points usersync at
// the same store (USERSYNC_DATA_DIR, or MONGODB_URI and MONGODB_DATABASE).
func NewStoreEnv(t testing.TB) (Store, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		name := fmt.Sprintf("usersync_test_%d_%d", os.Getpid(), dbs.Add(1))
		s, err := mongo.Open(ctx, uri, name, mongo.Options{ServerSelectionTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		if err := s.Prepare(ctx); err != nil {
			t.Fatalf("prepare store: %v", err)
		}
		if err := s.EnsureIndexes(ctx); err != nil {
			t.Fatalf("ensure indexes: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = s.Drop(ctx)
			_ = s.Close(ctx)
		})
		return s, map[string]string{"MONGODB_URI": uri, "MONGODB_DATABASE": name}
	}
	dir := DataDir(t)
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, map[string]string{"USERSYNC_DATA_DIR": dir}
}

// DataDir returns a new directory of t's holding a fresh, empty embedded
// store: a copy of one that Open made, migrated and closed once for the
// test process. Opening a new directory runs every migration, which under
// the race detector is the most of a short test's work; a copy is what
// Open would have made (the tests of the migrations themselves open a
// directory of their own).
func DataDir(t testing.TB) string {
	t.Helper()
	tmpl.once.Do(func() {
		dir, err := os.MkdirTemp("", "usersync-template-")
		if err == nil {
			err = makeTemplate(dir)
		}
		tmpl.dir, tmpl.err = dir, err
	})
	if tmpl.err != nil {
		t.Fatalf("make a fresh store to copy: %v", tmpl.err)
	}
	dir := t.TempDir()
	files, err := os.ReadDir(tmpl.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(tmpl.dir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tmpl is the fresh store DataDir copies, removed by Main (or Run) after
// the package's tests.
var tmpl struct {
	once sync.Once
	dir  string
	err  error
}

func makeTemplate(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		return err
	}
	return s.Close(ctx)
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// UsesMongoDB reports whether the tests run against MONGODB_URI rather
// than the embedded store.
func UsesMongoDB() bool { return os.Getenv("MONGODB_URI") != "" }

// Outage is a fresh store that can be made to answer as a database that
// is down (every call models.ErrUnavailable) and brought back: for tests
// of what usersync does during an outage of its database, which the
// embedded store cannot have by itself.
type Outage struct {
	Store
	down atomic.Bool
}

// NewOutage returns a fresh store that can be stopped and started.
func NewOutage(t testing.TB) *Outage { return &Outage{Store: NewStore(t)} }

// Stop makes every call fail as with a database that is down.
func (o *Outage) Stop() { o.down.Store(true) }

// Start ends the outage.
func (o *Outage) Start() { o.down.Store(false) }

func (o *Outage) err() error {
	if o.down.Load() {
		return fmt.Errorf("test outage: %w", models.ErrUnavailable)
	}
	return nil
}

func (o *Outage) Ping(ctx context.Context) error {
	if err := o.err(); err != nil {
		return err
	}
	return o.Store.Ping(ctx)
}

func (o *Outage) Users() repository.Users       { return outageUsers{o.Store.Users(), o} }
func (o *Outage) Events() repository.Events     { return outageEvents{o.Store.Events(), o} }
func (o *Outage) Activity() repository.Activity { return outageActivity{o.Store.Activity(), o} }

type outageUsers struct {
	repository.Users
	o *Outage
}

func (u outageUsers) Apply(ctx context.Context, ch models.UserChange, now time.Time) (models.Outcome, error) {
	if err := u.o.err(); err != nil {
		return "", err
	}
	return u.Users.Apply(ctx, ch, now)
}

func (u outageUsers) Get(ctx context.Context, userID string) (models.User, error) {
	if err := u.o.err(); err != nil {
		return models.User{}, err
	}
	return u.Users.Get(ctx, userID)
}

func (u outageUsers) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	if err := u.o.err(); err != nil {
		return models.UserPage{}, err
	}
	return u.Users.List(ctx, f)
}

type outageEvents struct {
	repository.Events
	o *Outage
}

func (e outageEvents) Record(ctx context.Context, ev models.Event) (models.Event, bool, error) {
	if err := e.o.err(); err != nil {
		return models.Event{}, false, err
	}
	return e.Events.Record(ctx, ev)
}

func (e outageEvents) Stats(ctx context.Context) (models.EventStats, error) {
	if err := e.o.err(); err != nil {
		return models.EventStats{}, err
	}
	return e.Events.Stats(ctx)
}

func (e outageEvents) List(ctx context.Context, f models.EventFilter) (models.EventPage, error) {
	if err := e.o.err(); err != nil {
		return models.EventPage{}, err
	}
	return e.Events.List(ctx, f)
}

func (e outageEvents) FailureGroups(ctx context.Context, scan int) (models.FailureGroups, error) {
	if err := e.o.err(); err != nil {
		return models.FailureGroups{}, err
	}
	return e.Events.FailureGroups(ctx, scan)
}

type outageActivity struct {
	repository.Activity
	o *Outage
}

func (a outageActivity) Add(ctx context.Context, at time.Time, kind string, n int64) error {
	if err := a.o.err(); err != nil {
		return err
	}
	return a.Activity.Add(ctx, at, kind, n)
}

func (a outageActivity) Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error) {
	if err := a.o.err(); err != nil {
		return nil, err
	}
	return a.Activity.Buckets(ctx, size, from, to)
}

// Raw returns, lowercased, everything the store keeps, read around its
// API: every document of every collection on MongoDB, the bytes of the
// files (database and write-ahead log) of the embedded store. A test of
// erasure looks for personal data in it.
func Raw(t testing.TB, s Store) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	switch st := s.(type) {
	case *sqlite.Store:
		for _, suffix := range []string{"", "-wal"} {
			data, err := os.ReadFile(st.Path() + suffix)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			b.Write(data)
		}
	case *mongo.Store:
		db := st.Database()
		names, err := db.ListCollectionNames(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			cur, err := db.Collection(name).Find(ctx, bson.D{})
			if err != nil {
				t.Fatal(err)
			}
			for cur.Next(ctx) {
				text, err := bson.MarshalExtJSON(cur.Current, false, false)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(text)
			}
			_ = cur.Close(ctx)
		}
	default:
		t.Fatalf("Raw of a %T", s)
	}
	return strings.ToLower(b.String())
}
