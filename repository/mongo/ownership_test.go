package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// snapshot is every document and index of every collection of db, in a
// form that compares: extended JSON, sorted.
func snapshot(t *testing.T, db *driver.Database) map[string][]string {
	t.Helper()
	ctx := context.Background()
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	snap := map[string][]string{}
	for _, n := range names {
		cur, err := db.Collection(n).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		for cur.Next(ctx) {
			snap[n] = append(snap[n], "doc "+cur.Current.String())
		}
		cur.Close(ctx)
		specs, err := db.Collection(n).Indexes().ListSpecifications(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range specs {
			snap[n] = append(snap[n], fmt.Sprintf("index %s unique=%v sparse=%v", sp.Name, sp.Unique != nil && *sp.Unique, sp.Sparse != nil && *sp.Sparse))
		}
		slices.Sort(snap[n])
	}
	return snap
}

func sameSnapshot(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s changed the database:\n got  %v\n want %v", what, got, want)
	}
}

// seedApp gives db an application's own users collection, with its
// unique email index, and another collection of its own.
func seedApp(t *testing.T, db *driver.Database) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() { _ = db.Drop(context.Background()) }) // Store.Drop leaves what is not usersync's
	users := db.Collection("users")
	if _, err := users.InsertMany(ctx, []any{
		bson.D{{Key: "email", Value: "bob@example.com"}, {Key: "name", Value: "Bob"}, {Key: "passwordHash", Value: "$2a$10$x"}},
		bson.D{{Key: "email", Value: "eve@example.com"}, {Key: "name", Value: "Eve"}, {Key: "roles", Value: bson.A{"admin"}}},
		bson.D{{Key: "name", Value: "no email"}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := users.Indexes().CreateOne(ctx, driver.IndexModel{
		Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection("orders").InsertOne(ctx, bson.D{{Key: "total", Value: 12.5}}); err != nil {
		t.Fatal(err)
	}
}

// TestPrepare_AnApplicationsDatabaseIsRefusedUnchanged points usersync at
// a database that holds an application's own users collection: Prepare,
// Migrate (and its dry run) and EnsureIndexes refuse it, naming
// MONGODB_DATABASE, and every document and index is as it was.
func TestPrepare_AnApplicationsDatabaseIsRefusedUnchanged(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Unprepared(t, mongotest.URI(t), mongotest.DatabaseName(), mongo.Options{})
	seedApp(t, s.Database())
	before := snapshot(t, s.Database())

	if err := s.Prepare(ctx); !errors.Is(err, models.ErrForeignData) || !strings.Contains(err.Error(), "MONGODB_DATABASE") {
		t.Errorf("Prepare = %v, want ErrForeignData naming MONGODB_DATABASE", err)
	}
	for _, dryRun := range []bool{true, false} {
		if rep, err := s.Migrate(ctx, dryRun); !errors.Is(err, models.ErrForeignData) || rep.Changed != 0 {
			t.Errorf("Migrate(dryRun %t) = %+v, %v; want ErrForeignData, nothing changed", dryRun, rep, err)
		}
	}
	if err := s.EnsureIndexes(ctx); err == nil {
		t.Error("EnsureIndexes on a database Prepare refused: no error")
	}
	sameSnapshot(t, "refusing", snapshot(t, s.Database()), before)
}

// TestPrepare_AnApplicationsCollectionsAreNeitherAdoptedNorMigrated: an
// application's empty users collection with a validator, and one whose
// documents happen to have a userId and a sourceUpdatedAt date, are the
// application's: Prepare and Migrate refuse them as foreign data (not as
// fresh, and not as an older usersync to re-key), and change nothing.
func TestPrepare_AnApplicationsCollectionsAreNeitherAdoptedNorMigrated(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		seed func(t *testing.T, db *driver.Database)
	}{
		{"an empty users collection with a validator", func(t *testing.T, db *driver.Database) {
			validator := bson.D{{Key: "$jsonSchema", Value: bson.D{{Key: "required", Value: bson.A{"email"}}}}}
			if err := db.CreateCollection(ctx, "users", options.CreateCollection().SetValidator(validator)); err != nil {
				t.Fatal(err)
			}
			specs, err := db.ListCollectionSpecifications(ctx, bson.D{{Key: "name", Value: "users"}})
			if err != nil || len(specs) != 1 {
				t.Fatalf("list collections: %v, %v", specs, err)
			}
			if _, err := specs[0].Options.LookupErr("validator"); err != nil {
				// FerretDB 2.5 takes the option and keeps nothing of it
				// (nor enforces it): such a collection is an empty one.
				t.Skip("the engine keeps no validator:", specs[0].Options)
			}
		}},
		{"users with a userId and a sourceUpdatedAt date", func(t *testing.T, db *driver.Database) {
			if _, err := db.Collection("users").InsertOne(ctx, bson.D{{Key: "userId", Value: "user_2abc"},
				{Key: "sourceUpdatedAt", Value: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)}, {Key: "plan", Value: "pro"}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mongotest.Unprepared(t, mongotest.URI(t), mongotest.DatabaseName(), mongo.Options{})
			t.Cleanup(func() { _ = s.Database().Drop(context.Background()) })
			tc.seed(t, s.Database())
			before := snapshot(t, s.Database())
			if err := s.Prepare(ctx); !errors.Is(err, models.ErrForeignData) {
				t.Errorf("Prepare = %v, want ErrForeignData", err)
			}
			if rep, err := s.Migrate(ctx, false); !errors.Is(err, models.ErrForeignData) || rep.Changed != 0 {
				t.Errorf("Migrate = %+v, %v; want ErrForeignData, nothing changed", rep, err)
			}
			sameSnapshot(t, "refusing", snapshot(t, s.Database()), before)
		})
	}
}

// TestPrepare_ACollectionPrefixSharesADatabase gives usersync's
// collections a prefix in the application's database: usersync prepares
// its own, and the application's are as they were.
func TestPrepare_ACollectionPrefixSharesADatabase(t *testing.T) {
	ctx := context.Background()
	name := mongotest.DatabaseName()
	app := mongotest.Unprepared(t, mongotest.URI(t), name, mongo.Options{})
	seedApp(t, app.Database())
	before := snapshot(t, app.Database())

	s := mongotest.Unprepared(t, mongotest.URI(t), name, mongo.Options{CollectionPrefix: "usersync_"})
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("Prepare with a prefix: %v", err)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Users().Apply(ctx, change("user_1", "msg_1", time.Second, "bob@example.com"), time.Now()); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	after := snapshot(t, app.Database())
	for n := range after {
		if strings.HasPrefix(n, "usersync_") {
			delete(after, n)
		}
	}
	sameSnapshot(t, "usersync with a prefix", after, before)
	if n, err := app.Database().Collection("usersync_users").CountDocuments(ctx, bson.D{}); err != nil || n != 1 {
		t.Errorf("usersync_users holds %d, %v; want the one user", n, err)
	}
}

// TestPrepare_MarksTheDatabaseItPrepares: a fresh database is marked, and
// a marked one is accepted by the next instance.
func TestPrepare_MarksTheDatabaseItPrepares(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	var mark struct {
		Schema    int       `bson:"schema"`
		CreatedAt time.Time `bson:"createdAt"`
	}
	if err := s.Database().Collection(mongo.MetaCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "usersync"}}).Decode(&mark); err != nil ||
		mark.Schema == 0 || mark.CreatedAt.IsZero() {
		t.Fatalf("mark = %+v, %v; want one", mark, err)
	}
	if _, err := s.Users().Apply(ctx, change("user_1", "msg_1", time.Second, "a@example.com"), time.Now()); err != nil {
		t.Fatal(err)
	}
	again := mongotest.Unprepared(t, mongotest.URI(t), s.Database().Name(), mongo.Options{})
	if err := again.Prepare(ctx); err != nil {
		t.Errorf("Prepare of a marked database: %v", err)
	}
}

// TestPrepare_InstancesStartingAtOnceOnANewDatabaseConverge starts three
// instances at once on a new database, again and again: each prepares it
// and builds its indexes without an error, whoever creates them first
// (the DocumentDB engines answer concurrent index builds with deadlocks,
// which are made again).
func TestPrepare_InstancesStartingAtOnceOnANewDatabaseConverge(t *testing.T) {
	for round := range 5 {
		name := mongotest.DatabaseName()
		var stores []*mongo.Store
		for range 3 {
			stores = append(stores, mongotest.Unprepared(t, mongotest.URI(t), name, mongo.Options{}))
		}
		errs := make(chan error, len(stores))
		for i, s := range stores {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err := s.Prepare(ctx)
				if err == nil {
					err = s.EnsureIndexes(ctx)
				}
				if err != nil {
					err = fmt.Errorf("round %d, instance %d: %w", round, i, err)
				}
				errs <- err
			}()
		}
		for range stores {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
}
