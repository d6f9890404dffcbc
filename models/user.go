package models

import (
	"encoding/json"
	"strings"
	"time"
)

// User is usersync's copy of one Clerk user.
//
// A deleted user is a tombstone: it keeps UserID, CreatedAt and DeletedAt,
// loses its email, name and metadata, and never becomes active again.
type User struct {
	UserID          string
	Email           string // primary email, as NormalizeEmail makes it; "" when the user has none
	DisplayName     string
	Metadata        json.RawMessage // Clerk public_metadata, a JSON object
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DeletedAt       *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
	// LastActiveAt is the newest activity of the user's sessions that a
	// session event told of; nil when none did, and on a tombstone. It is
	// not a change of the user: it moves neither UpdatedAt nor the change
	// feed, and is sent by no outbound webhook.
	LastActiveAt *time.Time
	Profile      // empty on a tombstone
}

// NormalizeEmail is an email as usersync stores, compares and looks it
// up: without the ASCII white space around it, its ASCII letters
// lowercased, every other character left as it is. Unicode case folding
// would make look-alikes of other addresses (the Kelvin sign K, U+212A,
// folds to k; İ, U+0130, to i), so that one user could take another's
// email by writing it with such a letter; two addresses that differ in a
// non-ASCII letter stay two. The rule is the same everywhere: storage, the
// email's uniqueness among active users, and the users' email filter.
func NormalizeEmail(s string) string {
	s = strings.Trim(s, asciiSpace)
	b := []byte(s)
	changed := false
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
			changed = true
		}
	}
	if !changed {
		return s
	}
	return string(b)
}

// asciiSpace is the white space NormalizeEmail trims.
const asciiSpace = " \t\n\v\f\r"

// Deleted reports whether the user has been deleted in Clerk.
func (u User) Deleted() bool { return u.DeletedAt != nil }

// UserChange is one Clerk state of one user, ready to be applied: either the
// user's full profile at SourceTime, or its deletion.
type UserChange struct {
	UserID      string
	EventID     string
	SourceTime  time.Time // Clerk's time of this state; decides the order
	Deleted     bool
	New         bool // from user.created: the user is probably unknown yet
	Email       string
	DisplayName string
	Metadata    json.RawMessage
	Profile     // empty for a deletion
}

// Profile is what Clerk says of a user beyond email and name for display:
// what applications render and link by. A string is "" when Clerk has none.
type Profile struct {
	FirstName    string
	LastName     string
	Username     string
	ImageURL     string
	PhoneNumber  string     // the primary phone (primary_phone_number_id)
	ExternalID   string     // Clerk's external_id: the application's own id
	LastSignInAt *time.Time // nil when the user never signed in
	// Banned and Locked keep the user active, flagged. Deprovisioned (a
	// user off-boarded by Directory Sync, which sends no user.deleted)
	// takes the user out of the active users, and its memberships out of
	// the active memberships; it is not a deletion: a later state may
	// clear it.
	Banned        bool
	Locked        bool
	Deprovisioned bool
	// SourceCreatedAt is Clerk's created_at of the user: when it signed
	// up (User.CreatedAt is usersync's first write of it). nil when the
	// state carried none, and on a tombstone.
	SourceCreatedAt *time.Time
}

// Bounds of the profile's strings, in characters (runes). Clerk allows
// names of up to 256 characters; the others are generous caps so that a
// malformed value cannot grow a user document without bound.
const (
	MaxName        = 256
	MaxExternalID  = 256
	MaxPhoneNumber = 64
	MaxImageURL    = 2048
)

// Newer reports whether a state at (t, eventID) is ordered after the state
// at (than, thanEventID). Clerk's time decides; the event id breaks ties so
// that every order of delivery converges on the same state.
func Newer(t time.Time, eventID string, than time.Time, thanEventID string) bool {
	if !t.Equal(than) {
		return t.After(than)
	}
	return eventID > thanEventID
}

// UserFilter selects users for a list.
type UserFilter struct {
	Email string // exact, compared as NormalizeEmail makes it; "" for any
	// IncludeDeleted lists deleted and deprovisioned users too.
	IncludeDeleted bool
	After          string // cursor: list users after this one
	Limit          int
}

// UserWriteTimeout bounds a user write (the sync service's call of
// repository.Users.Apply), which starts right after taking the time it
// writes as updatedAt: past it the write is abandoned, and the event fails
// and is retried later with a new time.
const UserWriteTimeout = 10 * time.Second

// ChangeSettle is how old a change must be before the change feed serves
// it. A write takes its updatedAt before it commits, so a change may become
// visible with an updatedAt older than one the feed has already passed;
// waiting ChangeSettle, well over UserWriteTimeout, leaves room for the
// slowest write that can still commit (and for clocks of several instances
// that differ by a few seconds), so no change is skipped.
const ChangeSettle = 30 * time.Second

// ChangeFilter selects a page of the change feed: users whose document
// changed at or after Since and at or before Until, oldest change first.
type ChangeFilter struct {
	Since time.Time
	// Until is the newest updatedAt served: changes newer than that may
	// still be followed by writes that commit with an older time.
	Until time.Time
	After string // cursor: list changes after this one
	Limit int
}

// UserPage is one page of a user list.
type UserPage struct {
	Users      []User
	NextCursor string // "" on the last page
}

// Erasure is what erasing a deleted user's personal data did.
type Erasure struct {
	Users int // tombstones whose events are all erased now
	// Memberships: membership tombstones whose events are all erased now.
	Memberships int
	// Invitations: ended invitations (accepted, revoked, expired, deleted
	// with their organization) whose email and events are all erased now.
	Invitations int
	Events      int // events whose body and payload were removed
	// Pending counts events that could not be erased yet: stored, or failed
	// and still to be retried. They are erased once processed or given up.
	Pending int
}
