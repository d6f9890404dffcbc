package api

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// listChanges answers GET /v1/users?updatedSince=…: the change feed, every
// user whose document changed at or after updatedSince, oldest change first,
// deleted ones included as tombstones. Changes newer than the settle time
// are held back, so that a write that commits late with an older updatedAt
// is never behind a position already served; nextCursor is always present
// so that a caught-up client polls with it.
func (s *server) listChanges(c echo.Context, req listUsersRequest) error {
	if req.Email != "" || req.IncludeDeleted {
		return models.Public(models.ErrInvalid, "updatedSince cannot be combined with email or includeDeleted (the change feed always includes deleted users)").In("updatedSince")
	}
	since, err := parseTime("updatedSince", req.UpdatedSince)
	if err != nil {
		return err
	}
	return s.listRead(c, func(ctx context.Context) (any, error) {
		until := s.now().Add(-s.settle).UTC().Truncate(time.Millisecond)
		page, err := s.reads.readUsers(req.Limit, req.Cursor, func(after string, limit int) (models.UserPage, error) {
			return s.users.Changes(ctx, models.ChangeFilter{Since: since, Until: until, After: after, Limit: limit})
		})
		if err != nil {
			return nil, err
		}
		resp := listUsersResponse{Data: make([]any, 0, len(page.Users)), NextCursor: &page.NextCursor}
		for _, u := range page.Users {
			if u.DeletedAt != nil {
				resp.Data = append(resp.Data, deletedUserJSON{
					UserID: u.UserID, CreatedAt: formatTime(u.CreatedAt),
					UpdatedAt: formatTime(u.UpdatedAt), DeletedAt: formatTime(*u.DeletedAt),
				})
				continue
			}
			resp.Data = append(resp.Data, newUserJSON(u))
		}
		return resp, nil
	})
}
