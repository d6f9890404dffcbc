package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// statsInterval is how often serve reads the event counts for /metrics in
// the background; a scrape serves the last value read.
const statsInterval = 15 * time.Second

// background runs f in a goroutine until ctx is done or stop is called;
// stop waits for f to return.
func background(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() { cancel(); <-done }
}

// logPass logs one line per part of a recovery pass that did something:
// the sweep's total (each event swept has its own line already) and what
// retention deleted.
func logPass(log *slog.Logger, r sync.Report, retention time.Duration) {
	swept := 0
	for _, n := range r.Swept {
		swept += n
	}
	if swept > 0 {
		log.LogAttrs(context.Background(), slog.LevelInfo, "sweep pass", slog.Int("swept", swept),
			slog.Int("processed", r.Swept[models.StatusProcessed]), slog.Int("failed", r.Swept[models.StatusFailed]))
	}
	if r.Deleted > 0 {
		log.LogAttrs(context.Background(), slog.LevelInfo, "retention pass", slog.Int("deleted", r.Deleted),
			slog.Duration("retention", retention))
	}
}
