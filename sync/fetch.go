package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/usersync/usersync/models"
)

// ClerkObjects reads one user or organization from Clerk's Backend API.
type ClerkObjects interface {
	// GetUser returns the user as Clerk sent it, or an error wrapping
	// models.ErrNotFound when Clerk does not know it.
	GetUser(ctx context.Context, userID string) (json.RawMessage, error)
	// GetOrganization returns the organization as Clerk sent it, or an
	// error wrapping models.ErrNotFound when Clerk does not know it.
	GetOrganization(ctx context.Context, orgID string) (json.RawMessage, error)
}

// Fetcher applies one user or organization read from Clerk's API on
// demand: for an application that sees a signed-in user, or an
// organization just made, before Clerk's webhook has arrived.
type Fetcher struct {
	Service *Service
	Clerk   ClerkObjects
}

// SyncUser reads userID from Clerk and applies its state through the same
// code as a webhook: it never overwrites a newer state and never revives a
// deleted user. Errors wrap models.ErrNotFound when Clerk does not know the
// user (nothing is changed), models.ErrRetryLater when Clerk's API did not
// answer or the state cannot be applied yet, models.ErrBadUpstream when
// Clerk answered a user usersync cannot apply, models.ErrUnavailable when
// the database is down.
func (f *Fetcher) SyncUser(ctx context.Context, userID string) (Result, error) {
	return f.sync(ctx, models.KindUser, userID, f.Clerk.GetUser)
}

// SyncOrganization reads orgID from Clerk and applies its state through
// the same code as a webhook organization.updated, with the errors of
// SyncUser; an instance with organizations turned off does not know it
// (models.ErrNotFound).
func (f *Fetcher) SyncOrganization(ctx context.Context, orgID string) (Result, error) {
	return f.sync(ctx, models.KindOrganization, orgID, f.Clerk.GetOrganization)
}

func (f *Fetcher) sync(ctx context.Context, k models.Kind, id string, get func(context.Context, string) (json.RawMessage, error)) (Result, error) {
	raw, err := get(ctx, id)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return Result{}, models.Public(models.ErrNotFound, "%s %s is not in Clerk", k, models.Quote(id))
	case errors.Is(err, models.ErrFeatureOff):
		return Result{}, models.Public(models.ErrNotFound, "%s %s is not in Clerk: the instance has %s turned off", k, models.Quote(id), k.Plural())
	case errors.Is(err, models.ErrInvalid):
		return Result{}, fmt.Errorf("%s %q: %w", k, id, err)
	case err != nil:
		return Result{}, models.Public(models.ErrRetryLater, "Clerk's API did not answer; retry later").Because(err)
	}
	d, err := clerkStateDelivery(k, raw)
	if err == nil && d.Event.ID() != id {
		err = fmt.Errorf("the answer is %s %q", k, d.Event.ID())
	}
	if err != nil {
		// Clerk's answer is at fault, not the request.
		return Result{}, models.Public(models.ErrBadUpstream, "Clerk's answer for %s %s is not %s usersync can apply", k, models.Quote(id), k.WithArticle()).
			Because(fmt.Errorf("read %s %q from Clerk: %w", k, id, err))
	}
	d.Origin = models.OriginSync
	res, err := f.Service.Ingest(ctx, d)
	if errors.Is(err, models.ErrInvalid) {
		return res, models.Public(models.ErrBadUpstream, "Clerk's answer for %s %s is not %s usersync can apply", k, models.Quote(id), k.WithArticle()).
			Because(fmt.Errorf("apply %s %q from Clerk: %w", k, id, err))
	}
	return res, err
}
