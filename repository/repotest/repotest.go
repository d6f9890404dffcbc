// Package repotest gives tests a fresh database on a real engine: the
// embedded one by default, or the MongoDB at MONGODB_URI when it is set.
package repotest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	repository "github.com/usersync/usersync/repository/mongo"
)

var (
	once     stdsync.Once
	shared   *repository.Embedded
	dir      string
	startErr error
	dbs      atomic.Int64
)

// Main runs a package's tests and then stops the shared embedded engine.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// URI returns the URI of the engine the tests run against, starting the
// shared embedded engine on first use.
func URI(t testing.TB) string {
	t.Helper()
	if uri := os.Getenv("MONGODB_URI"); uri != "" {
		return uri
	}
	once.Do(func() {
		dir, startErr = os.MkdirTemp("", "usersync-test-")
		if startErr != nil {
			return
		}
		shared, startErr = repository.StartEmbedded(dir, "127.0.0.1:0", Discard())
	})
	if startErr != nil {
		t.Fatalf("start embedded engine: %v", startErr)
	}
	return shared.URI()
}

// NewStore returns a store on a new, empty database with its indexes, on
// the test engine; the database is dropped when the test ends.
func NewStore(t testing.TB) *repository.Store {
	t.Helper()
	return NewStoreAt(t, URI(t), repository.Options{})
}

// NewStoreAt is NewStore on the engine at uri, with options o (the
// server selection timeout defaults to 2 s). The store is prepared for its
// server as usersync prepares it, and has all its indexes.
func NewStoreAt(t testing.TB, uri string, o repository.Options) *repository.Store {
	t.Helper()
	if o.ServerSelectionTimeout == 0 {
		o.ServerSelectionTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("usersync_test_%d_%d", os.Getpid(), dbs.Add(1))
	s, err := repository.Open(ctx, uri, name, o)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if _, err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare store: %v", err)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		t.Fatalf("ensure indexes: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Drop(ctx) // the engine may have been stopped by the test
		_ = s.Close(ctx)
	})
	return s
}

// Engine is an embedded engine of one test's own, which the test may stop
// and start again on the same port and files.
type Engine struct {
	t    testing.TB
	dir  string
	addr string
	e    *repository.Embedded
}

// StartEngine starts an embedded engine for t alone.
func StartEngine(t testing.TB) *Engine {
	t.Helper()
	en := &Engine{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	en.Start()
	en.addr = en.e.Addr()
	t.Cleanup(en.Stop)
	return en
}

// Dir is the directory of the engine's files.
func (en *Engine) Dir() string { return en.dir }

// URI is the engine's MongoDB URI; it stays the same across restarts.
func (en *Engine) URI() string { return "mongodb://" + en.addr + "/" }

// Start starts the engine again after Stop.
func (en *Engine) Start() {
	en.t.Helper()
	if en.e != nil {
		return
	}
	var err error
	for try := 0; try < 50; try++ { // the old listener's port may still be closing
		if en.e, err = repository.StartEmbedded(en.dir, en.addr, Discard()); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	en.t.Fatalf("start embedded engine: %v", err)
}

// Stop stops the engine; its clients see it as down.
func (en *Engine) Stop() {
	if en.e != nil {
		en.e.Stop()
		en.e = nil
	}
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// UsesMongoDB reports whether the tests run against MONGODB_URI rather
// than the embedded engine.
func UsesMongoDB() bool { return os.Getenv("MONGODB_URI") != "" }
