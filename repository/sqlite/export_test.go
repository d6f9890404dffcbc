package sqlite

import (
	"context"
	"fmt"
)

// SetBackupStep makes a backup's steps n pages long, for a test, and
// returns what puts the length back.
func SetBackupStep(n int32) func() {
	old := backupStep
	backupStep = n
	return func() { backupStep = old }
}

// Checkpoint copies the whole write-ahead log into the database file (a
// PASSIVE checkpoint on the writer's connection, while the writer is
// idle), for a test: the next write then starts the log over.
func Checkpoint(ctx context.Context, s *Store) error {
	var busy, logFrames, done int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &done); err != nil {
		return err
	}
	if busy != 0 || done != logFrames {
		return fmt.Errorf("checkpoint: busy %d, %d of %d frames copied", busy, done, logFrames)
	}
	return nil
}

// Write and WriteBackground run fn, which sees nothing of the
// transaction, as a write and as a background write: for a test of the
// writer's order.
func Write(ctx context.Context, s *Store, fn func()) error {
	return s.write(ctx, func(*wtx) error { fn(); return nil })
}

func WriteBackground(ctx context.Context, s *Store, fn func()) error {
	return s.writeBackground(ctx, func(*wtx) error { fn(); return nil })
}

// WriteBackgroundN is WriteBackground for a write that weighs n (a batch).
func WriteBackgroundN(ctx context.Context, s *Store, n int, fn func()) error {
	return s.writeBackgroundN(ctx, n, func(*wtx) error { fn(); return nil })
}

// Busy reports whether the writer has begun a transaction it has not
// finished; Queued counts the writes waiting for it.
func (s *Store) Busy() bool  { return s.busySince.Load() != 0 }
func (s *Store) Queued() int { return len(s.reqs) + len(s.bg) }
