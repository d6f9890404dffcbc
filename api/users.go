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
	UserID    string `json:"userId"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	DeletedAt string `json:"deletedAt"`
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
	Cursor         string `query:"cursor" validate:"max=64"`
	Email          string `query:"email" validate:"max=512"`
	IncludeDeleted bool   `query:"includeDeleted"`
	UpdatedSince   string `query:"updatedSince" validate:"max=64"`
}

type listUsersResponse struct {
	Data       []any   `json:"data"` // userJSON, or deletedUserJSON in the change feed
	NextCursor *string `json:"nextCursor"`
}

// listUsers answers GET /v1/users.
func (s *server) listUsers(c echo.Context) error {
	req := listUsersRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	if req.UpdatedSince != "" {
		return s.listChanges(c, req)
	}
	if req.IncludeDeleted && !isAdmin(c) {
		return models.Public(models.ErrForbidden, "includeDeleted needs an admin key").In("includeDeleted")
	}
	return s.listRead(c, func(ctx context.Context) (any, error) {
		page, err := s.reads.readUsers(req.Limit, req.Cursor, func(after string, limit int) (models.UserPage, error) {
			return s.users.List(ctx, models.UserFilter{Email: req.Email, IncludeDeleted: req.IncludeDeleted, After: after, Limit: limit})
		})
		if err != nil {
			return nil, err
		}
		resp := listUsersResponse{Data: make([]any, 0, len(page.Users))}
		for _, u := range page.Users {
			resp.Data = append(resp.Data, newUserJSON(u))
		}
		if page.NextCursor != "" {
			resp.NextCursor = &page.NextCursor
		}
		return resp, nil
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
	if req.IncludeDeleted && !isAdmin(c) {
		return models.Public(models.ErrForbidden, "includeDeleted needs an admin key").In("includeDeleted")
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
