package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

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

// status maps an error to its HTTP status, a stable code, and the message
// a client may see. This is the only such map.
//
// The message is that of the models.PublicError of the same kind in err's
// chain, if there is one, and otherwise the status's own fixed message:
// the text of any other error (a driver's, a library's, which may quote
// other users' data) never reaches a client. It is logged instead, for
// server errors.
func status(err error) (int, string, string) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg, _ := he.Message.(string) // echo's own, or one of ours
		if msg == "" {
			msg = http.StatusText(he.Code)
		}
		return he.Code, codeFor(he.Code), msg
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			msg := k.msg
			var pe *models.PublicError
			if k.public && errors.As(err, &pe) && errors.Is(pe.Kind, k.err) {
				msg = boundMessage(pe.Msg)
			}
			return k.status, k.code, msg
		}
	}
	return http.StatusInternalServerError, "internal", "internal error; see the server log for this request id"
}

// kinds are the sentinels, in the order they are looked for, with their
// status, code, and message when no PublicError says more (public).
var kinds = []struct {
	err    error
	status int
	code   string
	msg    string
	public bool
}{
	{models.ErrOverloaded, http.StatusServiceUnavailable, "overloaded", "this instance has as much work in flight as it takes; retry shortly", true},
	{models.ErrTooManyRequests, http.StatusTooManyRequests, "too_many_requests", "too many requests in flight; retry once one has finished", true},
	{models.ErrBadUpstream, http.StatusBadGateway, "bad_gateway", "an upstream service sent an answer usersync cannot use", true},
	{models.ErrTimeout, http.StatusRequestTimeout, "request_timeout", "the request did not arrive in time", true},
	{models.ErrRetryLater, http.StatusServiceUnavailable, "retry_later", "this cannot be done yet; retry later", true},
	{models.ErrStorageFull, http.StatusServiceUnavailable, "unavailable", "the database's storage is full; retry later", false},
	{models.ErrReadOnly, http.StatusServiceUnavailable, "unavailable", "the database cannot be written (a read-only file or disk); retry later", false},
	{models.ErrCorrupt, http.StatusServiceUnavailable, "unavailable", "the database file is damaged; restore it from a backup", false},
	{models.ErrStalled, http.StatusServiceUnavailable, "unavailable", "the database's writes are stalled (its disk does not answer); retry later", false},
	{models.ErrUnavailable, http.StatusServiceUnavailable, "unavailable", "the database is unavailable; retry later", false},
	{models.ErrInvalid, http.StatusBadRequest, "invalid_request", "invalid request", true},
	{models.ErrUnauthorized, http.StatusUnauthorized, "unauthorized", "unauthorized", true},
	{models.ErrForbidden, http.StatusForbidden, "forbidden", "forbidden", true},
	{models.ErrNotFound, http.StatusNotFound, "not_found", "not found", true},
	{models.ErrConflict, http.StatusConflict, "conflict", "conflict", true},
}

// statusClientClosed is the status of a request whose client went away
// before the answer (nginx's 499): no one reads it, but the request log
// and the metrics say what happened rather than a 500.
const statusClientClosed = 499

// answer is status, but for a request whose client has gone away: a
// failure caused by its cancellation is not the server's. An overload
// refusal is the server's decision whatever the client did (a webhook
// body dropped to make room ends its read, which cancels the request).
func answer(c echo.Context, err error) (int, string, string) {
	code, name, msg := status(err)
	if c.Request().Context().Err() != nil && ((code >= 500 && !errors.Is(err, models.ErrOverloaded)) || errors.Is(err, context.Canceled)) {
		return statusClientClosed, "client_closed_request", "the client closed the request"
	}
	return code, name, msg
}

// expected are the server-side codes of conditions that heal by
// themselves or are the operator's choice: logged as warnings, not errors.
var expected = map[string]bool{
	"retry_later": true, "not_configured": true, "bad_gateway": true,
}

// maxMessage bounds the message of an error body.
const maxMessage = 1024

// boundMessage is msg cut to maxMessage bytes of valid UTF-8.
func boundMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxMessage], "") + "..."
}

// publicMessage is what a client may read of err: the message status
// gives it.
func publicMessage(err error) string {
	_, _, msg := status(err)
	return msg
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
	code, name, msg := answer(c, err)
	reqID := c.Response().Header().Get(echo.HeaderXRequestID)
	if c.Path() != "/readyz" { // readiness reports what others saw; it must not renew it
		s.health.observe(err)
	}
	if name == "overloaded" || name == "too_many_requests" {
		c.Response().Header().Set("Retry-After", retryAfterOverload)
	}
	switch {
	case code == statusClientClosed:
		// The client went away (Svix's 15 s, a closed connection): not a
		// server fault. The work done so far is stored; a retry finishes it.
		s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "client closed the request",
			slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)))
	case name == "overloaded" || name == "too_many_requests":
		if c.Get(refusalLogged) == nil {
			s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, name,
				slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)))
		}
	case code >= 500:
		level := slog.LevelError
		if expected[name] {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(c.Request().Context(), level, "request failed",
			slog.String("request_id", reqID), slog.String("path", logPath(c.Request().URL.Path)),
			slog.Int("status", code), slog.String("code", name), slog.String("err", boundMessage(err.Error())))
	}
	body := errorBody{Error: errorDetail{Code: name, Message: msg, RequestID: reqID}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	writeJSON(c, code, body)
}

// writeJSON writes v as the JSON body of an answer with status code,
// without HTML escaping: an error message says "Bearer <key>", not
// "Bearer \u003ckey\u003e". The body is never HTML.
func writeJSON(c echo.Context, code int, v any) {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Set("X-Content-Type-Options", "nosniff")
	c.Response().WriteHeader(code)
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
