package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/sqlite"
)

// store is what every command uses of the store the configuration names.
type store interface {
	repository.Store
	repository.Migrator
}

// openStore opens the store the configuration names: the embedded SQLite
// store in the data dir (locked to this process; the data of an earlier
// version's embedded engine imported once), or MongoDB at MONGODB_URI,
// prepared. It is the one place where the choice is made. closeStore
// closes it.
//
// migrating opens it for usersync migrate: the MongoDB store is then not
// prepared (Migrate checks the database itself, and Prepare refuses one
// that needs it).
//
// Every command that applies changes records them for outbound webhooks
// while an endpoint is enabled (see recordForEndpoints).
func openStore(ctx context.Context, cfg config, log *slog.Logger, migrating bool) (s store, closeStore func(), err error) {
	s, closeStore, err = openConfigured(ctx, cfg, log, migrating)
	if err != nil || migrating {
		return s, closeStore, err
	}
	if err := recordForEndpoints(ctx, s); err != nil {
		closeStore()
		return nil, nil, err
	}
	return s, closeStore, nil
}

// recordForEndpoints turns the outbox's recording on while an endpoint is
// enabled, so that a change a command applies (a backfill's, a replay's)
// reaches the endpoints: serve's dispatcher sends it. serve's dispatcher
// also keeps it up to date as endpoints change.
func recordForEndpoints(ctx context.Context, s repository.Store) error {
	eps, err := s.Outbound().Endpoints(ctx)
	if err != nil {
		return fmt.Errorf("read the outbound endpoints: %w", err)
	}
	s.Outbound().SetRecording(models.Recording(eps))
	return nil
}

// openConfigured is openStore without the outbox's recording.
func openConfigured(ctx context.Context, cfg config, log *slog.Logger, migrating bool) (s store, closeStore func(), err error) {
	if cfg.Embedded() {
		return openEmbedded(ctx, cfg, log)
	}
	m, err := mongo.Open(ctx, string(cfg.MongoURI), cfg.Database, mongo.Options{CollectionPrefix: cfg.CollectionPrefix, DeliveryBatch: cfg.MongoBatch})
	if err != nil {
		return nil, nil, fmt.Errorf("MONGODB_URI: %w", err)
	}
	closeStore = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	}
	if migrating {
		return m, closeStore, nil
	}
	// No deadline: building a unique index on a large collection takes
	// what it takes, and a stop signal still cancels ctx.
	if err := m.Prepare(ctx); err != nil {
		closeStore()
		if errors.Is(err, models.ErrUnavailable) {
			return nil, nil, fmt.Errorf("MONGODB_URI: cannot prepare database %q (is the server reachable, and are the URI's host, port and credentials right?): %w", cfg.Database, err)
		}
		return nil, nil, fmt.Errorf("prepare database %q: %w", cfg.Database, err)
	}
	log.Info("database prepared", slog.String("engine", m.Server().Engine), slog.String("version", m.Server().Version), slog.String("database", cfg.Database))
	return m, closeStore, nil
}

func openEmbedded(ctx context.Context, cfg config, log *slog.Logger) (store, func(), error) {
	unlock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, nil, err
	}
	if err := importEarlier(ctx, cfg, log); err != nil {
		unlock()
		return nil, nil, err
	}
	s, err := sqlite.Open(ctx, cfg.DataDir, sqlite.Options{SoleProcess: true})
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("USERSYNC_DATA_DIR: %w", err)
	}
	log.Info("embedded store opened", slog.String("file", s.Path()))
	return s, func() {
		_ = s.Close(context.Background())
		unlock()
	}, nil
}

// importEarlier imports, once, the data an earlier version kept in the
// data dir with its embedded engine (FerretDB 1.24's files under db/).
func importEarlier(ctx context.Context, cfg config, log *slog.Logger) error {
	rep, err := sqlite.ImportEarlier(ctx, cfg.DataDir, cfg.Database)
	if err != nil {
		return fmt.Errorf("USERSYNC_DATA_DIR: %w", err)
	}
	if rep.Imported {
		log.Info("imported the data of an earlier version", slog.Int("users", rep.Users),
			slog.Int("events", rep.Events), slog.String("from", rep.From), slog.String("kept_as", rep.KeptAs))
	}
	return nil
}
