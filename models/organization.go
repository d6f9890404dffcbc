package models

import (
	"encoding/json"
	"time"
)

// Organization is usersync's copy of one Clerk organization.
//
// A deleted organization is a tombstone: it keeps OrgID, CreatedAt and
// DeletedAt, loses everything else, and never becomes active again; its
// memberships are deleted with it.
type Organization struct {
	OrgID string
	OrganizationProfile
	Metadata        json.RawMessage // Clerk public_metadata, a JSON object
	CreatedAt       time.Time       // usersync's: first written
	UpdatedAt       time.Time       // usersync's: last changed
	DeletedAt       *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
}

// Deleted reports whether the organization has been deleted in Clerk.
func (o Organization) Deleted() bool { return o.DeletedAt != nil }

// Version returns the version of o's stored state.
func (o Organization) Version() Version {
	return Version{SourceTime: o.SourceUpdatedAt, EventID: o.LastEventID, Deleted: o.Deleted()}
}

// OrganizationProfile is what Clerk says of an organization. A string is
// "" and a number nil when Clerk has none; all are empty on a tombstone.
type OrganizationProfile struct {
	Name                  string
	Slug                  string
	ImageURL              string
	MembersCount          *int64 // Clerk's members_count at SourceUpdatedAt
	MaxAllowedMemberships *int64 // 0: no limit
	CreatedBy             string // the user id of its creator
	SourceCreatedAt       *time.Time
}

// OrganizationChange is one Clerk state of one organization, ready to be
// applied: its full profile at SourceTime, or its deletion.
type OrganizationChange struct {
	OrgID      string
	EventID    string
	SourceTime time.Time // Clerk's updated_at, or the deletion's time
	Deleted    bool
	Metadata   json.RawMessage
	OrganizationProfile
}

// Version returns the version of the state ch carries.
func (ch OrganizationChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID, Deleted: ch.Deleted}
}

// Kind returns KindOrganization.
func (OrganizationChange) Kind() Kind { return KindOrganization }

// IDs returns the organization's id.
func (ch OrganizationChange) IDs() (userID, objectID string) { return "", ch.OrgID }

// Membership is usersync's copy of one Clerk organization membership: a
// user's role in an organization.
//
// A deleted membership is a tombstone: it keeps its ids, CreatedAt and
// DeletedAt and never becomes active again. A user who leaves and joins
// again gets a new membership (a new MembershipID). A membership is
// deleted with its organization and with its user, whatever order their
// events arrive in, and at most one membership of an (organization, user)
// is active.
type Membership struct {
	MembershipID string
	OrgID        string // "" only on a tombstone whose deletion did not name it
	UserID       string // "" only on a tombstone whose deletion did not name it
	Role         string // e.g. org:admin
	RoleName     string
	Permissions  []string
	Metadata     json.RawMessage // Clerk public_metadata, a JSON object
	// Member is what the membership shows of its user: from the user's
	// current record when usersync has the user (MemberFromUser), else the
	// membership's public_user_data. Reads join it; it is never copied
	// from the user.
	Member         Member
	MemberFromUser bool
	// Organization is what a list of a user's memberships shows of each
	// organization (nil when usersync does not know it yet, and in other
	// reads).
	Organization    *OrganizationSummary
	SourceCreatedAt *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DeletedAt       *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
}

// Deleted reports whether the membership has been deleted.
func (m Membership) Deleted() bool { return m.DeletedAt != nil }

// Version returns the version of m's stored state.
func (m Membership) Version() Version {
	return Version{SourceTime: m.SourceUpdatedAt, EventID: m.LastEventID, Deleted: m.Deleted()}
}

// Member is a membership's user as a membership shows it (Clerk's
// public_user_data). A string is "" when there is none.
type Member struct {
	FirstName  string
	LastName   string
	ImageURL   string
	Identifier string // the email, phone or username the user signs in with
	Username   string
	// Banned and Deprovisioned flag the user; a deprovisioned user's
	// memberships do not count as active (see ActiveMember).
	Banned        bool
	Deprovisioned bool
}

// MemberOf is what a membership shows of its user u, from u's current
// record: names, image, username and flags; the identifier is the primary
// email, else the primary phone, else the username.
func MemberOf(u User) Member {
	id := u.Email
	for _, alt := range []string{u.PhoneNumber, u.Username} {
		if id == "" {
			id = alt
		}
	}
	return Member{
		FirstName: u.FirstName, LastName: u.LastName, ImageURL: u.ImageURL, Identifier: id,
		Username: u.Username, Banned: u.Banned, Deprovisioned: u.Deprovisioned,
	}
}

// ActiveMember reports whether a membership counts as active: neither it
// nor its user is deleted, and its user is not deprovisioned (off-boarded
// by Directory Sync). A banned or locked user's memberships stay active,
// flagged. orgDeleted and userDeleted say whether the stores know the
// organization or user as deleted.
func ActiveMember(m Membership, orgDeleted, userDeleted bool) bool {
	return !m.Deleted() && !orgDeleted && !userDeleted && !m.Member.Deprovisioned
}

// OrganizationSummary is what a membership shows of its organization.
type OrganizationSummary struct {
	OrgID    string
	Name     string
	Slug     string
	ImageURL string
}

// MembershipChange is one Clerk state of one membership, ready to be
// applied: its full state at SourceTime, or its deletion.
type MembershipChange struct {
	MembershipID string
	EventID      string
	SourceTime   time.Time // Clerk's updated_at, or the deletion's time
	Deleted      bool
	OrgID        string // data.organization.id ("" only in a deletion that does not name it)
	UserID       string // data.public_user_data.user_id (likewise)
	Role         string
	RoleName     string
	Permissions  []string
	Metadata     json.RawMessage
	Member       Member // from public_user_data
	// SourceCreatedAt is Clerk's created_at of the membership.
	SourceCreatedAt *time.Time
	// Organization is the state of the organization the payload nests
	// (data.organization), applied to the organization under the same
	// ordering rules before the membership; nil when it has none usable.
	Organization *OrganizationChange
}

// Version returns the version of the state ch carries.
func (ch MembershipChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID, Deleted: ch.Deleted}
}

// Kind returns KindMembership.
func (MembershipChange) Kind() Kind { return KindMembership }

// IDs returns the member's id and the membership's.
func (ch MembershipChange) IDs() (userID, objectID string) { return ch.UserID, ch.MembershipID }

// OrganizationFilter selects organizations for a list.
type OrganizationFilter struct {
	Slug           string // exact; "" for any
	IncludeDeleted bool
	After          string // cursor: list organizations after this one
	Limit          int
}

// OrganizationPage is one page of organizations.
type OrganizationPage struct {
	Organizations []Organization
	NextCursor    string // "" on the last page (always set in the change feed)
}

// MembershipFilter selects the memberships of one organization or of one
// user (exactly one of OrgID and UserID is set).
type MembershipFilter struct {
	OrgID  string
	UserID string
	// IncludeDeleted lists tombstones and the memberships of deprovisioned
	// users too.
	IncludeDeleted bool
	After          string // cursor
	Limit          int
}

// MembershipPage is one page of memberships. A page of active memberships
// may hold fewer than the limit while NextCursor is set: keep reading
// until it is "".
type MembershipPage struct {
	Memberships []Membership
	NextCursor  string // "" on the last page (always set in the change feed)
}
