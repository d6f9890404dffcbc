package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

type eraseResponse struct {
	UserID string `json:"userId"`
	// ErasedEvents counts the events whose body and payload were removed.
	ErasedEvents int `json:"erasedEvents"`
	// PendingEvents counts events still to be processed; the background
	// loop erases them once they are processed or given up.
	PendingEvents int `json:"pendingEvents"`
}

// eraseUser answers POST /v1/users/{userId}/erase: it erases the personal
// data kept in a deleted user's events now. An active user is a conflict.
func (s *server) eraseUser(c echo.Context) error {
	var req struct {
		UserID string `param:"userId" validate:"required,max=128"`
	}
	if err := bind(c, &req); err != nil {
		return err
	}
	if s.eraser == nil {
		return models.Public(models.ErrUnavailable, "erasure is not available")
	}
	res, err := s.eraser.EraseUser(c.Request().Context(), req.UserID, s.now().UTC())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, eraseResponse{UserID: req.UserID, ErasedEvents: res.Events, PendingEvents: res.Pending})
}
