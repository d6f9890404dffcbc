package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId"`
}

// status maps an error to its HTTP status, a stable code, and a message a
// client may see. This is the only such map.
func status(err error) (int, string, string) {
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		msg, _ := he.Message.(string)
		if msg == "" {
			msg = http.StatusText(he.Code)
		}
		return he.Code, codeFor(he.Code), msg
	case errors.Is(err, errOverloaded):
		return http.StatusServiceUnavailable, "overloaded", err.Error()
	case errors.Is(err, models.ErrRetryLater):
		return http.StatusServiceUnavailable, "retry_later", err.Error()
	case errors.Is(err, models.ErrStorageFull):
		return http.StatusServiceUnavailable, "unavailable", "the database's storage is full; retry later"
	case errors.Is(err, models.ErrReadOnly):
		return http.StatusServiceUnavailable, "unavailable", "the database cannot be written (a read-only file or disk); retry later"
	case errors.Is(err, models.ErrUnavailable):
		return http.StatusServiceUnavailable, "unavailable", "the database is unavailable; retry later"
	case errors.Is(err, models.ErrInvalid):
		return http.StatusBadRequest, "invalid_request", err.Error()
	case errors.Is(err, models.ErrUnauthorized):
		return http.StatusUnauthorized, "unauthorized", err.Error()
	case errors.Is(err, models.ErrForbidden):
		return http.StatusForbidden, "forbidden", err.Error()
	case errors.Is(err, models.ErrNotFound):
		return http.StatusNotFound, "not_found", err.Error()
	case errors.Is(err, models.ErrConflict):
		return http.StatusConflict, "conflict", err.Error()
	}
	return http.StatusInternalServerError, "internal", "internal error; see the server log for this request id"
}

func codeFor(status int) string {
	switch status {
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusNotImplemented:
		return "not_configured"
	}
	if status >= 500 {
		return "internal"
	}
	return "error"
}

// handleError writes err as a JSON error body. Server errors are logged
// here, once.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, name, msg := status(err)
	reqID := c.Response().Header().Get(echo.HeaderXRequestID)
	if c.Path() != "/readyz" { // readiness reports what others saw; it must not renew it
		s.health.observe(err)
	}
	if name == "overloaded" {
		c.Response().Header().Set("Retry-After", retryAfterOverload)
	}
	if code >= 500 && c.Request().Context().Err() != nil {
		// The client went away (Svix's 15 s, a closed connection): not a
		// server fault. The work done so far is stored; a retry finishes it.
		s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "client closed the request",
			slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)))
	} else if name == "overloaded" {
		s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "overloaded",
			slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)))
	} else if code >= 500 {
		s.log.LogAttrs(c.Request().Context(), slog.LevelError, "request failed",
			slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)),
			slog.Int("status", code), slog.String("err", err.Error()))
	}
	body := errorBody{Error: errorDetail{Code: name, Message: msg, RequestID: reqID}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	_ = c.JSON(code, body)
}
