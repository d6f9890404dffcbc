package api

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// The change feeds, one per kind, answered by feedPage: every item whose
// record changed at or after updatedSince, oldest change first, deleted
// ones as tombstones, changes younger than the settle time held back.

// userFeed answers GET /v1/users?updatedSince=…: the users' change feed;
// deprovisioned users come whole.
func (s *server) userFeed(c echo.Context, req listUsersRequest) error {
	if err := feedAlone("email", req.Email != "", req.IncludeDeleted, "users"); err != nil {
		return err
	}
	return feedPage(s, c, userKind, req.Limit, req.Cursor, req.UpdatedSince, func(ctx context.Context, f models.ChangeFilter) ([]models.User, string, error) {
		p, err := s.users.Changes(ctx, f)
		return p.Users, p.NextCursor, err
	})
}

// organizationFeed answers GET /v1/organizations?updatedSince=…: the
// organizations' change feed.
func (s *server) organizationFeed(c echo.Context, req listOrganizationsRequest) error {
	if err := feedAlone("slug", req.Slug != "", req.IncludeDeleted, "organizations"); err != nil {
		return err
	}
	return feedPage(s, c, organizationKind, req.Limit, req.Cursor, req.UpdatedSince, func(ctx context.Context, f models.ChangeFilter) ([]models.Organization, string, error) {
		p, err := s.orgs.Changes(ctx, f)
		return p.Organizations, p.NextCursor, err
	})
}

type membershipFeedRequest struct {
	Limit        int    `query:"limit" validate:"min=1,max=200"`
	Cursor       string `query:"cursor"` // bounded by the page reader (maxCursor)
	UpdatedSince string `query:"updatedSince" validate:"required,max=64"`
}

// membershipFeed answers GET /v1/memberships?updatedSince=…: the change
// feed of every membership (a cascade moves the memberships it deletes).
// A user's change does not move its memberships: the users' feed carries
// it.
func (s *server) membershipFeed(c echo.Context) error {
	req := membershipFeedRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	return feedPage(s, c, membershipKind(false), req.Limit, req.Cursor, req.UpdatedSince, func(ctx context.Context, f models.ChangeFilter) ([]models.Membership, string, error) {
		p, err := s.members.Changes(ctx, f)
		return p.Memberships, p.NextCursor, err
	})
}
