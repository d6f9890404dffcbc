// Package mongotest gives tests a database of their own on the MongoDB
// server at MONGODB_URI. No MongoDB-compatible server runs in CI: without
// MONGODB_URI every test that asks for one is skipped, saying why.
package mongotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/mongo"
)

// SkipMessage is why a test that needs a server is skipped.
const SkipMessage = "MONGODB_URI not set: the MongoDB store's tests need a server"

// URI returns MONGODB_URI, or skips t when it is not set.
func URI(t testing.TB) string {
	t.Helper()
	uri := os.Getenv("MONGODB_URI")
	if uri == "" {
		t.Skip(SkipMessage)
	}
	return uri
}

var (
	run = func() string { // tells apart the databases of test processes run at once
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	dbs atomic.Int64
)

// DatabaseName returns a database name no other test uses.
func DatabaseName() string {
	return fmt.Sprintf("usersync_test_%s_%d", run, dbs.Add(1))
}

// Open returns a store on a new, empty database at MONGODB_URI, prepared
// as usersync prepares it and with all its indexes; the database is
// dropped when the test ends. It skips t when MONGODB_URI is not set.
func Open(t testing.TB) *mongo.Store {
	t.Helper()
	return OpenWith(t, mongo.Options{})
}

// OpenWith is Open with options o (the server selection timeout defaults
// to 5 s).
func OpenWith(t testing.TB, o mongo.Options) *mongo.Store {
	t.Helper()
	return OpenAt(t, URI(t), o)
}

// OpenAt is OpenWith on the server at uri (MONGODB_URI with options of
// the test's, say). It skips t when MONGODB_URI is not set.
func OpenAt(t testing.TB, uri string, o mongo.Options) *mongo.Store {
	t.Helper()
	s := Unprepared(t, uri, DatabaseName(), o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare store: %v", err)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatalf("ensure indexes: %v", err)
	}
	return s
}

// Unprepared returns a store on the database dbName at uri without
// preparing it, for tests of Prepare and Migrate; the database is dropped
// when the test ends. It skips t when MONGODB_URI is not set.
func Unprepared(t testing.TB, uri, dbName string, o mongo.Options) *mongo.Store {
	t.Helper()
	URI(t)
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 5 * time.Second
	}
	s, err := mongo.Open(context.Background(), uri, dbName, o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Drop(ctx) // the test may have stopped the server
		_ = s.Close(ctx)
	})
	return s
}

// HasOption reports whether uri's query sets the option key.
func HasOption(uri, key string) bool {
	_, query, _ := strings.Cut(uri, "?")
	for _, kv := range strings.Split(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); strings.EqualFold(k, key) {
			return true
		}
	}
	return false
}

// WithOption returns uri with the option key=value in its query: merged
// into the query the URI has (replacing the key if it is there), never
// appended as a second one.
func WithOption(uri, key, value string) string {
	base, query, hasQuery := strings.Cut(uri, "?")
	if !hasQuery {
		// The options follow the hosts and the database: "host/?k=v".
		_, rest, _ := strings.Cut(base, "://")
		if !strings.Contains(rest, "/") {
			base += "/"
		}
	}
	var kept []string
	for _, kv := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if kv != "" && !strings.EqualFold(k, key) {
			kept = append(kept, kv)
		}
	}
	return base + "?" + strings.Join(append(kept, key+"="+value), "&")
}
