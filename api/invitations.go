package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// InvitationReader reads organization invitations.
type InvitationReader interface {
	Get(ctx context.Context, invitationID string) (models.Invitation, error)
	List(ctx context.Context, f models.InvitationFilter) (models.InvitationPage, error)
}

// invitationJSON is an invitation as the API shows it: never its url
// (which holds the invitation's token) nor its private_metadata, which
// stay in the event alone. status is what it reads as now: a pending
// invitation past its expiresAt is expired.
type invitationJSON struct {
	InvitationID    string          `json:"invitationId"`
	OrganizationID  string          `json:"organizationId"`
	EmailAddress    *string         `json:"emailAddress"`
	Role            *string         `json:"role"`
	RoleName        *string         `json:"roleName"`
	Status          string          `json:"status"`
	Metadata        json.RawMessage `json:"metadata"`
	UserID          *string         `json:"userId"`
	ExpiresAt       *string         `json:"expiresAt"`
	SourceCreatedAt *string         `json:"sourceCreatedAt"`
	CreatedAt       string          `json:"createdAt"`
	UpdatedAt       string          `json:"updatedAt"`
	DeletedAt       *string         `json:"deletedAt"`
	ErasedAt        *string         `json:"erasedAt"`
}

func newInvitationJSON(i models.Invitation, now time.Time) invitationJSON {
	return invitationJSON{
		InvitationID: i.InvitationID, OrganizationID: i.OrgID, EmailAddress: optString(i.EmailAddress),
		Role: optString(i.Role), RoleName: optString(i.RoleName), Status: i.StatusAt(now), Metadata: i.Metadata,
		UserID: optString(i.UserID), ExpiresAt: optTime(i.ExpiresAt), SourceCreatedAt: optTime(i.SourceCreatedAt),
		CreatedAt: formatTime(i.CreatedAt), UpdatedAt: formatTime(i.UpdatedAt), DeletedAt: optTime(i.DeletedAt),
		ErasedAt: optTime(i.ErasedAt),
	}
}

// invitationKind is how the page reader reads invitations, each's status
// as it reads at now.
func invitationKind(now time.Time) pageKind[models.Invitation] {
	return pageKind[models.Invitation]{
		size: invitationBytes,
		show: func(i models.Invitation) any { return newInvitationJSON(i, now) },
		times: func(i models.Invitation) (time.Time, time.Time, *time.Time) {
			return i.CreatedAt, i.UpdatedAt, i.DeletedAt
		},
	}
}

// invitationBytes is about what i holds in memory and in its JSON.
func invitationBytes(i models.Invitation) int {
	return 256 + len(i.InvitationID) + len(i.OrgID) + len(i.EmailAddress) + len(i.Role) + len(i.RoleName) +
		len(i.Metadata) + len(i.UserID)
}

type listInvitationsRequest struct {
	OrgID          string `param:"orgId" validate:"required,max=128"`
	Status         string `query:"status" validate:"omitempty,oneof=pending accepted revoked expired"`
	Limit          int    `query:"limit" validate:"min=1,max=200"`
	Cursor         string `query:"cursor"` // bounded by the page reader (maxCursor)
	IncludeDeleted bool   `query:"includeDeleted"`
}

// listInvitations answers GET /v1/organizations/{orgId}/invitations: the
// organization's invitations, of one status (as they read now) with
// status, those deleted with their organization too for an admin with
// includeDeleted. An unknown or deleted organization has none: the list
// is empty.
func (s *server) listInvitations(c echo.Context) error {
	req := listInvitationsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	now := s.now().UTC()
	return listPage(s, c, invitationKind(now), req.Limit, req.Cursor, req.IncludeDeleted,
		func(ctx context.Context, after string, n int) ([]models.Invitation, string, error) {
			p, err := s.invites.List(ctx, models.InvitationFilter{
				OrgID: req.OrgID, Status: req.Status, IncludeDeleted: req.IncludeDeleted, Now: now, After: after, Limit: n,
			})
			return p.Invitations, p.NextCursor, err
		})
}

type getInvitationRequest struct {
	OrgID          string `param:"orgId" validate:"required,max=128"`
	InvitationID   string `param:"invitationId" validate:"required,max=128"`
	IncludeDeleted bool   `query:"includeDeleted"`
}

// getInvitation answers GET /v1/organizations/{orgId}/invitations/{invitationId}:
// an invitation of another organization, or one deleted with its
// organization (unless an admin asks for deleted ones), is not found.
func (s *server) getInvitation(c echo.Context) error {
	var req getInvitationRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	i, err := s.invites.Get(c.Request().Context(), req.InvitationID)
	if err != nil {
		return notFound(err, "invitation", req.InvitationID)
	}
	if i.OrgID != req.OrgID || (i.Deleted() && !req.IncludeDeleted) {
		return notFound(models.ErrNotFound, "invitation", req.InvitationID)
	}
	return c.JSON(http.StatusOK, newInvitationJSON(i, s.now().UTC()))
}
