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
// because the database's storage is full. A full disk does not stop the
// database from answering a ping, so readiness remembers the failure.
const storageFullFor = time.Minute

// health remembers failures that a ping cannot see.
type health struct {
	storageFull atomic.Int64 // Unix ns of the last write refused for lack of space; 0: none
}

// observe notes err if it says the database's storage is full.
func (h *health) observe(err error) {
	if errors.Is(err, models.ErrStorageFull) {
		h.storageFull.Store(time.Now().UnixNano())
	}
}

// storageFullSince returns when storage was last full, if within
// storageFullFor of now.
func (h *health) storageFullSince(now time.Time) (time.Time, bool) {
	ns := h.storageFull.Load()
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
// failed for lack of storage space in the last minute; 503 otherwise. It
// answers GET and HEAD alike.
func (s *server) readyz(c echo.Context) error {
	if at, full := s.health.storageFullSince(time.Now()); full {
		return fmt.Errorf("%w: %w: a write failed for lack of space at %s",
			models.ErrUnavailable, models.ErrStorageFull, at.UTC().Format(time.RFC3339))
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
