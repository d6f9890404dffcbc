package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// storageFullFor is how long /readyz reports not ready after a write failed
// because the database's storage is full or read-only. Neither stops the
// database from answering a ping, so readiness remembers the failure.
const storageFullFor = time.Minute

// health remembers failures that a ping cannot see.
type health struct {
	storageFull atomic.Int64 // Unix ns of the last write refused for lack of space; 0: none
	readOnly    atomic.Int64 // Unix ns of the last write refused by a read-only database; 0: none
	// corrupt is the Unix ns at which the database was first found
	// damaged; 0: never. A damaged file does not heal by itself: readiness
	// reports it until the process restarts (on a restored file).
	corrupt atomic.Int64
}

// observe notes err if it says the database's storage is full or
// read-only.
func (h *health) observe(err error) {
	switch {
	case errors.Is(err, models.ErrStorageFull):
		h.storageFull.Store(time.Now().UnixNano())
	case errors.Is(err, models.ErrReadOnly):
		h.readOnly.Store(time.Now().UnixNano())
	case errors.Is(err, models.ErrCorrupt):
		h.corrupt.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// corruptSince returns when the database was first found damaged.
func (h *health) corruptSince() (time.Time, bool) {
	ns := h.corrupt.Load()
	return time.Unix(0, ns), ns != 0
}

// storageFullSince returns when storage was last full, if within
// storageFullFor of now.
func (h *health) storageFullSince(now time.Time) (time.Time, bool) {
	return recent(&h.storageFull, now)
}

// readOnlySince returns when a write was last refused by a read-only
// database, if within storageFullFor of now.
func (h *health) readOnlySince(now time.Time) (time.Time, bool) { return recent(&h.readOnly, now) }

func recent(v *atomic.Int64, now time.Time) (time.Time, bool) {
	ns := v.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	at := time.Unix(0, ns)
	return at, now.Sub(at) < storageFullFor
}

// healthz answers while the process is up, to GET and HEAD (net/http
// sends no body to HEAD).
func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 while the database answers a ping and no write has
// failed for lack of storage space in the last minute, and the database
// has not been found damaged; 503 otherwise (a store whose writes are
// stalled fails its ping). It answers GET and HEAD alike.
func (s *server) readyz(c echo.Context) error {
	if at, bad := s.health.corruptSince(); bad {
		return fmt.Errorf("%w: %w: found at %s", models.ErrUnavailable, models.ErrCorrupt, at.UTC().Format(time.RFC3339))
	}
	if at, full := s.health.storageFullSince(time.Now()); full {
		return fmt.Errorf("%w: %w: a write failed for lack of space at %s",
			models.ErrUnavailable, models.ErrStorageFull, at.UTC().Format(time.RFC3339))
	}
	if at, ro := s.health.readOnlySince(time.Now()); ro {
		return fmt.Errorf("%w: %w: a write was refused at %s", models.ErrUnavailable, models.ErrReadOnly, at.UTC().Format(time.RFC3339))
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		if !errors.Is(err, models.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", models.ErrUnavailable, err)
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
