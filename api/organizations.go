package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// OrganizationReader reads organizations.
type OrganizationReader interface {
	Get(ctx context.Context, orgID string) (models.Organization, error)
	List(ctx context.Context, f models.OrganizationFilter) (models.OrganizationPage, error)
	// Changes returns a page of the change feed; NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.OrganizationPage, error)
}

// MembershipReader reads memberships, each with its member joined from
// the user's current record.
type MembershipReader interface {
	List(ctx context.Context, f models.MembershipFilter) (models.MembershipPage, error)
	// Changes returns a page of the change feed; NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.MembershipPage, error)
}

// organizationJSON is an organization as the API shows it: never its
// private_metadata, which stays in the event alone.
type organizationJSON struct {
	OrganizationID        string          `json:"organizationId"`
	Name                  *string         `json:"name"`
	Slug                  *string         `json:"slug"`
	ImageURL              *string         `json:"imageUrl"`
	Metadata              json.RawMessage `json:"metadata"`
	MembersCount          *int64          `json:"membersCount"`
	MaxAllowedMemberships *int64          `json:"maxAllowedMemberships"`
	CreatedBy             *string         `json:"createdBy"`
	SourceCreatedAt       *string         `json:"sourceCreatedAt"`
	CreatedAt             string          `json:"createdAt"`
	UpdatedAt             string          `json:"updatedAt"`
	DeletedAt             *string         `json:"deletedAt"`
}

func newOrganizationJSON(o models.Organization) organizationJSON {
	return organizationJSON{
		OrganizationID: o.OrgID, Name: optString(o.Name), Slug: optString(o.Slug), ImageURL: optString(o.ImageURL),
		Metadata: o.Metadata, MembersCount: o.MembersCount, MaxAllowedMemberships: o.MaxAllowedMemberships,
		CreatedBy: optString(o.CreatedBy), SourceCreatedAt: optTime(o.SourceCreatedAt),
		CreatedAt: formatTime(o.CreatedAt), UpdatedAt: formatTime(o.UpdatedAt), DeletedAt: optTime(o.DeletedAt),
	}
}

// deletedOrganizationJSON is a deleted organization in the change feed.
type deletedOrganizationJSON struct {
	OrganizationID string `json:"organizationId"`
	CreatedAt      string `json:"createdAt"`
	UpdatedAt      string `json:"updatedAt"`
	DeletedAt      string `json:"deletedAt"`
}

// memberJSON is a membership's user as the membership shows it.
type memberJSON struct {
	FirstName     *string `json:"firstName"`
	LastName      *string `json:"lastName"`
	ImageURL      *string `json:"imageUrl"`
	Identifier    *string `json:"identifier"`
	Username      *string `json:"username"`
	Banned        bool    `json:"banned"`
	Deprovisioned bool    `json:"deprovisioned"`
	// Source says where it comes from: "user", the user's current record,
	// or "membership", the membership's public_user_data (usersync does
	// not have the user).
	Source string `json:"source"`
}

// organizationSummaryJSON is what a user's membership shows of its
// organization.
type organizationSummaryJSON struct {
	OrganizationID string  `json:"organizationId"`
	Name           *string `json:"name"`
	Slug           *string `json:"slug"`
	ImageURL       *string `json:"imageUrl"`
}

// membershipJSON is a membership as the API shows it: never its
// private_metadata.
type membershipJSON struct {
	MembershipID   string          `json:"membershipId"`
	OrganizationID string          `json:"organizationId"`
	UserID         string          `json:"userId"`
	Role           *string         `json:"role"`
	RoleName       *string         `json:"roleName"`
	Permissions    []string        `json:"permissions"`
	Metadata       json.RawMessage `json:"metadata"`
	Member         memberJSON      `json:"member"`
	// Organization: in a user's memberships, the organization's summary
	// (null while usersync does not know the organization).
	Organization    *organizationSummaryJSON `json:"organization,omitempty"`
	SourceCreatedAt *string                  `json:"sourceCreatedAt"`
	CreatedAt       string                   `json:"createdAt"`
	UpdatedAt       string                   `json:"updatedAt"`
	DeletedAt       *string                  `json:"deletedAt"`
}

