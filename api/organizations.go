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
	deletedTimes
}

// organizationKind is how the page reader reads organizations.
var organizationKind = pageKind[models.Organization]{
	size: organizationBytes,
	show: func(o models.Organization) any { return newOrganizationJSON(o) },
	times: func(o models.Organization) (time.Time, time.Time, *time.Time) {
		return o.CreatedAt, o.UpdatedAt, o.DeletedAt
	},
	tombstone: func(o models.Organization, t deletedTimes) any {
		return deletedOrganizationJSON{OrganizationID: o.OrgID, deletedTimes: t}
	},
}

// organizationBytes is about what o holds in memory and in its JSON.
func organizationBytes(o models.Organization) int {
	return 256 + len(o.OrgID) + len(o.Name) + len(o.Slug) + len(o.ImageURL) + len(o.Metadata) + len(o.CreatedBy)
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
	deletedTimes
}

// membershipKind is how the page reader reads memberships; withOrg shows
// each one's organization (a user's memberships).
func membershipKind(withOrg bool) pageKind[models.Membership] {
	return pageKind[models.Membership]{
		size: membershipBytes,
		show: func(m models.Membership) any { return newMembershipJSON(m, withOrg) },
		times: func(m models.Membership) (time.Time, time.Time, *time.Time) {
			return m.CreatedAt, m.UpdatedAt, m.DeletedAt
		},
		tombstone: func(m models.Membership, t deletedTimes) any {
			return deletedMembershipJSON{MembershipID: m.MembershipID, OrganizationID: m.OrgID, UserID: m.UserID, deletedTimes: t}
		},
	}
}

// membershipBytes is about what m holds in memory and in its JSON: its
// permissions may be 1,000 of 256 bytes.
func membershipBytes(m models.Membership) int {
	n := 256 + len(m.MembershipID) + len(m.OrgID) + len(m.UserID) + len(m.Role) + len(m.RoleName) + len(m.Metadata) +
		len(m.Member.FirstName) + len(m.Member.LastName) + len(m.Member.ImageURL) + len(m.Member.Identifier) + len(m.Member.Username)
	for _, p := range m.Permissions {
		n += 4 + len(p)
	}
	if o := m.Organization; o != nil {
		n += 128 + len(o.OrgID) + len(o.Name) + len(o.Slug) + len(o.ImageURL)
	}
	return n
}

type listOrganizationsRequest struct {
	Limit          int    `query:"limit" validate:"min=1,max=200"`
	Cursor         string `query:"cursor"` // bounded by the page reader (maxCursor)
	Slug           string `query:"slug" validate:"max=256"`
	IncludeDeleted bool   `query:"includeDeleted"`
	UpdatedSince   string `query:"updatedSince" validate:"max=64"`
}

// listOrganizations answers GET /v1/organizations: active organizations,
// deleted ones too for an admin; or, with updatedSince, the change feed
// (organizationFeed).
func (s *server) listOrganizations(c echo.Context) error {
	req := listOrganizationsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.UpdatedSince != "" {
		return s.organizationFeed(c, req)
	}
	return listPage(s, c, organizationKind, req.Limit, req.Cursor, req.IncludeDeleted,
		func(ctx context.Context, after string, n int) ([]models.Organization, string, error) {
			p, err := s.orgs.List(ctx, models.OrganizationFilter{Slug: req.Slug, IncludeDeleted: req.IncludeDeleted, After: after, Limit: n})
			return p.Organizations, p.NextCursor, err
		})
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
	Cursor         string `query:"cursor"` // bounded by the page reader (maxCursor)
	IncludeDeleted bool   `query:"includeDeleted"`
}

// listMemberships answers GET /v1/organizations/{orgId}/memberships and
// GET /v1/users/{userId}/memberships (each membership with its
// organization): the active memberships (neither they, their organization
// nor their user deleted, their user not deprovisioned), every one for an
// admin with includeDeleted. An unknown or deleted organization or user
// has no active membership: the list is empty.
func (s *server) listMemberships(c echo.Context) error {
	req := listMembershipsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	return listPage(s, c, membershipKind(req.UserID != ""), req.Limit, req.Cursor, req.IncludeDeleted,
		func(ctx context.Context, after string, n int) ([]models.Membership, string, error) {
			p, err := s.members.List(ctx, models.MembershipFilter{
				OrgID: req.OrgID, UserID: req.UserID, IncludeDeleted: req.IncludeDeleted, After: after, Limit: n,
			})
			return p.Memberships, p.NextCursor, err
		})
}
