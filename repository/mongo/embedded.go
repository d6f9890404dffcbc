package mongo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	stdsync "sync"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Embedded is the in-process engine: FerretDB 1.x with its SQLite backend,
// listening on a loopback port, its files in one directory.
type Embedded struct {
	uri    string
	dir    string
	cancel context.CancelFunc
	done   chan struct{}
}

// embeddedDirs maps the address of each embedded engine running in this
// process to its directory, so that a store connected to it can reach its
// SQLite files (see ensureSQLiteIDIndexes).
var embeddedDirs stdsync.Map

// embeddedDir returns the directory of the embedded engine at uri, if it
// runs in this process.
func embeddedDir(uri string) (string, bool) {
	_, rest, _ := strings.Cut(uri, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	dir, ok := embeddedDirs.Load(host)
	if !ok {
		return "", false
	}
	return dir.(string), true
}

// newMu serialises ferretdb.New, which writes a package-level variable.
var newMu stdsync.Mutex

// StartEmbedded starts the engine with its files under dir, listening on
// addr ("127.0.0.1:0" picks a free port). Only errors of its own log reach
// logger: FerretDB logs whole wire messages at lower levels.
func StartEmbedded(dir, addr string, logger *slog.Logger) (*Embedded, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("embedded engine dir: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("embedded engine dir: %w", err)
	}
	if !strings.HasPrefix(addr, "127.") && !strings.HasPrefix(addr, "localhost:") && !strings.HasPrefix(addr, "[::1]:") {
		return nil, fmt.Errorf("embedded engine address %q is not a loopback address", addr)
	}
	newMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
		Logger:    slog.New(minLevel{handler: logger.Handler().WithAttrs([]slog.Attr{slog.String("component", "ferretdb")}), level: slog.LevelError}),
	})
	newMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("start embedded engine: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Embedded{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		_ = f.Run(ctx) // returns when ctx is cancelled
	}()
	e.uri = f.MongoDBURI() // waits for the listener
	e.dir = abs
	embeddedDirs.Store(e.Addr(), abs)
	return e, nil
}

// URI is the MongoDB URI of the engine.
func (e *Embedded) URI() string { return e.uri }

// Addr is the engine's host:port.
func (e *Embedded) Addr() string {
	return strings.TrimSuffix(strings.TrimPrefix(e.uri, "mongodb://"), "/")
}

// Stop closes the listener, the connections and the files, and waits.
// Disconnect clients first, or it waits for their connections to time out.
func (e *Embedded) Stop() {
	embeddedDirs.CompareAndDelete(e.Addr(), e.dir)
	e.cancel()
	<-e.done
}

// minLevel passes on only the records at or above level. It applies
// WithAttrs and WithGroup to the handler beneath only when it passes a
// record on: FerretDB adds attributes (whole documents and queries) to its
// logger for every statement, and a JSON or text handler formats them at
// once, which cost about a fifth of the CPU of a write although nothing
// below level is ever printed.
type minLevel struct {
	handler slog.Handler
	level   slog.Level
	ops     []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.handler.Enabled(ctx, l)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error {
	hh := h.handler
	for _, op := range h.ops {
		hh = op(hh)
	}
	return hh.Handle(ctx, r)
}

func (h minLevel) with(op func(slog.Handler) slog.Handler) slog.Handler {
	return minLevel{h.handler, h.level, append(slices.Clip(h.ops), op)}
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return h.with(func(hh slog.Handler) slog.Handler { return hh.WithAttrs(as) })
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return h.with(func(hh slog.Handler) slog.Handler { return hh.WithGroup(name) })
}
