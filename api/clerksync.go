package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// UserSyncer reads one user from Clerk's Backend API and applies it.
type UserSyncer interface {
	// SyncUser's errors wrap models.ErrNotFound when Clerk does not know
	// the user, models.ErrRetryLater when Clerk or the state is not ready.
	SyncUser(ctx context.Context, userID string) (sync.Result, error)
}

// syncTimeout bounds how long a caller of POST /v1/users/{userId}/sync
// waits for Clerk (rate limit included) before a 503.
const syncTimeout = 10 * time.Second

// syncUser answers POST /v1/users/{userId}/sync: it fetches the user from
// Clerk's Backend API, applies it through the webhook's code, and answers
// as GET /v1/users/{userId} would. A user deleted here is not asked for:
// it stays deleted, and the answer is GET's (404 for the app).
func (s *server) syncUser(c echo.Context) error {
	var req getUserRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.IncludeDeleted && !isAdmin(c) {
		return fmt.Errorf("%w: includeDeleted needs an admin key", models.ErrForbidden)
	}
	if s.clerkSync == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"fetching users from Clerk is not configured: set CLERK_SECRET_KEY on the server")
	}
	ctx := c.Request().Context()
	u, err := s.users.Get(ctx, req.UserID)
	switch {
	case err == nil && u.Deleted():
		// Deleted for good: nothing Clerk says can change it.
	case err == nil || errors.Is(err, models.ErrNotFound):
		sctx, cancel := context.WithTimeout(ctx, syncTimeout)
		_, err = s.clerkSync.SyncUser(sctx, req.UserID)
		if err != nil && sctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w: Clerk did not answer within %s", models.ErrRetryLater, syncTimeout)
		}
		cancel()
		if err != nil {
			return err
		}
		if u, err = s.users.Get(ctx, req.UserID); err != nil {
			return err
		}
	default:
		return err
	}
	if (u.Deleted() || u.Deprovisioned) && !req.IncludeDeleted {
		return fmt.Errorf("user %s: %w", req.UserID, models.ErrNotFound)
	}
	return c.JSON(http.StatusOK, newUserJSON(u))
}
