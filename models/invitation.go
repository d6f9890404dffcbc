package models

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// KindInvitation is Clerk's organization invitation: an email invited
// into an organization with a role.
const KindInvitation Kind = "invitation"

// Clerk's organization invitation event types. Clerk never deletes an
// invitation: one ends accepted or revoked, or expires (Clerk sends
// nothing then), and usersync deletes it with its organization.
const (
	TypeInvitationCreated  = "organizationInvitation.created"
	TypeInvitationAccepted = "organizationInvitation.accepted"
	TypeInvitationRevoked  = "organizationInvitation.revoked"
)

// Short types of the invitation events beyond created.
const (
	EventAccepted EventType = "accepted"
	EventRevoked  EventType = "revoked"
)

// Statuses of an invitation. Clerk writes pending, accepted and revoked
// (and, in its API's lists, expired); a pending invitation past its
// ExpiresAt reads as expired (Invitation.StatusAt).
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationRevoked  = "revoked"
	InvitationExpired  = "expired"
)

// InvitationStatuses are the statuses an invitation may read as, the
// values of the list's status filter.
var InvitationStatuses = []string{InvitationPending, InvitationAccepted, InvitationRevoked, InvitationExpired}

// MaxInvitationEmail bounds an invitation's email address, in bytes, as a
// user's email addresses are bounded.
const MaxInvitationEmail = 512

// invitationSpec is the kinds table's row of invitations: an invitation
// belongs to an organization, whose deletion deletes it (Clerk has no
// deletion of its own). Its event's user is the user who accepted it
// (data.user_id), when there is one.
var invitationSpec = KindSpec{
	Kind: KindInvitation, Plural: "invitations", IDPrefix: "orginv_", Object: "organization_invitation",
	Types: []TypeSpec{{TypeInvitationCreated, EventCreated}, {TypeInvitationAccepted, EventAccepted},
		{TypeInvitationRevoked, EventRevoked}},
	Parents:  []Kind{KindOrganization},
	userID:   func(e ClerkEvent) string { return e.invitationUserID() },
	objectID: func(e ClerkEvent) string { return e.dataID() },
	// A state read from Clerk's list is applied as the type of its
	// status; a pending or expired one as created (the type of no status
	// change).
	stateType: func(data json.RawMessage) string {
		var d struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(data, &d)
		switch d.Status {
		case InvitationAccepted:
			return TypeInvitationAccepted
		case InvitationRevoked:
			return TypeInvitationRevoked
		}
		return TypeInvitationCreated
	},
}

// invitationUserID reads data.user_id as UserID does.
func (e ClerkEvent) invitationUserID() string {
	var d struct {
		UserID *string `json:"user_id"`
	}
	return readID(e.Data, &d, func() string { return deref(d.UserID) })
}

// Invitation is usersync's copy of one Clerk organization invitation.
//
// Clerk never deletes one; its organization's deletion makes it a
// tombstone, which keeps its ids and times (DeletedAt set). Accepted,
// revoked, expired and deleted invitations are erased on the schedule of
// deleted users (USERSYNC_ERASE_AFTER after they ended): their email and
// metadata, and their events' bodies (ErasedAt set).
type Invitation struct {
	InvitationID string
	OrgID        string
	EmailAddress string // as NormalizeEmail makes it; "" once erased and on a tombstone
	Role         string
	RoleName     string
	// Status is Clerk's as stored: pending, accepted, revoked (or
	// expired). StatusAt is what it reads as.
	Status          string
	Metadata        json.RawMessage // Clerk public_metadata, a JSON object
	UserID          string          // the user who accepted it; "" when none
	ExpiresAt       *time.Time
	SourceCreatedAt *time.Time
	CreatedAt       time.Time // usersync's: first written
	UpdatedAt       time.Time // usersync's: last changed
	DeletedAt       *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
	ErasedAt        *time.Time
}

// Deleted reports whether the invitation was deleted with its
// organization.
func (i Invitation) Deleted() bool { return i.DeletedAt != nil }

// Version returns the version of i's stored state.
func (i Invitation) Version() Version {
	return Version{SourceTime: i.SourceUpdatedAt, EventID: i.LastEventID, Deleted: i.Deleted()}
}

// StatusAt is the invitation's status at now: a pending invitation whose
// ExpiresAt has come reads as expired (Clerk sends no event then).
func (i Invitation) StatusAt(now time.Time) string {
	return InvitationStatusAt(i.Status, i.ExpiresAt, now)
}

// InvitationStatusAt is the status an invitation of stored status and
// expiry reads as at now.
func InvitationStatusAt(status string, expires *time.Time, now time.Time) string {
	if status == InvitationPending && expires != nil && !now.Before(*expires) {
		return InvitationExpired
	}
	return status
}

// InvitationEraseAfter is when an invitation's personal data becomes
// due for erasure, counted from as deleted users' is: when it ended
// (accepted, revoked: its Clerk time; deleted: its deletion), or for a
// pending one when it expires; nil for a pending one with no expiry.
func InvitationEraseAfter(status string, source time.Time, expires *time.Time, deletedAt *time.Time) *time.Time {
	switch {
	case deletedAt != nil:
		return deletedAt
	case status == InvitationPending:
		return expires
	case status == InvitationExpired && expires != nil && expires.Before(source):
		return expires
	}
	return &source
}