// newMembershipJSON shows m; withOrg adds its organization's summary (a
// user's memberships).
func newMembershipJSON(m models.Membership, withOrg bool) membershipJSON {
	source := "membership"
	if m.MemberFromUser {
		source = "user"
	}
	perms := m.Permissions
	if perms == nil {
		perms = []string{}
	}
	j := membershipJSON{
		MembershipID: m.MembershipID, OrganizationID: m.OrgID, UserID: m.UserID,
		Role: optString(m.Role), RoleName: optString(m.RoleName), Permissions: perms, Metadata: m.Metadata,
		Member: memberJSON{
			FirstName: optString(m.Member.FirstName), LastName: optString(m.Member.LastName),
			ImageURL: optString(m.Member.ImageURL), Identifier: optString(m.Member.Identifier),
			Username: optString(m.Member.Username), Banned: m.Member.Banned, Deprovisioned: m.Member.Deprovisioned,
			Source: source,
		},
		SourceCreatedAt: optTime(m.SourceCreatedAt),
		CreatedAt:       formatTime(m.CreatedAt), UpdatedAt: formatTime(m.UpdatedAt), DeletedAt: optTime(m.DeletedAt),
	}
	if withOrg {
		j.Organization = &organizationSummaryJSON{OrganizationID: m.OrgID}
		if o := m.Organization; o != nil {
			j.Organization.Name, j.Organization.Slug, j.Organization.ImageURL = optString(o.Name), optString(o.Slug), optString(o.ImageURL)
		}
	}
	return j
}

// deletedMembershipJSON is a deleted membership in the change feed: its
// ids, so that an application can delete its own copy.
type deletedMembershipJSON struct {
	MembershipID   string `json:"membershipId"`
	OrganizationID string `json:"organizationId,omitempty"`
	UserID         string `json:"userId,omitempty"`
	CreatedAt      string `json:"createdAt"`
	UpdatedAt      string `json:"updatedAt"`
	DeletedAt      string `json:"deletedAt"`
}

type listOrganizationsRequest struct {
	Limit          int    `query:"limit" validate:"min=1,max=200"`
	Cursor         string `query:"cursor" validate:"max=256"`
	Slug           string `query:"slug" validate:"max=256"`
	IncludeDeleted bool   `query:"includeDeleted"`
	UpdatedSince   string `query:"updatedSince" validate:"max=64"`
}

