package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Clerk's organization and membership event types. Other organization
// events (invitations, domains, roles, permissions) are not stored.
const (
	TypeOrganizationCreated = "organization.created"
	TypeOrganizationUpdated = "organization.updated"
	TypeOrganizationDeleted = "organization.deleted"
	TypeMembershipCreated   = "organizationMembership.created"
	TypeMembershipUpdated   = "organizationMembership.updated"
	TypeMembershipDeleted   = "organizationMembership.deleted"
)

// Bounds of an organization's and a membership's strings, in characters,
// beyond those of a user's (MaxName, MaxImageURL).
const (
	MaxSlug        = 256
	MaxRole        = 256
	MaxIdentifier  = 512
	MaxPermissions = 1000
)

// ClerkOrganization is the part of Clerk's organization object that
// usersync keeps. Fields it does not know (role_set_key, has_image,
// pending_invitations_count…) are accepted and left out; private_metadata
// stays in the event alone.
type ClerkOrganization struct {
	ID                    string          `json:"id" validate:"required,clerkid=org_"`
	UpdatedAt             int64           `json:"updated_at" validate:"required,gt=0"`
	CreatedAt             *int64          `json:"created_at"`
	Name                  *string         `json:"name"`
	Slug                  *string         `json:"slug"`
	ImageURL              *string         `json:"image_url"`
	MembersCount          *int64          `json:"members_count"`
	MaxAllowedMemberships *int64          `json:"max_allowed_memberships"`
	PublicMetadata        json.RawMessage `json:"public_metadata"`
	CreatedBy             *string         `json:"created_by"`
}

// ClerkMembership is the part of Clerk's organization membership object
// that usersync keeps. It has no top-level organization or user id: they
// are organization.id and public_user_data.user_id.
type ClerkMembership struct {
	ID             string              `json:"id" validate:"required,clerkid=orgmem_"`
	UpdatedAt      int64               `json:"updated_at" validate:"required,gt=0"`
	CreatedAt      *int64              `json:"created_at"`
	Role           string              `json:"role" validate:"max=256"`
	RoleName       *string             `json:"role_name"`
	Permissions    []string            `json:"permissions" validate:"max=1000,dive,max=256"`
	PublicMetadata json.RawMessage     `json:"public_metadata"`
	Organization   ClerkOrganization   `json:"organization"`
	PublicUserData ClerkPublicUserData `json:"public_user_data"`
}

// ClerkPublicUserData is a membership's public_user_data: the member as
// Clerk showed it when the membership changed. banned, deprovisioned and
// username are in newer payloads only.
type ClerkPublicUserData struct {
	UserID        string  `json:"user_id" validate:"required,clerkid=user_"`
	FirstName     *string `json:"first_name"`
	LastName      *string `json:"last_name"`
	ImageURL      *string `json:"image_url"`
	Identifier    *string `json:"identifier"`
	Username      *string `json:"username"`
	Banned        bool    `json:"banned"`
	Deprovisioned bool    `json:"deprovisioned"`
}

// clerkOrganizationDeleted is the data of an organization.deleted event:
// a deleted-object stub with no updated_at.
type clerkOrganizationDeleted struct {
	ID string `json:"id" validate:"required,clerkid=org_"`
}

// clerkMembershipDeleted is what a membership deletion must carry: its id.
// Clerk sends the whole membership (with its last updated_at, not the
// deletion's time); the organization and user ids are taken when present.
type clerkMembershipDeleted struct {
	ID           string `json:"id" validate:"required,clerkid=orgmem_"`
	Organization struct {
		ID string `json:"id" validate:"omitempty,clerkid=org_"`
	} `json:"organization"`
	PublicUserData struct {
		UserID string `json:"user_id" validate:"omitempty,clerkid=user_"`
	} `json:"public_user_data"`
}

// Kind returns the kind of object the event changes, "" for an event
// usersync does not store.
func (e ClerkEvent) Kind() Kind { return StoredKindOf(e.Type) }

// ObjectID returns the organization or membership an event changes
// (data.id) when it is a string of at most 128 bytes, even if the rest of
// the payload is invalid, so that a failed event can still be found; ""
// for other events.
func (e ClerkEvent) ObjectID() string {
	if t, ok := byType[e.Type]; ok {
		return t.spec.objectID(e)
	}
	if IsUnknownBillingType(e.Type) {
		return e.dataID()
	}
	return ""
}

// UserID returns the user a user event changes (data.id) or the member of
// a membership event (data.public_user_data.user_id), when it is a string
// of at most 128 bytes, even if the rest of the payload is invalid, so that
// a failed event can still be found by user; "" for other events.
func (e ClerkEvent) UserID() string {
	if t, ok := byType[e.Type]; ok {
		return t.spec.userID(e)
	}
	if IsUnknownBillingType(e.Type) {
		return e.payerUserID()
	}
	return ""
}

