package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// userJSON is a user as the API shows it.
type userJSON struct {
	UserID      string          `json:"userId"`
	Email       string          `json:"email,omitempty"`
	DisplayName string          `json:"displayName"`
	Metadata    json.RawMessage `json:"metadata"`
	// Profile fields: always present, null when Clerk has no value.
	FirstName    *string `json:"firstName"`
	LastName     *string `json:"lastName"`
	Username     *string `json:"username"`
	ImageURL     *string `json:"imageUrl"`
	PhoneNumber  *string `json:"phoneNumber"`
	ExternalID   *string `json:"externalId"`
	LastSignInAt *string `json:"lastSignInAt"`
	// LastActiveAt is the newest activity of the user's sessions (Clerk's
	// session events); null when none told of one.
	LastActiveAt *string `json:"lastActiveAt"`
	Banned       bool    `json:"banned"`
	Locked       bool    `json:"locked"`
	// Deprovisioned: off-boarded by Directory Sync; such a user is out of
	// the active list, and 404 for an API key (as a deleted one).
	Deprovisioned bool `json:"deprovisioned"`
	// SourceCreatedAt is Clerk's created_at (when the user signed up);
	// CreatedAt is usersync's first write of the user.
	SourceCreatedAt *string `json:"sourceCreatedAt"`
	CreatedAt       string  `json:"createdAt"`
	UpdatedAt       string  `json:"updatedAt"`
	DeletedAt       *string `json:"deletedAt"`
}

// deletedUserJSON is a deleted user in the change feed: just enough for an
// application to delete its own copy.
type deletedUserJSON struct {
	UserID string `json:"userId"`
	deletedTimes
}

// userKind is how the page reader reads users.
var userKind = pageKind[models.User]{
	size: userBytes,
	show: func(u models.User) any { return newUserJSON(u) },
	times: func(u models.User) (time.Time, time.Time, *time.Time) {
		return u.CreatedAt, u.UpdatedAt, u.DeletedAt
	},
	tombstone: func(u models.User, t deletedTimes) any { return deletedUserJSON{UserID: u.UserID, deletedTimes: t} },
}

// userBytes is about what u holds in memory and in its JSON.
func userBytes(u models.User) int {
	return 256 + len(u.UserID) + len(u.Email) + len(u.DisplayName) + len(u.Metadata) + len(u.FirstName) +
		len(u.LastName) + len(u.Username) + len(u.ImageURL) + len(u.PhoneNumber) + len(u.ExternalID)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// timeFormat is RFC 3339 in UTC with milliseconds, the engines' precision.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func newUserJSON(u models.User) userJSON {
	j := userJSON{
		UserID:          u.UserID,
		Email:           u.Email,
		DisplayName:     u.DisplayName,
		Metadata:        u.Metadata,
		FirstName:       optString(u.FirstName),
		LastName:        optString(u.LastName),
		Username:        optString(u.Username),
		ImageURL:        optString(u.ImageURL),
		PhoneNumber:     optString(u.PhoneNumber),
		ExternalID:      optString(u.ExternalID),
		LastSignInAt:    optTime(u.LastSignInAt),
		LastActiveAt:    optTime(u.LastActiveAt),
		Banned:          u.Banned,
		Locked:          u.Locked,
		Deprovisioned:   u.Deprovisioned,
		SourceCreatedAt: optTime(u.SourceCreatedAt),
		CreatedAt:       formatTime(u.CreatedAt),
		UpdatedAt:       formatTime(u.UpdatedAt),
	}
	if u.DeletedAt != nil {
		d := formatTime(*u.DeletedAt)
		j.DeletedAt = &d
	}
	return j
}

type listUsersRequest struct {
	Limit          int    `query:"limit" validate:"min=1,max=200"`
	Cursor         string `query:"cursor"` // bounded by the page reader (maxCursor)
	Email          string `query:"email" validate:"max=512"`
	IncludeDeleted bool   `query:"includeDeleted"`
	UpdatedSince   string `query:"updatedSince" validate:"max=64"`
}

// listUsers answers GET /v1/users: active users, deleted and deprovisioned
// ones too for an admin; or, with updatedSince, the change feed (userFeed).
func (s *server) listUsers(c echo.Context) error {
	req := listUsersRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.UpdatedSince != "" {
		return s.userFeed(c, req)
	}
	return listPage(s, c, userKind, req.Limit, req.Cursor, req.IncludeDeleted, func(ctx context.Context, after string, n int) ([]models.User, string, error) {
		p, err := s.users.List(ctx, models.UserFilter{Email: req.Email, IncludeDeleted: req.IncludeDeleted, After: after, Limit: n})
		return p.Users, p.NextCursor, err
	})
}

type getUserRequest struct {
	UserID         string `param:"userId" validate:"required,max=128"`
	IncludeDeleted bool   `query:"includeDeleted"`
}

// getUser answers GET /v1/users/{userId}. A deleted or deprovisioned user
// is not found unless an admin asks for deleted users: both have left the
// application's active users.
func (s *server) getUser(c echo.Context) error {
	var req getUserRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	if err := adminOnly(c, req.IncludeDeleted); err != nil {
		return err
	}
	u, err := s.users.Get(c.Request().Context(), req.UserID)
	if err != nil {
		return notFound(err, "user", req.UserID)
	}
	if (u.Deleted() || u.Deprovisioned) && !req.IncludeDeleted {
		return notFound(models.ErrNotFound, "user", req.UserID)
	}
	return c.JSON(http.StatusOK, newUserJSON(u))
}
