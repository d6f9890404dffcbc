package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/usersync/usersync/repository"
)

// migrateCommand is `usersync migrate [-dry-run]`.
func migrateCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	dryRun := fs.Bool("dry-run", false, "say what would change, and change nothing")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runMigrate(ctx, cfg, *dryRun, out) }
}

// runMigrate brings the store up to this version (see
// repository.Migrator) in the foreground, however long the index builds
// take, and says what it did.
func runMigrate(ctx context.Context, cfg config, dryRun bool, out io.Writer) error {
	log := newLogger(cfg)
	store, closeStore, err := openStore(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer closeStore()
	start := time.Now()
	rep, err := store.Migrate(ctx, dryRun)
	if err != nil {
		return fmt.Errorf("migrate (%d changed so far; run it again to finish): %w", rep.Changed, err)
	}
	if !dryRun {
		if err := store.BuildIndexes(ctx); err != nil {
			return fmt.Errorf("build indexes: %w", err)
		}
	}
	verb := "is up to date"
	if dryRun {
		verb = "dry run, nothing changed"
	}
	fmt.Fprintf(out, "migrate: %s: %s, in %s\n", verb, rep.Summary, time.Since(start).Round(time.Millisecond))
	return nil
}

// buildIndexes builds the indexes Prepare leaves out (see
// repository.Store.EnsureIndexes), with no deadline but ctx's, and logs
// the result; serve runs it as a background task.
func buildIndexes(store repository.Store, log *slog.Logger) (task func(context.Context)) {
	return func(ctx context.Context) {
		start := time.Now()
		if err := store.BuildIndexes(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("building indexes failed; queries may scan until `usersync migrate` builds them", slog.String("err", err.Error()))
			}
			return
		}
		log.Info("indexes ready", slog.Duration("took", time.Since(start)))
	}
}