// ID returns the id of the object an event of a kind usersync keeps
// changes (data.id), read as ObjectID is; "" for other events.
func (e ClerkEvent) ID() string {
	if e.Kind() == "" {
		return ""
	}
	return e.dataID()
}

// dataID reads data.id as ObjectID and UserID do.
func (e ClerkEvent) dataID() string {
	var d struct {
		ID string `json:"id"`
	}
	return readID(e.Data, &d, func() string { return d.ID })
}

// memberID reads data.public_user_data.user_id as UserID does.
func (e ClerkEvent) memberID() string {
	var d struct {
		PublicUserData struct {
			UserID string `json:"user_id"`
		} `json:"public_user_data"`
	}
	return readID(e.Data, &d, func() string { return d.PublicUserData.UserID })
}

// readID decodes data into v as far as it goes and returns id() if it is
// usable as an id.
func readID(data json.RawMessage, v any, id func() string) string {
	if !isObject(data) {
		return ""
	}
	// Decoded as the change is; on a type error, whatever was read.
	_ = json.Unmarshal(data, v)
	s := id()
	if len(s) > maxUserID || !utf8.ValidString(s) {
		return "" // not an id: it would only bloat the event and the logs
	}
	return s
}

// checkLimits returns what DecodeEvent (or, for an event built otherwise,
// a walk of data) refuses below the envelope.
func (e ClerkEvent) checkLimits() error {
	if e.checked {
		return e.limit
	}
	return checkJSON(e.Data, "data", 1)
}

// OrganizationChange validates the data of an organization event and
// returns the state it carries: the organization at data.updated_at, or
// its deletion at the envelope's timestamp (organization.deleted has no
// updated_at). now is the server's clock (see Change). Its error wraps
// ErrInvalid.
func (e ClerkEvent) OrganizationChange(eventID string, now time.Time) (OrganizationChange, error) {
	if err := e.checkLimits(); err != nil {
		return OrganizationChange{}, err
	}
	switch e.Type {
	case TypeOrganizationCreated, TypeOrganizationUpdated:
		var o ClerkOrganization
		if err := decodeData(e.Data, &o); err != nil {
			return OrganizationChange{}, err
		}
		return o.change(eventID, "data.", now)
	case TypeOrganizationDeleted:
		var d clerkOrganizationDeleted
		if err := decodeData(e.Data, &d); err != nil {
			return OrganizationChange{}, err
		}
		ts, err := e.deletionTime(now)
		if err != nil {
			return OrganizationChange{}, err
		}
		return OrganizationChange{OrgID: d.ID, EventID: eventID, SourceTime: ts, Deleted: true}, nil
	}
	return OrganizationChange{}, Public(ErrInvalid, "%s is not an organization event", Quote(e.Type)).In("type")
}

// MembershipChange validates the data of a membership event and returns
// the state it carries, with the state of the organization it nests:
// the membership at data.updated_at, or its deletion at the envelope's
// timestamp (a deletion's updated_at is the membership's last update, not
// the deletion's). now is the server's clock (see Change). Its error wraps
// ErrInvalid.
func (e ClerkEvent) MembershipChange(eventID string, now time.Time) (MembershipChange, error) {
	if err := e.checkLimits(); err != nil {
		return MembershipChange{}, err
	}
	switch e.Type {
	case TypeMembershipCreated, TypeMembershipUpdated:
		var m ClerkMembership
		if err := decodeData(e.Data, &m); err != nil {
			return MembershipChange{}, err
		}
		return m.change(eventID, now)
	case TypeMembershipDeleted:
		var d clerkMembershipDeleted
		if err := decodeData(e.Data, &d); err != nil {
			return MembershipChange{}, err
		}
		ts, err := e.deletionTime(now)
		if err != nil {
			return MembershipChange{}, err
		}
		ch := MembershipChange{
			MembershipID: d.ID, EventID: eventID, SourceTime: ts, Deleted: true,
			OrgID: d.Organization.ID, UserID: d.PublicUserData.UserID,
		}
		// The organization it nests is a state of the organization too,
		// when it is a whole one.
		var nested struct {
			Organization *ClerkOrganization `json:"organization"`
		}
		if json.Unmarshal(e.Data, &nested) == nil && nested.Organization != nil && validate.Struct(nested.Organization) == nil {
			if org, err := nested.Organization.change(eventID, "data.organization.", now); err == nil {
				ch.Organization = &org
			}
		}
		return ch, nil
	}
	return MembershipChange{}, Public(ErrInvalid, "%s is not a membership event", Quote(e.Type)).In("type")
}

// deletionTime is the envelope's timestamp, the time of a deletion.
func (e ClerkEvent) deletionTime(now time.Time) (time.Time, error) {
	ts, err := clerkTime(e.Timestamp)
	if err != nil {
		return time.Time{}, Public(ErrInvalid, "timestamp %v", err).In("timestamp")
	}
	return ts, checkNotFuture("timestamp", ts, now)
}

