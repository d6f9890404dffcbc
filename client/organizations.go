package client

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// Organization is an organization as usersync serves it. In a change
// feed a deleted organization carries only OrganizationID, CreatedAt,
// UpdatedAt and DeletedAt.
type Organization struct {
	OrganizationID string  `json:"organizationId"`
	Name           *string `json:"name"`
	Slug           *string `json:"slug"`
	ImageURL       *string `json:"imageUrl"`
	// Metadata is Clerk's public_metadata, as Clerk sent it.
	Metadata              json.RawMessage `json:"metadata"`
	MembersCount          *int64          `json:"membersCount"`
	MaxAllowedMemberships *int64          `json:"maxAllowedMemberships"`
	CreatedBy             *string         `json:"createdBy"`
	SourceCreatedAt       *time.Time      `json:"sourceCreatedAt"`
	CreatedAt             time.Time       `json:"createdAt"`
	UpdatedAt             time.Time       `json:"updatedAt"`
	DeletedAt             *time.Time      `json:"deletedAt"`
}

// Membership is a user's membership of an organization. In a change feed
// a deleted membership carries only its ids, CreatedAt, UpdatedAt and
// DeletedAt.
type Membership struct {
	MembershipID   string          `json:"membershipId"`
	OrganizationID string          `json:"organizationId"`
	UserID         string          `json:"userId"`
	Role           *string         `json:"role"`
	RoleName       *string         `json:"roleName"`
	Permissions    []string        `json:"permissions"`
	Metadata       json.RawMessage `json:"metadata"`
	Member         Member          `json:"member"`
	// Organization is set in a user's memberships (UserMemberships).
	Organization    *OrganizationSummary `json:"organization,omitempty"`
	SourceCreatedAt *time.Time           `json:"sourceCreatedAt"`
	CreatedAt       time.Time            `json:"createdAt"`
	UpdatedAt       time.Time            `json:"updatedAt"`
	DeletedAt       *time.Time           `json:"deletedAt"`
}

// Member is a membership's user: from the user's record when usersync has
// it (Source "user"), else from the membership's event ("membership").
type Member struct {
	FirstName     *string `json:"firstName"`
	LastName      *string `json:"lastName"`
	ImageURL      *string `json:"imageUrl"`
	Identifier    *string `json:"identifier"`
	Username      *string `json:"username"`
	Banned        bool    `json:"banned"`
	Deprovisioned bool    `json:"deprovisioned"`
	Source        string  `json:"source"`
}

// OrganizationSummary is the organization of one of a user's memberships.
type OrganizationSummary struct {
	OrganizationID string  `json:"organizationId"`
	Name           *string `json:"name"`
	Slug           *string `json:"slug"`
	ImageURL       *string `json:"imageUrl"`
}

// OrganizationQuery filters the list of organizations.
type OrganizationQuery struct {
	// Slug finds the active organization with this slug.
	Slug string
	// IncludeDeleted lists deleted organizations too (an admin key).
	IncludeDeleted bool
	// Limit is the organizations per page, 1 to 200; 0: 200.
	Limit int
}

// MembershipQuery filters the memberships of an organization or a user.
type MembershipQuery struct {
	// IncludeDeleted lists every membership (an admin key); otherwise
	// only the active ones: neither they, their organization nor their
	// user deleted, their user not deprovisioned.
	IncludeDeleted bool
	// Limit is the memberships per page, 1 to 200; 0: 200.
	Limit int
}

// Organization returns an active organization; IsNotFound(err) when
// usersync has none by that id, or it is deleted.
func (c *Client) Organization(ctx context.Context, orgID string) (Organization, error) {
	return get[Organization](ctx, c, "/v1/organizations/"+url.PathEscape(orgID), nil)
}

// OrganizationIncludingDeleted returns an organization, deleted or not
// (an admin key).
func (c *Client) OrganizationIncludingDeleted(ctx context.Context, orgID string) (Organization, error) {
	return get[Organization](ctx, c, "/v1/organizations/"+url.PathEscape(orgID), url.Values{"includeDeleted": {"true"}})
}

