package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	stdsync "sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// backupTimeout bounds one backup: the online backup copies a few hundred
// MB a second, so hours mean something is wrong.
const backupTimeout = 2 * time.Hour

// backupJob is the last backup this instance started.
type backupJob struct {
	mu stdsync.Mutex
	jobRun
	copied int64
	result models.Backup
}

type backupResponse struct {
	jobStatus // state none: no backup since this instance started
	// Copied is how many bytes of the database have been copied so far.
	Copied int64 `json:"copied"`
	// File is the backup's name in the data dir's backups directory, and
	// Bytes its size, once done.
	File  string `json:"file,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
}

func (j *backupJob) view() backupResponse {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := backupResponse{jobStatus: j.status(), Copied: j.copied}
	if j.state == "done" {
		r.File, r.Bytes = filepath.Base(j.result.Path), j.result.Bytes
	}
	return r
}

// startBackup answers POST /v1/admin/backup: it starts a backup of the
// embedded store in the background (sqlite.Store.Backup: SQLite's online
// backup in small steps on the store's own connection, which neither
// stalls the writes nor holds back erasure) and answers 202 with its
// state; GET /v1/admin/backup follows it. One runs at a time.
func (s *server) startBackup(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	if s.backuper == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"backups are made by usersync for the embedded store only; on MongoDB, back up with the means of your deployment")
	}
	j := &s.backup
	now := s.now()
	j.mu.Lock()
	if j.state == "running" {
		j.mu.Unlock()
		return fmt.Errorf("%w: a backup is running since %s", models.ErrConflict, formatTime(j.started))
	}
	j.state, j.started, j.finished, j.copied, j.result, j.err = "running", now, time.Time{}, 0, models.Backup{}, ""
	j.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.consoleContext(), backupTimeout)
	go func() {
		defer cancel()
		res, err := s.backuper.Backup(ctx, now, func(copied int64) {
			j.mu.Lock()
			j.copied = copied
			j.mu.Unlock()
		})
		j.mu.Lock()
		defer j.mu.Unlock()
		j.result, j.finished, j.state = res, s.now(), "done"
		if err != nil {
			s.log.LogAttrs(context.Background(), slog.LevelError, "backup failed", slog.String("error", err.Error()))
			j.state, j.err = "failed", publicNote(err)
		}
	}()
	return c.JSON(http.StatusAccepted, j.view())
}

// backupState answers GET /v1/admin/backup: the state of the last backup
// this instance started.
func (s *server) backupState(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	if s.backuper == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"backups are made by usersync for the embedded store only; on MongoDB, back up with the means of your deployment")
	}
	return c.JSON(http.StatusOK, s.backup.view())
}

// jobRun is the lifecycle of a job an admin starts in the background and
// follows (a backup, a reconcile dry run), one at a time per instance.
type jobRun struct {
	state    string // "", running, done, failed
	started  time.Time
	finished time.Time
	err      string // failed: what a client may read of why
}

// jobStatus is jobRun as the API answers it.
type jobStatus struct {
	// State is none (none since this instance started), running, done or
	// failed.
	State      string  `json:"state"`
	StartedAt  *string `json:"startedAt"`
	FinishedAt *string `json:"finishedAt"`
	Error      string  `json:"error,omitempty"`
}

func (r jobRun) status() jobStatus {
	st := jobStatus{State: r.state, Error: r.err}
	if r.state == "" {
		st.State = "none"
		return st
	}
	st.StartedAt = optTime(&r.started)
	if r.state != "running" {
		st.FinishedAt = optTime(&r.finished)
	}
	return st
}
