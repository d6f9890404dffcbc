package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/usersync/usersync/models"
)

// ClerkUser reads one user from Clerk's Backend API.
type ClerkUser interface {
	// GetUser returns the user as Clerk sent it, or an error wrapping
	// models.ErrNotFound when Clerk does not know it.
	GetUser(ctx context.Context, userID string) (json.RawMessage, error)
}

// Fetcher applies one user read from Clerk's API on demand: for an
// application that sees a signed-in user before Clerk's user.created has
// arrived.
type Fetcher struct {
	Service *Service
	Clerk   ClerkUser
}

// SyncUser reads userID from Clerk and applies its state through the same
// code as a webhook: it never overwrites a newer state and never revives a
// deleted user. Errors wrap models.ErrNotFound when Clerk does not know the
// user (nothing is changed), models.ErrRetryLater when Clerk's API did not
// answer or the state cannot be applied yet, models.ErrBadUpstream when
// Clerk answered a user usersync cannot apply, models.ErrUnavailable when
// the database is down.
func (f *Fetcher) SyncUser(ctx context.Context, userID string) (Result, error) {
	raw, err := f.Clerk.GetUser(ctx, userID)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return Result{}, models.Public(models.ErrNotFound, "user %s is not in Clerk", models.Quote(userID))
	case errors.Is(err, models.ErrInvalid):
		return Result{}, fmt.Errorf("user %q: %w", userID, err)
	case err != nil:
		return Result{}, models.Public(models.ErrRetryLater, "Clerk's API did not answer; retry later").Because(err)
	}
	d, err := clerkUserDelivery(raw)
	if err == nil && d.Event.UserID() != userID {
		err = fmt.Errorf("the answer is user %q", d.Event.UserID())
	}
	if err != nil {
		// Clerk's answer is at fault, not the request.
		return Result{}, models.Public(models.ErrBadUpstream, "Clerk's answer for user %s is not a user usersync can apply", models.Quote(userID)).
			Because(fmt.Errorf("read user %q from Clerk: %w", userID, err))
	}
	res, err := f.Service.Ingest(ctx, d)
	if errors.Is(err, models.ErrInvalid) {
		return res, models.Public(models.ErrBadUpstream, "Clerk's answer for user %s is not a user usersync can apply", models.Quote(userID)).
			Because(fmt.Errorf("apply user %q from Clerk: %w", userID, err))
	}
	return res, err
}
