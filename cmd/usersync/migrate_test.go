package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
)

// olderDatabase makes the test database look as an older usersync left
// it: users with random ids, its unused indexes, no migration mark.
func olderDatabase(t *testing.T, store *mongo.Store, users int) {
	t.Helper()
	ctx := context.Background()
	db := store.Database()
	// An older usersync left no mark: neither this version's nor the
	// counters' of the versions before.
	if err := db.Collection(mongo.MetaCollection).Drop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Collection(mongo.CountersCollection).DeleteMany(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var docs []any
	for i := range users {
		uid := fmt.Sprintf("user_old_%d", i)
		docs = append(docs, bson.D{
			{Key: "_id", Value: bson.NewObjectID()},
			{Key: "userId", Value: uid}, {Key: "email", Value: uid + "@example.com"},
			{Key: "displayName", Value: "Old " + uid}, {Key: "metadata", Value: bson.D{}},
			{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "deletedAt", Value: nil},
			{Key: "sourceUpdatedAt", Value: now.Add(-time.Hour)}, {Key: "lastEventId", Value: "msg_" + uid},
		})
	}
	usersColl := db.Collection(mongo.UsersCollection)
	if _, err := usersColl.InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	// Two processed events, which stats must count after the migration.
	for i, o := range []models.Outcome{models.OutcomeApplied, models.OutcomeStale} {
		if _, err := db.Collection(mongo.EventsCollection).InsertOne(ctx, bson.D{
			{Key: "_id", Value: bson.NewObjectID()}, {Key: "eventId", Value: fmt.Sprintf("msg_old_%d", i)},
			{Key: "type", Value: "user.updated"}, {Key: "eventType", Value: "updated"},
			{Key: "status", Value: models.StatusProcessed}, {Key: "outcome", Value: o},
			{Key: "receivedAt", Value: now}, {Key: "processedAt", Value: now}, {Key: "attempts", Value: 1},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := usersColl.Indexes().CreateMany(ctx, []driver.IndexModel{
		{Keys: bson.D{{Key: "updatedAt", Value: -1}}},
		{Keys: bson.D{{Key: "deletedAt", Value: 1}, {Key: "updatedAt", Value: -1}}},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestMigrate_ReKeysUsersOfAnOlderVersionAndServeRefusesBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getenv, anyStore := replayEnv(t)
	store, ok := anyStore.(*mongo.Store)
	if !ok {
		t.Skip("re-keying users is the MongoDB store's migration; it runs when MONGODB_URI is set")
	}
	const n = 25
	olderDatabase(t, store, n)

	// Before: usersync will not serve the database, and says what to run.
	err := store.Prepare(ctx)
	if !errors.Is(err, models.ErrNeedsMigration) || !strings.Contains(err.Error(), "usersync migrate") {
		t.Fatalf("Prepare before migrate = %v; want ErrNeedsMigration naming usersync migrate", err)
	}
	env := map[string]string{"USERSYNC_ADDR": "127.0.0.1:0", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_API_KEYS": "usk_migrate_api_0123", "USERSYNC_ADMIN_KEYS": "usk_migrate_admin_0123"}
	serveEnv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return getenv(k)
	}
	var out bytes.Buffer
	if err := run(ctx, nil, serveEnv, &out); err == nil || !strings.Contains(err.Error(), "usersync migrate") {
		t.Fatalf("serve before migrate = %v; want a refusal naming usersync migrate", err)
	}

	out.Reset()
	if err := run(ctx, []string{"migrate"}, getenv, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, &out)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("re-keyed %d of %d users", n, n)) {
		t.Errorf("migrate said %q, want %d users re-keyed", &out, n)
	}
	if err := store.Prepare(ctx); err != nil {
		t.Fatalf("Prepare after migrate = %v", err)
	}
	for i := range n {
		uid := fmt.Sprintf("user_old_%d", i)
		u, err := store.Users().Get(ctx, uid)
		if err != nil || u.Email != uid+"@example.com" {
			t.Fatalf("user %s after migrate = %+v, %v", uid, u, err)
		}
	}
	// The migrated users take newer states, and keep refusing older ones.
	ch := models.UserChange{UserID: "user_old_0", EventID: "msg_new", SourceTime: time.Now(), Email: "new@example.com",
		DisplayName: "New", Metadata: []byte(`{}`)}
	if o, err := store.Users().Apply(ctx, ch, time.Now()); err != nil || o != models.OutcomeApplied {
		t.Errorf("Apply after migrate = %q, %v; want applied", o, err)
	}
	ch.SourceTime, ch.EventID = time.Now().Add(-2*time.Hour), "msg_older"
	if o, err := store.Users().Apply(ctx, ch, time.Now()); err != nil || o != models.OutcomeStale {
		t.Errorf("Apply of an older state after migrate = %q, %v; want stale", o, err)
	}
	users, err := store.Database().Collection(mongo.UsersCollection).CountDocuments(ctx, bson.D{})
	if err != nil || users != n {
		t.Errorf("%d users after migrate, %v; want %d", users, err, n)
	}
	specs, err := store.Database().Collection(mongo.UsersCollection).Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.Name == "updatedAt_-1" || s.Name == "deletedAt_1_updatedAt_-1" {
			t.Errorf("index %s kept; no query uses it", s.Name)
		}
	}
	st, err := store.Events().Stats(ctx)
	if err != nil || st.ByStatus[models.StatusProcessed] != 2 || st.ByOutcome[models.OutcomeStale] != 1 {
		t.Errorf("stats after migrate = %+v, %v; want the 2 processed events of before counted", st, err)
	}
	// Again: nothing to do.
	out.Reset()
	if err := run(ctx, []string{"migrate"}, getenv, &out); err != nil || strings.Contains(out.String(), "re-key") {
		t.Errorf("migrate again = %v, %q; want 0 users re-keyed", err, &out)
	}
}

// schemaLine is how migrate names the embedded store's schema, whichever
// number the last migration has.
var schemaLine = regexp.MustCompile(`usersync\.db is at schema [1-9][0-9]*\b`)

func TestMigrate_TheEmbeddedStoreSaysItsSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	env := map[string]string{"USERSYNC_DATA_DIR": dir}
	for _, args := range [][]string{{"migrate", "-dry-run"}, {"migrate"}} {
		out.Reset()
		if err := run(context.Background(), args, func(k string) string { return env[k] }, &out); err != nil {
			t.Fatal(err)
		}
		if !schemaLine.MatchString(out.String()) {
			t.Errorf("%v said %q, want the schema", args, out.String())
		}
	}
}
