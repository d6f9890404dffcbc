package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The codes of usersync's errors (Error.Code); docs/api.md says when each
// is answered.
const (
	CodeInvalidRequest   = "invalid_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooManyRequests  = "too_many_requests"
	CodeInternal         = "internal"
	CodeNotConfigured    = "not_configured"
	CodeBadGateway       = "bad_gateway"
	CodeRetryLater       = "retry_later"
	CodeOverloaded       = "overloaded"
	CodeUnavailable      = "unavailable"
)

// Error is an answer of usersync other than 2xx.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the API's code of the error (CodeNotFound…), Message its
	// message, which names the parameter or field at fault.
	Code    string
	Message string
	// RequestID names the request in usersync's log.
	RequestID string
	// RetryAfter is how long the answer asked to wait before trying
	// again (Retry-After); 0 when it did not say.
	RetryAfter time.Duration
	// askedWait: the answer had a Retry-After.
	askedWait bool
}

func (e *Error) Error() string {
	return fmt.Sprintf("usersync: %d %s: %s (request %s)", e.Status, e.Code, e.Message, e.RequestID)
}

// Temporary reports whether the same request may succeed later: a 429 or
// a 503, which the client sends again by itself (Options.Retries) before
// returning it.
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// IsNotFound reports whether err is usersync's 404: no such object (for
// an API key, a deleted one neither).
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}