// SyncOrganization asks usersync to read the organization from Clerk now
// and apply it, and returns it; IsNotFound(err) when Clerk has none.
func (c *Client) SyncOrganization(ctx context.Context, orgID string) (Organization, error) {
	return post[Organization](ctx, c, "/v1/organizations/"+url.PathEscape(orgID)+"/sync")
}

// Organizations is the list of active organizations, and with
// q.IncludeDeleted of every organization.
func (c *Client) Organizations(q OrganizationQuery) *List[Organization] {
	v := url.Values{}
	if q.Slug != "" {
		v.Set("slug", q.Slug)
	}
	if q.IncludeDeleted {
		v.Set("includeDeleted", "true")
	}
	return newList[Organization](c, "/v1/organizations", v, q.Limit)
}

// OrganizationMemberships is the list of an organization's memberships.
func (c *Client) OrganizationMemberships(orgID string, q MembershipQuery) *List[Membership] {
	return newList[Membership](c, "/v1/organizations/"+url.PathEscape(orgID)+"/memberships", q.values(), q.Limit)
}

// UserMemberships is the list of a user's memberships, each with its
// Organization.
func (c *Client) UserMemberships(userID string, q MembershipQuery) *List[Membership] {
	return newList[Membership](c, "/v1/users/"+url.PathEscape(userID)+"/memberships", q.values(), q.Limit)
}

func (q MembershipQuery) values() url.Values {
	v := url.Values{}
	if q.IncludeDeleted {
		v.Set("includeDeleted", "true")
	}
	return v
}

// OrganizationChanges is the organizations' change feed.
func (c *Client) OrganizationChanges(o FeedOptions) *Feed[Organization] {
	return newFeed[Organization](c, "/v1/organizations", o)
}

// MembershipChanges is the change feed of every membership: a deletion
// of an organization or a user moves the memberships it deletes.
func (c *Client) MembershipChanges(o FeedOptions) *Feed[Membership] {
	return newFeed[Membership](c, "/v1/memberships", o)
}

// Invitation is an organization invitation as usersync serves it: never
// its url (which holds its token) nor its private_metadata. Status is
// what it reads as when served: a pending invitation past its ExpiresAt
// is "expired". One deleted with its organization (an admin key) has
// DeletedAt; one whose personal data was erased has ErasedAt, and no
// EmailAddress.
type Invitation struct {
	InvitationID    string          `json:"invitationId"`
	OrganizationID  string          `json:"organizationId"`
	EmailAddress    *string         `json:"emailAddress"`
	Role            *string         `json:"role"`
	RoleName        *string         `json:"roleName"`
	Status          string          `json:"status"` // pending, accepted, revoked, expired
	Metadata        json.RawMessage `json:"metadata"`
	UserID          *string         `json:"userId"` // the user who accepted it
	ExpiresAt       *time.Time      `json:"expiresAt"`
	SourceCreatedAt *time.Time      `json:"sourceCreatedAt"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	DeletedAt       *time.Time      `json:"deletedAt"`
	ErasedAt        *time.Time      `json:"erasedAt"`
}

// InvitationQuery filters an organization's invitations.
type InvitationQuery struct {
	// Status lists only the invitations that read as this status now:
	// "pending", "accepted", "revoked" or "expired"; "": every one.
	Status string
	// IncludeDeleted lists the invitations deleted with their
	// organization too (an admin key).
	IncludeDeleted bool
	// Limit is the invitations per page, 1 to 200; 0: 200.
	Limit int
}

// OrganizationInvitations is the list of an organization's invitations,
// in invitation id order.
func (c *Client) OrganizationInvitations(orgID string, q InvitationQuery) *List[Invitation] {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.IncludeDeleted {
		v.Set("includeDeleted", "true")
	}
	return newList[Invitation](c, "/v1/organizations/"+url.PathEscape(orgID)+"/invitations", v, q.Limit)
}

// OrganizationInvitation returns one invitation of an organization;
// IsNotFound(err) when usersync has none by that id in that
// organization, or it was deleted with its organization.
func (c *Client) OrganizationInvitation(ctx context.Context, orgID, invitationID string) (Invitation, error) {
	return get[Invitation](ctx, c, "/v1/organizations/"+url.PathEscape(orgID)+"/invitations/"+url.PathEscape(invitationID), nil)
}