func (o ClerkOrganization) change(eventID, prefix string, now time.Time) (OrganizationChange, error) {
	meta, err := publicMetadata(o.PublicMetadata, prefix)
	if err != nil {
		return OrganizationChange{}, err
	}
	ts, err := clerkTime(json.RawMessage(fmt.Sprint(o.UpdatedAt)))
	if err != nil {
		return OrganizationChange{}, Public(ErrInvalid, "%supdated_at %v", prefix, err).In(prefix + "updated_at")
	}
	if err := checkNotFuture(prefix+"updated_at", ts, now); err != nil {
		return OrganizationChange{}, err
	}
	p := OrganizationProfile{
		Name:            truncate(strings.TrimSpace(deref(o.Name)), MaxName),
		Slug:            ident(o.Slug, MaxSlug),
		ImageURL:        ident(o.ImageURL, MaxImageURL),
		MembersCount:    nonNegative(o.MembersCount),
		CreatedBy:       ident(o.CreatedBy, maxUserID),
		SourceCreatedAt: optClerkTime(o.CreatedAt),
	}
	p.MaxAllowedMemberships = nonNegative(o.MaxAllowedMemberships)
	return OrganizationChange{OrgID: o.ID, EventID: eventID, SourceTime: ts, Metadata: meta, OrganizationProfile: p}, nil
}

func (m ClerkMembership) change(eventID string, now time.Time) (MembershipChange, error) {
	meta, err := publicMetadata(m.PublicMetadata, "data.")
	if err != nil {
		return MembershipChange{}, err
	}
	ts, err := clerkTime(json.RawMessage(fmt.Sprint(m.UpdatedAt)))
	if err != nil {
		return MembershipChange{}, Public(ErrInvalid, "data.updated_at %v", err).In("data.updated_at")
	}
	if err := checkNotFuture("data.updated_at", ts, now); err != nil {
		return MembershipChange{}, err
	}
	org, err := m.Organization.change(eventID, "data.organization.", now)
	if err != nil {
		return MembershipChange{}, err
	}
	perms := []string{}
	for _, p := range m.Permissions {
		if p = strings.TrimSpace(p); p != "" {
			perms = append(perms, strings.ToValidUTF8(p, "\uFFFD"))
		}
	}
	u := m.PublicUserData
	return MembershipChange{
		MembershipID: m.ID, EventID: eventID, SourceTime: ts,
		OrgID: m.Organization.ID, UserID: u.UserID,
		Role: ident(&m.Role, MaxRole), RoleName: truncate(strings.TrimSpace(deref(m.RoleName)), MaxRole),
		Permissions: perms, Metadata: meta,
		Member: Member{
			FirstName:     truncate(strings.TrimSpace(deref(u.FirstName)), MaxName),
			LastName:      truncate(strings.TrimSpace(deref(u.LastName)), MaxName),
			ImageURL:      ident(u.ImageURL, MaxImageURL),
			Identifier:    ident(u.Identifier, MaxIdentifier),
			Username:      ident(u.Username, MaxName),
			Banned:        u.Banned,
			Deprovisioned: u.Deprovisioned,
		},
		SourceCreatedAt: optClerkTime(m.CreatedAt),
		Organization:    &org,
	}, nil
}

// publicMetadata checks and normalises a public_metadata value (absent or
// null: {}); prefix names the object it belongs to in errors.
func publicMetadata(raw json.RawMessage, prefix string) (json.RawMessage, error) {
	meta := bytes.TrimSpace(raw)
	switch {
	case len(meta) == 0 || string(meta) == "null":
		meta = []byte("{}")
	case !isObject(meta):
		return nil, Public(ErrInvalid, "%spublic_metadata must be an object", prefix).In(prefix + "public_metadata")
	}
	if err := checkMetadata(meta, prefix+"public_metadata"); err != nil {
		return nil, err
	}
	meta, err := NormalizeJSON(meta)
	if err != nil {
		return nil, Public(ErrInvalid, "%spublic_metadata is not valid JSON", prefix).In(prefix + "public_metadata").Because(err)
	}
	return json.RawMessage(meta), nil
}

// ident returns *s trimmed, or "" when it is longer than limit characters:
// a cut identifier or URL would name something else.
func ident(s *string, limit int) string {
	v := strings.TrimSpace(deref(s))
	if utf8.RuneCountInString(v) > limit {
		return ""
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}

// optClerkTime reads an optional Clerk time; a value that is not one is
// left out (it orders nothing).
func optClerkTime(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t, err := clerkTime(json.RawMessage(fmt.Sprint(*n)))
	if err != nil {
		return nil
	}
	return &t
}

func nonNegative(n *int64) *int64 {
	if n == nil || *n < 0 {
		return nil
	}
	v := *n
	return &v
}