// InvitationChange is one Clerk state of one invitation, ready to be
// applied. Clerk sends the whole invitation with each event.
type InvitationChange struct {
	InvitationID    string
	EventID         string
	SourceTime      time.Time // Clerk's updated_at
	OrgID           string
	EmailAddress    string
	Role            string
	RoleName        string
	Status          string
	Metadata        json.RawMessage
	UserID          string
	ExpiresAt       *time.Time
	SourceCreatedAt *time.Time
}

// Kind returns KindInvitation.
func (InvitationChange) Kind() Kind { return KindInvitation }

// Version returns the version of the state ch carries.
func (ch InvitationChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID}
}

// IDs returns the accepting user's id ("" when none) and the
// invitation's.
func (ch InvitationChange) IDs() (userID, objectID string) { return ch.UserID, ch.InvitationID }

// ClerkInvitation is the part of Clerk's organization invitation object
// that usersync keeps. Its url (which holds the invitation's token) and
// private_metadata stay in the event alone.
type ClerkInvitation struct {
	ID             string          `json:"id" validate:"required,clerkid=orginv_"`
	UpdatedAt      int64           `json:"updated_at" validate:"required,gt=0"`
	CreatedAt      *int64          `json:"created_at"`
	OrganizationID string          `json:"organization_id" validate:"required,clerkid=org_"`
	EmailAddress   string          `json:"email_address" validate:"max=512"`
	Role           string          `json:"role" validate:"max=256"`
	RoleName       *string         `json:"role_name"`
	Status         string          `json:"status" validate:"oneof=pending accepted revoked expired"`
	PublicMetadata json.RawMessage `json:"public_metadata"`
	UserID         *string         `json:"user_id" validate:"omitempty,clerkid=user_"`
	ExpiresAt      *int64          `json:"expires_at"`
}

// InvitationChange validates the data of an organizationInvitation.*
// event and returns the state it carries. now is the server's clock (see
// Change). Its error wraps ErrInvalid.
func (e ClerkEvent) InvitationChange(eventID string, now time.Time) (InvitationChange, error) {
	if KindOf(e.Type) != KindInvitation {
		return InvitationChange{}, Public(ErrInvalid, "%s is not an invitation event", Quote(e.Type)).In("type")
	}
	if err := e.checkLimits(); err != nil {
		return InvitationChange{}, err
	}
	var inv ClerkInvitation
	if err := decodeData(e.Data, &inv); err != nil {
		return InvitationChange{}, err
	}
	return inv.Change(eventID, now)
}

// Change returns the state inv is, as an event eventID carries it (a
// backfill's or reconcile's read of Clerk's API too). now is the server's
// clock. Its error wraps ErrInvalid.
func (inv ClerkInvitation) Change(eventID string, now time.Time) (InvitationChange, error) {
	if err := validateAs("data.", inv); err != nil {
		return InvitationChange{}, err
	}
	meta, err := publicMetadata(inv.PublicMetadata, "data.")
	if err != nil {
		return InvitationChange{}, err
	}
	ts, err := clerkTime(json.RawMessage(fmt.Sprint(inv.UpdatedAt)))
	if err != nil {
		return InvitationChange{}, Public(ErrInvalid, "data.updated_at %v", err).In("data.updated_at")
	}
	if err := checkNotFuture("data.updated_at", ts, now); err != nil {
		return InvitationChange{}, err
	}
	return InvitationChange{
		InvitationID: inv.ID, EventID: eventID, SourceTime: ts, OrgID: inv.OrganizationID,
		EmailAddress: strings.ToValidUTF8(NormalizeEmail(inv.EmailAddress), "\uFFFD"),
		Role:         ident(&inv.Role, MaxRole), RoleName: truncate(strings.TrimSpace(deref(inv.RoleName)), MaxRole),
		Status: inv.Status, Metadata: meta, UserID: deref(inv.UserID),
		ExpiresAt: optClerkTime(inv.ExpiresAt), SourceCreatedAt: optClerkTime(inv.CreatedAt),
	}, nil
}

// InvitationFilter selects the invitations of one organization.
type InvitationFilter struct {
	OrgID string
	// Status is one of InvitationStatuses, as invitations read at Now;
	// "" for any.
	Status string
	// IncludeDeleted lists the invitations deleted with their
	// organization too.
	IncludeDeleted bool
	Now            time.Time
	After          string // cursor
	Limit          int
}

// InvitationPage is one page of invitations. A page may hold fewer than
// the limit while NextCursor is set: keep reading until it is "".
type InvitationPage struct {
	Invitations []Invitation
	NextCursor  string
}

// KeepInvitation reports whether a list that f selects shows i: the one
// place the status filter and tombstones are decided, whatever store.
func (f InvitationFilter) KeepInvitation(i Invitation) bool {
	if i.Deleted() && !f.IncludeDeleted {
		return false
	}
	return f.Status == "" || i.StatusAt(f.Now) == f.Status
}
