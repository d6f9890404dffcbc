package sqlite

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	sqlite3 "modernc.org/sqlite"

	"github.com/usersync/usersync/models"
)

// BackupDir is the directory of the data dir that Backup writes to.
const BackupDir = "backups"

// backupStep is how many pages one step of a backup copies: 4 MiB of
// 4 KiB pages, a few milliseconds of the writer's connection.
var backupStep int32 = 1024

// Backup writes a consistent copy of the store, while it runs, to a new
// file of the data dir's backups directory (usersync-<now>.db, written as
// .partial and renamed once complete), by SQLite's online backup on the
// writer's own connection, backupStep pages at a time. Between two steps
// it holds nothing: the writer's transactions go ahead, each changing the
// copy too (SQLite updates a backup's pages that its own connection
// writes, erased ones included), and the checkpoints that empty the
// write-ahead log after an erasure are not held back (a VACUUM INTO
// would hold a read transaction for as long as it copies; another
// process cannot open the file while the store holds it). progress, if set, is called after each step with the
// bytes copied so far. A backup stopped by ctx leaves no file.
func (s *Store) Backup(ctx context.Context, now time.Time, progress func(copied int64)) (models.Backup, error) {
	dir := filepath.Join(filepath.Dir(s.path), BackupDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return models.Backup{}, fmt.Errorf("back up: %w", err)
	}
	at := now.UTC().Truncate(time.Second)
	final := filepath.Join(dir, "usersync-"+at.Format("20060102T150405Z")+".db")
	if _, err := os.Stat(final); err == nil {
		return models.Backup{}, fmt.Errorf("%w: %s exists already", models.ErrConflict, filepath.Base(final))
	}
	var pageSize int64
	if err := s.r.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return models.Backup{}, fmt.Errorf("back up: %w", translate(err))
	}
	partial := final + ".partial"
	_ = os.Remove(partial) // a stopped run's
	var b *sqlite3.Backup
	// finish ends b on the writer's connection (it uses it), whatever ctx
	// says: an unfinished backup would stay attached to the connection.
	finish := func() error {
		if b == nil {
			return nil
		}
		conn, err := s.w.Conn(context.WithoutCancel(ctx))
		if err != nil {
			return translate(err)
		}
		defer conn.Close()
		err = conn.Raw(func(any) error { return b.Finish() })
		b = nil
		return translate(err)
	}
	fail := func(err error) (models.Backup, error) {
		_ = finish()
		_ = os.Remove(partial)
		return models.Backup{}, fmt.Errorf("back up to %s: %w", filepath.Base(final), err)
	}
	for steps := 1; ; steps++ {
		more := false
		conn, err := s.w.Conn(ctx)
		if err != nil {
			return fail(translate(err))
		}
		err = conn.Raw(func(dc any) error {
			if b == nil {
				src, ok := dc.(interface {
					NewBackup(string) (*sqlite3.Backup, error)
				})
				if !ok {
					return errors.New("the driver cannot back up")
				}
				var err error
				if b, err = src.NewBackup("file:" + (&url.URL{Path: partial}).EscapedPath()); err != nil {
					return err
				}
			}
			var err error
			more, err = b.Step(backupStep)
			return err
		})
		_ = conn.Close()
		if err != nil {
			return fail(translate(err))
		}
		if progress != nil {
			progress(int64(steps) * int64(backupStep) * pageSize)
		}
		if !more {
			break
		}
	}
	if err := finish(); err != nil {
		return fail(err)
	}
	if err := os.Rename(partial, final); err != nil {
		return fail(err)
	}
	st, err := os.Stat(final)
	if err != nil {
		return models.Backup{}, fmt.Errorf("back up: %w", err)
	}
	return models.Backup{Path: final, Bytes: st.Size(), At: at}, nil
}
