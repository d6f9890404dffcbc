package client

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// User is a user as usersync serves it. In a change feed a deleted user
// carries only UserID, CreatedAt, UpdatedAt and DeletedAt.
type User struct {
	UserID      string `json:"userId"`
	Email       string `json:"email,omitempty"` // "" when the user has none
	DisplayName string `json:"displayName"`
	// Metadata is Clerk's public_metadata, as Clerk sent it.
	Metadata     json.RawMessage `json:"metadata"`
	FirstName    *string         `json:"firstName"`
	LastName     *string         `json:"lastName"`
	Username     *string         `json:"username"`
	ImageURL     *string         `json:"imageUrl"`
	PhoneNumber  *string         `json:"phoneNumber"`
	ExternalID   *string         `json:"externalId"`
	LastSignInAt *time.Time      `json:"lastSignInAt"`
	// LastActiveAt is the newest activity of the user's sessions that
	// Clerk's session events told of; nil when none did, and on a deleted
	// user. It moves neither UpdatedAt nor the change feed.
	LastActiveAt *time.Time `json:"lastActiveAt"`
	Banned       bool       `json:"banned"`
	Locked       bool       `json:"locked"`
	// Deprovisioned users have left the active users, as deleted ones
	// have.
	Deprovisioned bool `json:"deprovisioned"`
	// SourceCreatedAt is Clerk's created_at: when the user signed up.
	SourceCreatedAt *time.Time `json:"sourceCreatedAt"`
	// CreatedAt and UpdatedAt are usersync's first and last write of the
	// user; DeletedAt Clerk's time of its deletion.
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	DeletedAt *time.Time `json:"deletedAt"`
}

// UserQuery filters the list of users.
type UserQuery struct {
	// Email finds the active user with this email.
	Email string
	// IncludeDeleted lists deleted and deprovisioned users too (an admin
	// key).
	IncludeDeleted bool
	// Limit is the users per page, 1 to 200; 0: 200.
	Limit int
}

// User returns an active user; IsNotFound(err) when usersync has none by
// that id, or the user is deleted or deprovisioned.
func (c *Client) User(ctx context.Context, userID string) (User, error) {
	return get[User](ctx, c, "/v1/users/"+url.PathEscape(userID), nil)
}

// UserIncludingDeleted returns a user, deleted or not (an admin key): a
// deleted one as its tombstone.
func (c *Client) UserIncludingDeleted(ctx context.Context, userID string) (User, error) {
	return get[User](ctx, c, "/v1/users/"+url.PathEscape(userID), url.Values{"includeDeleted": {"true"}})
}

// SyncUser asks usersync to read the user from Clerk now and apply it
// (the sign-up race), and returns it; IsNotFound(err) when Clerk has no
// such user. The server needs CLERK_SECRET_KEY (else CodeNotConfigured).
func (c *Client) SyncUser(ctx context.Context, userID string) (User, error) {
	return post[User](ctx, c, "/v1/users/"+url.PathEscape(userID)+"/sync")
}

// Users is the list of active users, and with q.IncludeDeleted of every
// user.
func (c *Client) Users(q UserQuery) *List[User] {
	v := url.Values{}
	if q.Email != "" {
		v.Set("email", q.Email)
	}
	if q.IncludeDeleted {
		v.Set("includeDeleted", "true")
	}
	return newList[User](c, "/v1/users", v, q.Limit)
}

// UserChanges is the users' change feed: every user whose record changed,
// deleted ones included, oldest change first. A deprovisioned user comes
// whole, Deprovisioned set.
func (c *Client) UserChanges(o FeedOptions) *Feed[User] {
	return newFeed[User](c, "/v1/users", o)
}
