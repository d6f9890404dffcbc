package api

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// Why a webhook delivery was refused: the reason of the "webhook refused"
// log line and the label of usersync_webhook_refused_total. A fixed set,
// so that what a client sends never becomes a label.
const (
	reasonMissingHeader  = "missing_header"  // no svix-id, svix-timestamp or svix-signature
	reasonInvalidHeader  = "invalid_header"  // a svix-id too long, a timestamp not in seconds
	reasonTimestamp      = "timestamp"       // more than 5 minutes off the server's clock
	reasonSignature      = "signature"       // no signature matches with any secret
	reasonTooLarge       = "too_large"       // a body over 256 KiB
	reasonBodyTimeout    = "body_timeout"    // the body did not arrive in time
	reasonBodyRead       = "body_read"       // the body could not be read (the client went away)
	reasonOverloaded     = "overloaded"      // too much webhook work in flight
	reasonNotUTF8        = "not_utf8"        // a body that is not UTF-8
	reasonDuplicateKey   = "duplicate_key"   // a key twice in one object
	reasonInvalidPayload = "invalid_payload" // anything else wrong in the body; the field is logged
)

var refusalReasons = []string{
	reasonMissingHeader, reasonInvalidHeader, reasonTimestamp, reasonSignature, reasonTooLarge,
	reasonBodyTimeout, reasonBodyRead, reasonOverloaded, reasonNotUTF8, reasonDuplicateKey, reasonInvalidPayload,
}

// refusal is a webhook delivery refused for a reason, with what the log
// line says of it besides (bounded values, never payload data).
type refusal struct {
	reason string
	attrs  []slog.Attr
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason string, err error, attrs ...slog.Attr) error {
	return &refusal{reason: reason, attrs: attrs, err: err}
}

// maxLoggedField bounds a field name in a log line; they are usersync's
// own names, and bounded anyway.
const maxLoggedField = 64

// refusalOf returns why err refused a webhook delivery, and ok false when
// err is not a refusal (a failure of the server or the database, which a
// retry may heal, is not one).
func refusalOf(err error) (reason string, attrs []slog.Attr, ok bool) {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason, r.attrs, true
	}
	var he *echo.HTTPError
	if errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge {
		return reasonTooLarge, nil, true
	}
	var pe *models.PublicError
	errors.As(err, &pe)
	switch {
	case errors.Is(err, models.ErrOverloaded):
		return reasonOverloaded, nil, true
	case errors.Is(err, models.ErrTimeout):
		return reasonBodyTimeout, nil, true
	case errors.Is(err, models.ErrInvalid):
		if pe != nil && slices.Contains(refusalReasons, pe.Reason) {
			return pe.Reason, nil, true
		}
		field := "body"
		if pe != nil && pe.Field != "" {
			field = pe.Field
		}
		if len(field) > maxLoggedField {
			field = field[:maxLoggedField]
		}
		return reasonInvalidPayload, []slog.Attr{slog.String("field", field)}, true
	case errors.Is(err, models.ErrUnauthorized):
		return reasonSignature, nil, true
	}
	return "", nil, false
}

// noteRefusal logs one line, and counts, a refused webhook delivery.
func (s *server) noteRefusal(c echo.Context, err error) {
	reason, attrs, ok := refusalOf(err)
	if !ok {
		return
	}
	s.metrics.refused.WithLabelValues(reason).Inc()
	c.Set(refusalLogged, true)
	attrs = append([]slog.Attr{
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("reason", reason),
	}, attrs...)
	s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "webhook refused", attrs...)
}

// refusalLogged marks a request whose refusal was logged already.
const refusalLogged = "usersync.refusal_logged"

// skewSeconds is how far t is from now, in whole seconds, bounded: a
// client chooses t.
func skewSeconds(t, now time.Time) int64 {
	const bound = 100 * 365 * 24 * 3600  // a century
	d := int64(now.Sub(t) / time.Second) // saturates at ±292 years
	return max(-bound, min(bound, d))
}
