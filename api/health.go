package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// healthz answers while the process is up, to GET and HEAD (net/http
// sends no body to HEAD).
func (s *server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 while the database answers a ping, 503 otherwise; to
// GET and HEAD alike.
func (s *server) readyz(c echo.Context) error {
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
