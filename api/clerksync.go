package api

import (
	"context"
	"errors"
	"net/http"
	stdsync "sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// ClerkSyncer reads one user or organization from Clerk's Backend API and
// applies it.
type ClerkSyncer interface {
	// SyncUser's errors wrap models.ErrNotFound when Clerk does not know
	// the user, models.ErrRetryLater when Clerk or the state is not ready,
	// models.ErrBadUpstream when Clerk's answer cannot be applied.
	SyncUser(ctx context.Context, userID string) (sync.Result, error)
	// SyncOrganization is SyncUser for an organization.
	SyncOrganization(ctx context.Context, orgID string) (sync.Result, error)
}

// syncTimeout bounds how long a caller of a sync route waits for Clerk
// (rate limit included) before a 503.
const syncTimeout = 10 * time.Second

// Defaults of the sync route's bounds (see Limits).
const (
	DefaultSyncsPerKey     = 4
	DefaultSyncNotFoundFor = 10 * time.Second
)

// maxNotFound bounds the ids remembered as unknown to Clerk.
const maxNotFound = 10_000

// syncGuard keeps the sync routes (POST /v1/users/{userId}/sync, POST
// /v1/organizations/{orgId}/sync) from multiplying a client's requests
// into Clerk's: each key has a bounded number of them in flight, both
// routes together, and an id Clerk did not know is answered 404 from
// memory for a while (user and organization ids differ by their prefix).
type syncGuard struct {
	perKey      int
	notFoundFor time.Duration

	mu       stdsync.Mutex
	inFlight map[[32]byte]int     // by key hash; only keys with requests in flight
	notFound map[string]time.Time // id → until when it is answered from memory
}

func newSyncGuard(l Limits) *syncGuard {
	if l.SyncsPerKey <= 0 {
		l.SyncsPerKey = DefaultSyncsPerKey
	}
	if l.SyncNotFoundFor <= 0 {
		l.SyncNotFoundFor = DefaultSyncNotFoundFor
	}
	return &syncGuard{perKey: l.SyncsPerKey, notFoundFor: l.SyncNotFoundFor,
		inFlight: map[[32]byte]int{}, notFound: map[string]time.Time{}}
}

// enter takes one of key's places, or fails with ErrTooManyRequests.
func (g *syncGuard) enter(key [32]byte) (leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inFlight[key] >= g.perKey {
		return nil, models.Public(models.ErrTooManyRequests,
			"this key has %d syncs from Clerk in flight, as many as it may; retry once one has finished", g.perKey)
	}
	g.inFlight[key]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.inFlight[key]--; g.inFlight[key] <= 0 {
			delete(g.inFlight, key)
		}
	}, nil
}

// knownUnknown reports whether Clerk said lately that it does not know id.
func (g *syncGuard) knownUnknown(id string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.notFound[id]
	if ok && !now.Before(until) {
		delete(g.notFound, id)
		return false
	}
	return ok
}

// noteUnknown remembers that Clerk does not know id. When the memory is
// full, expired ids make room; if none has, id is not remembered.
func (g *syncGuard) noteUnknown(id string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.notFound) >= maxNotFound {
		for k, until := range g.notFound {
			if !now.Before(until) {
				delete(g.notFound, k)
			}
		}
		if len(g.notFound) >= maxNotFound {
			return
		}
	}
	g.notFound[id] = now.Add(g.notFoundFor)
}

// syncUser answers POST /v1/users/{userId}/sync: it fetches the user from
// Clerk's Backend API, applies it through the webhook's code, and answers
// as GET /v1/users/{userId} would. A user deleted here is not asked for:
// it stays deleted, and the answer is GET's (404 for the app). Only an id
// of Clerk's shape is asked for; one Clerk did not know is answered 404
// without asking again for a while; a caller that leaves stops the work
// (the read from Clerk too, unless another caller waits for it).
func (s *server) syncUser(c echo.Context) error {
	var req getUserRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if !models.KindUser.IsID(req.UserID) {
		return models.Public(models.ErrInvalid, "userId %s is not a Clerk user id (user_ followed by letters and digits)",
			models.Quote(req.UserID)).In("userId")
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
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
		if err := s.fetchUser(c, req.UserID); err != nil {
			return err
		}
		if u, err = s.users.Get(ctx, req.UserID); err != nil {
			return err
		}
	default:
		return err
	}
	if (u.Deleted() || u.Deprovisioned) && !req.IncludeDeleted {
		return notFound(models.ErrNotFound, "user", req.UserID)
	}
	return c.JSON(http.StatusOK, newUserJSON(u))
}

// syncOrganization answers POST /v1/organizations/{orgId}/sync as
// syncUser does for a user: it fetches the organization from Clerk's
// Backend API (GET /organizations/{id}), applies it through the webhook's
// code, and answers as GET /v1/organizations/{orgId} would, with the same
// guards.
func (s *server) syncOrganization(c echo.Context) error {
	var req getOrganizationRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if !models.KindOrganization.IsID(req.OrgID) {
		// Clerk's route takes a slug too: only an id is sent.
		return models.Public(models.ErrInvalid, "orgId %s is not a Clerk organization id (org_ followed by letters and digits)",
			models.Quote(req.OrgID)).In("orgId")
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	if s.clerkSync == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"fetching organizations from Clerk is not configured: set CLERK_SECRET_KEY on the server")
	}
	ctx := c.Request().Context()
	o, err := s.orgs.Get(ctx, req.OrgID)
	switch {
	case err == nil && o.Deleted():
		// Deleted for good: nothing Clerk says can change it.
	case err == nil || errors.Is(err, models.ErrNotFound):
		if err := s.fetch(c, "organization", req.OrgID, s.clerkSync.SyncOrganization); err != nil {
			return err
		}
		if o, err = s.orgs.Get(ctx, req.OrgID); err != nil {
			return err
		}
	default:
		return err
	}
	if o.Deleted() && !req.IncludeDeleted {
		return notFound(models.ErrNotFound, "organization", req.OrgID)
	}
	return c.JSON(http.StatusOK, newOrganizationJSON(o))
}

// fetchUser reads userID from Clerk and applies it, within the caller's
// key's places and syncTimeout.
func (s *server) fetchUser(c echo.Context, userID string) error {
	return s.fetch(c, "user", userID, s.clerkSync.SyncUser)
}

// fetch reads the object id (a user or organization, as what says) from
// Clerk with syncOne and applies it, within the caller's key's places and
// syncTimeout.
func (s *server) fetch(c echo.Context, what, id string, syncOne func(context.Context, string) (sync.Result, error)) error {
	ctx := c.Request().Context()
	if s.syncs.knownUnknown(id, s.now()) {
		return notFound(models.ErrNotFound, what, id)
	}
	leave, err := s.syncs.enter(keyHash(c))
	if err != nil {
		return err
	}
	defer leave()
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	_, err = syncOne(sctx, id)
	switch {
	case err != nil && sctx.Err() != nil && ctx.Err() == nil:
		return models.Public(models.ErrRetryLater, "Clerk did not answer within %s", syncTimeout)
	case errors.Is(err, models.ErrNotFound):
		s.syncs.noteUnknown(id, s.now())
	}
	return err
}
