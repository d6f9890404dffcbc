package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	repository "github.com/usersync/usersync/repository/mongo"
)

// migrateCommand is `usersync migrate`.
func migrateCommand(*flag.FlagSet) func(context.Context, config, io.Writer) error {
	return runMigrate
}

// runMigrate brings the database up to this version (see
// repository.Store.Migrate) in the foreground, however long the index
// builds take, and says what it did.
func runMigrate(ctx context.Context, cfg config, out io.Writer) error {
	log := newLogger(cfg)
	store, closeStore, err := connectStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	start := time.Now()
	rekeyed, err := store.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate database %q (%d users re-keyed so far; run it again to finish): %w", cfg.Database, rekeyed, err)
	}
	fmt.Fprintf(out, "migrate: database %q is up to date: %d users re-keyed, indexes built, in %s\n",
		cfg.Database, rekeyed, time.Since(start).Round(time.Millisecond))
	return nil
}

// buildIndexes builds the indexes Prepare leaves out (see
// repository.Store.EnsureIndexes) in the background, with no deadline
// but ctx's, and logs the result. The returned channel closes when it is
// done.
func buildIndexes(ctx context.Context, store *repository.Store, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		if err := store.EnsureIndexes(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("building indexes failed; queries may scan until `usersync migrate` builds them", slog.String("err", err.Error()))
			}
			return
		}
		log.Info("indexes ready", slog.Duration("took", time.Since(start)))
	}()
	return done
}
