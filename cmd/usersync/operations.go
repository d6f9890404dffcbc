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

// tasks is serve's background work, every part of it started, stopped
// and waited for the same way: Go runs a task in its own goroutine until
// its context ends; Stop cancels the tasks one at a time, the last started
// first, and waits for each to return, so that a task keeps what was
// started before it (the sweep keeps the activity counter it counts into)
// until it has stopped.
type tasks struct {
	ctx   context.Context
	stops []func()
}

// newTasks returns no tasks yet; the tasks' contexts are children of ctx.
func newTasks(ctx context.Context) *tasks { return &tasks{ctx: ctx} }

// Go runs task until ctx ends or Stop is called.
func (ts *tasks) Go(task func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(ts.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		task(ctx)
	}()
	ts.stops = append(ts.stops, func() { cancel(); <-done })
}

// Stop cancels the tasks, the last started first, and waits for each.
func (ts *tasks) Stop() {
	for i := len(ts.stops) - 1; i >= 0; i-- {
		ts.stops[i]()
	}
	ts.stops = nil
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
