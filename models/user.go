package models

import (
	"encoding/json"
	"time"
)

// User is usersync's copy of one Clerk user.
//
// A deleted user is a tombstone: it keeps UserID, CreatedAt and DeletedAt,
// loses its email, name and metadata, and never becomes active again.
type User struct {
	UserID          string
	Email           string // primary email, lowercased; "" when the user has none
	DisplayName     string
	Metadata        json.RawMessage // Clerk public_metadata, a JSON object
	CreatedAt       time.Time
	UpdatedAt       time.Time
	DeletedAt       *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
}

// Deleted reports whether the user has been deleted in Clerk.
func (u User) Deleted() bool { return u.DeletedAt != nil }

// Change is one Clerk state of one user, ready to be applied: either the
// user's full profile at SourceTime, or its deletion.
type Change struct {
	UserID      string
	EventID     string
	SourceTime  time.Time // Clerk's time of this state; decides the order
	Deleted     bool
	New         bool // from user.created: the user is probably unknown yet
	Email       string
	DisplayName string
	Metadata    json.RawMessage
}

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
	Email          string // exact, compared lowercased; "" for any
	IncludeDeleted bool
	After          string // cursor: list users after this one
	Limit          int
}

// UserPage is one page of a user list.
type UserPage struct {
	Users      []User
	NextCursor string // "" on the last page
}