type pageResponse struct {
	Data       []any   `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

func adminOnly(c echo.Context, includeDeleted bool) error {
	if includeDeleted && !isAdmin(c) {
		return models.Public(models.ErrForbidden, "includeDeleted needs an admin key").In("includeDeleted")
	}
	return nil
}

// feedUntil is the newest change the change feeds serve now.
func (s *server) feedUntil() time.Time {
	return s.now().Add(-s.settle).UTC().Truncate(time.Millisecond)
}

// listOrganizations answers GET /v1/organizations: active organizations,
// deleted ones too for an admin; or, with updatedSince, the change feed.
func (s *server) listOrganizations(c echo.Context) error {
	req := listOrganizationsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if req.UpdatedSince != "" {
		if req.Slug != "" || req.IncludeDeleted {
			return models.Public(models.ErrInvalid, "updatedSince cannot be combined with slug or includeDeleted (the change feed always includes deleted organizations)").In("updatedSince")
		}
		since, err := parseTime("updatedSince", req.UpdatedSince)
		if err != nil {
			return err
		}
		page, err := s.orgs.Changes(ctx, models.ChangeFilter{Since: since, Until: s.feedUntil(), After: req.Cursor, Limit: req.Limit})
		if err != nil {
			return err
		}
		resp := pageResponse{Data: make([]any, 0, len(page.Organizations)), NextCursor: &page.NextCursor}
		for _, o := range page.Organizations {
			if o.DeletedAt != nil {
				resp.Data = append(resp.Data, deletedOrganizationJSON{OrganizationID: o.OrgID, CreatedAt: formatTime(o.CreatedAt),
					UpdatedAt: formatTime(o.UpdatedAt), DeletedAt: formatTime(*o.DeletedAt)})
				continue
			}
			resp.Data = append(resp.Data, newOrganizationJSON(o))
		}
		return c.JSON(http.StatusOK, resp)
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	page, err := s.orgs.List(ctx, models.OrganizationFilter{Slug: req.Slug, IncludeDeleted: req.IncludeDeleted, After: req.Cursor, Limit: req.Limit})
	if err != nil {
		return err
	}
	resp := pageResponse{Data: make([]any, 0, len(page.Organizations))}
	for _, o := range page.Organizations {
		resp.Data = append(resp.Data, newOrganizationJSON(o))
	}
	if page.NextCursor != "" {
		resp.NextCursor = &page.NextCursor
	}
	return c.JSON(http.StatusOK, resp)
}

type getOrganizationRequest struct {
	OrgID          string `param:"orgId" validate:"required,max=128"`
	IncludeDeleted bool   `query:"includeDeleted"`
}

// getOrganization answers GET /v1/organizations/{orgId}: a deleted
// organization is not found unless an admin asks for deleted ones.
func (s *server) getOrganization(c echo.Context) error {
	var req getOrganizationRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	o, err := s.orgs.Get(c.Request().Context(), req.OrgID)
	if err != nil {
		return notFound(err, "organization", req.OrgID)
	}
	if o.Deleted() && !req.IncludeDeleted {
		return notFound(models.ErrNotFound, "organization", req.OrgID)
	}
	return c.JSON(http.StatusOK, newOrganizationJSON(o))
}

type listMembershipsRequest struct {
	OrgID          string `param:"orgId" validate:"max=128"`
	UserID         string `param:"userId" validate:"max=128"`
	Limit          int    `query:"limit" validate:"min=1,max=200"`
	Cursor         string `query:"cursor" validate:"max=256"`
	IncludeDeleted bool   `query:"includeDeleted"`
}

// listMemberships answers GET /v1/organizations/{orgId}/memberships and
// GET /v1/users/{userId}/memberships: the active memberships (neither
// they, their organization nor their user deleted, their user not
// deprovisioned), every one for an admin with includeDeleted. An unknown
// or deleted organization or user has no active membership: the list is
// empty.
func (s *server) listMemberships(c echo.Context) error {
	req := listMembershipsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	page, err := s.members.List(c.Request().Context(), models.MembershipFilter{
		OrgID: req.OrgID, UserID: req.UserID, IncludeDeleted: req.IncludeDeleted, After: req.Cursor, Limit: req.Limit,
	})
	if err != nil {
		return err
	}
	resp := pageResponse{Data: make([]any, 0, len(page.Memberships))}
	for _, m := range page.Memberships {
		resp.Data = append(resp.Data, newMembershipJSON(m, req.UserID != ""))
	}
	if page.NextCursor != "" {
		resp.NextCursor = &page.NextCursor
	}
	return c.JSON(http.StatusOK, resp)
}

type membershipFeedRequest struct {
	Limit        int    `query:"limit" validate:"min=1,max=200"`
	Cursor       string `query:"cursor" validate:"max=256"`
	UpdatedSince string `query:"updatedSince" validate:"required,max=64"`
}

// membershipFeed answers GET /v1/memberships?updatedSince=…: the change
// feed of every membership, oldest change first, tombstones included (a
// cascade moves the memberships it deletes). A user's change does not
// move its memberships: the users' feed carries it.
func (s *server) membershipFeed(c echo.Context) error {
	req := membershipFeedRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	since, err := parseTime("updatedSince", req.UpdatedSince)
	if err != nil {
		return err
	}
	page, err := s.members.Changes(c.Request().Context(), models.ChangeFilter{Since: since, Until: s.feedUntil(), After: req.Cursor, Limit: req.Limit})
	if err != nil {
		return err
	}
	resp := pageResponse{Data: make([]any, 0, len(page.Memberships)), NextCursor: &page.NextCursor}
	for _, m := range page.Memberships {
		if m.DeletedAt != nil {
			resp.Data = append(resp.Data, deletedMembershipJSON{MembershipID: m.MembershipID, OrganizationID: m.OrgID, UserID: m.UserID,
				CreatedAt: formatTime(m.CreatedAt), UpdatedAt: formatTime(m.UpdatedAt), DeletedAt: formatTime(*m.DeletedAt)})
			continue
		}
		resp.Data = append(resp.Data, newMembershipJSON(m, false))
	}
	return c.JSON(http.StatusOK, resp)
}
