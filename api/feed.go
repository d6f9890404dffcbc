package api

import (
	"context"
	"time"

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

type planFeedRequest struct {
	Limit        int    `query:"limit" validate:"min=1,max=200"`
	Cursor       string `query:"cursor"` // bounded by the page reader (maxCursor)
	UpdatedSince string `query:"updatedSince" validate:"required,max=64"`
}

// planFeedJSON is one payer's plan in the plans' change feed.
type planFeedJSON struct {
	Payer     payerJSON `json:"payer"`
	Plan      *planJSON `json:"plan"`
	UpdatedAt string    `json:"updatedAt"`
}

// planKind is how the page reader reads the plans' change feed, read at
// now: a plan is shown as GET /v1/users/{userId}/billing shows it,
// pending past grace as ended (newPlanJSON). A plan has no tombstone.
// The payer is not read: a deleted payer's plan is shown as stored (the
// payer's own feed has its deletion).
func planKind(now time.Time, grace time.Duration) pageKind[models.StoredPlan] {
	return pageKind[models.StoredPlan]{
		size: planBytes,
		show: func(p models.StoredPlan) any {
			return planFeedJSON{Payer: payerJSON{Kind: string(p.Payer.Kind), ID: p.Payer.ID},
				Plan: newPlanJSON(p, false, now, grace), UpdatedAt: formatTime(p.UpdatedAt)}
		},
		times: func(p models.StoredPlan) (time.Time, time.Time, *time.Time) { return p.UpdatedAt, p.UpdatedAt, nil },
	}
}

// planBytes is about what p holds in memory and in its JSON.
func planBytes(p models.StoredPlan) int {
	n := 512 + len(p.Payer.ID) + len(p.Payer.PayerID) + len(p.ItemID)
	if p.Plan != nil {
		n += len(p.Plan.ID) + len(p.Plan.Slug) + len(p.Plan.Name) + len(p.Plan.Currency)
	}
	if u := p.Upcoming; u != nil {
		n += 256 + len(u.ItemID) + len(u.Plan.ID) + len(u.Plan.Slug) + len(u.Plan.Name) + len(u.Plan.Currency)
	}
	return n
}

// planFeed answers GET /v1/billing/plans?updatedSince=…: the change feed
// of the payers' plans (a plan's updatedAt moves only when the plan
// changes), as the users' change feed answers users.
func (s *server) planFeed(c echo.Context) error {
	req := planFeedRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	return feedPage(s, c, planKind(s.now(), s.billingGrace), req.Limit, req.Cursor, req.UpdatedSince,
		func(ctx context.Context, f models.ChangeFilter) ([]models.StoredPlan, string, error) {
			p, err := s.billing.PlanChanges(ctx, f)
			return p.Plans, p.NextCursor, err
		})
}
