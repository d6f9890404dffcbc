package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
)

// The endpoints of outbound webhooks (admin): register, read, change,
// delete, rotate a secret, send a test message, read the deliveries and
// attempts, replay.

// Outbound is what the endpoints' routes need.
type Outbound struct {
	Store  repository.Outbound
	Sender *outbound.Sender
	// AllowPrivate: USERSYNC_ENDPOINTS_ALLOW_PRIVATE (loopback and private
	// addresses are allowed).
	AllowPrivate bool
	// AllowHTTP: USERSYNC_ENDPOINTS_ALLOW_HTTP (plain http to a public
	// address is allowed).
	AllowHTTP bool
	// Notify wakes the dispatcher for a round that reads the endpoints
	// first: one changed, or a replay or resync is due at once.
	Notify func()
	// RecordNow turns the outbox's recording on at once (an endpoint was
	// enabled); nil: Store.SetRecording(true).
	RecordNow func()
}

// endpointsFileVar is the setting that endpoints from configuration come
// from: what a refusal to change one names.
const endpointsFileVar = "USERSYNC_ENDPOINTS_FILE"

var endpointIDPattern = regexp.MustCompile(`^(ep|cfg)_[a-z0-9_-]{1,40}$`)

// endpointRequest names an endpoint by its path.
type endpointRequest struct {
	ID string `param:"id" validate:"required,max=44"`
}

func (r *endpointRequest) endpointID() (string, error) { return checkEndpointID(r.ID) }

// checkEndpointID returns id once its shape is checked.
func checkEndpointID(id string) (string, error) {
	if !endpointIDPattern.MatchString(id) {
		return "", models.Public(models.ErrInvalid, "the endpoint id must be ep_… or cfg_… (letters, digits, _ and -)").In("id")
	}
	return id, nil
}

type endpointJSON struct {
	ID                  string      `json:"id"`
	URL                 string      `json:"url"`
	Description         string      `json:"description"`
	EventTypes          []string    `json:"eventTypes"`
	Enabled             bool        `json:"enabled"`
	DisabledReason      string      `json:"disabledReason,omitempty"`
	FromConfig          bool        `json:"fromConfig"`
	FailingSince        *string     `json:"failingSince"`
	PreviousSecretUntil *string     `json:"previousSecretUntil"`
	CreatedAt           string      `json:"createdAt"`
	UpdatedAt           string      `json:"updatedAt"`
	Backlog             *int64      `json:"backlog,omitempty"`
	OldestPendingAt     *string     `json:"oldestPendingAt,omitempty"`
	NeedsResync         bool        `json:"needsResync"`
	Resync              *resyncJSON `json:"resync"`
	// PlainHTTPKept: the endpoint is on plain http:// and may reach a
	// public address over it, which a URL set now could not: kept as it
	// was stored before usersync judged plain http, or as the endpoints
	// file gives it (the console warns).
	PlainHTTPKept bool `json:"plainHttpKept"`
	// Secret is shown once: when the endpoint is created, and when it is
	// rotated.
	Secret string `json:"secret,omitempty"`
}

// resyncJSON is an endpoint's resync: under way (doneAt null) or the
// last one.
type resyncJSON struct {
	StartedAt      string  `json:"startedAt"`
	IncludeDeleted bool    `json:"includeDeleted"`
	Kind           *string `json:"kind"` // the kind being walked; null once done
	Queued         int64   `json:"queued"`
	DoneAt         *string `json:"doneAt"`
}

func (s *server) newEndpointJSON(e models.Endpoint) endpointJSON {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	j := endpointJSON{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: types, Enabled: e.Enabled,
		DisabledReason: e.Disabled, FromConfig: e.FromConfig, FailingSince: optTime(e.FailingSince),
		PreviousSecretUntil: optTime(e.PreviousUntil), CreatedAt: formatTime(e.CreatedAt), UpdatedAt: formatTime(e.UpdatedAt),
		NeedsResync: e.NeedsResync, PlainHTTPKept: s.plainHTTPKept(e)}
	if r := e.Resync; r != nil {
		j.Resync = &resyncJSON{StartedAt: formatTime(r.StartedAt), IncludeDeleted: r.IncludeDeleted, Queued: r.Queued, DoneAt: optTime(r.DoneAt)}
		if r.Kind != "" {
			k := string(r.Kind)
			j.Resync.Kind = &k
		}
	}
	return j
}

// outboundOff answers the endpoints' routes of a server without them.
func (s *server) outboundOff() error {
	if s.outbound == nil {
		return echo.NewHTTPError(http.StatusNotImplemented, "outbound webhooks are not configured on this server")
	}
	return nil
}

// maxEndpointBody bounds an endpoint's request body.
const maxEndpointBody = 16 << 10

// readJSON decodes the request's body, at most maxEndpointBody bytes, into
// v; an empty body leaves v as it is when empty is allowed.
func readJSON(c echo.Context, v any, shape string, empty bool) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxEndpointBody+1))
	if err != nil {
		return models.Public(models.ErrInvalid, "the body could not be read").Because(err)
	}
	if len(body) > maxEndpointBody {
		return models.Public(models.ErrInvalid, "the body is larger than %d bytes", maxEndpointBody).In("body")
	}
	if empty && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil || dec.More() {
		return models.Public(models.ErrInvalid, "the body must be a JSON object %s", shape).In("body")
	}
	return nil
}

// plainHTTPKept reports whether e keeps plain http to what may be a public
// address, which a URL set now could not (endpointJSON.PlainHTTPKept).
func (s *server) plainHTTPKept(e models.Endpoint) bool {
	return s.outbound != nil && !s.outbound.AllowHTTP && (e.LegacyURL || e.FromConfig) && outbound.PlainHTTP(e.URL)
}

// checkEndpoint validates what a request may set of an endpoint: a URL
// set since usersync judges plain http may not be plain http to a public
// address unless the operator allows it.
func (s *server) checkEndpoint(e models.Endpoint) error {
	if err := outbound.CheckURL(e.URL, s.outbound.AllowPrivate); err != nil {
		return err
	}
	if !s.outbound.AllowHTTP && !e.LegacyURL {
		if err := outbound.CheckPlainHTTP(e.URL); err != nil {
			return err
		}
	}
	if err := models.CheckEndpointDescription(e.Description); err != nil {
		return err
	}
	return models.CheckEventTypes(e.EventTypes)
}

// newEndpointID is a new endpoint's id: ep_ and 24 random letters and
// digits.
func newEndpointID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "ep_" + string(b)
}

type createEndpointBody struct {
	URL         string   `json:"url"`
	EventTypes  []string `json:"eventTypes"`
	Description string   `json:"description"`
	Enabled     *bool    `json:"enabled"`
}

const endpointShape = `{"url": "https://…", "eventTypes": ["user.created", "organization.*"], "description": "…", "enabled": true}`

// createEndpoint answers POST /v1/endpoints: the endpoint, with its
// secret, shown this once.
func (s *server) createEndpoint(c echo.Context) error {
	if err := s.outboundOff(); err != nil {
		return err
	}
	var b createEndpointBody
	if err := readJSON(c, &b, endpointShape, false); err != nil {
		return err
	}
	if b.URL == "" {
		return models.Public(models.ErrInvalid, "url is required").In("url")
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	e := models.Endpoint{ID: newEndpointID(), URL: b.URL, Description: strings.TrimSpace(b.Description), EventTypes: b.EventTypes,
		Enabled: b.Enabled == nil || *b.Enabled, CreatedAt: now, UpdatedAt: now}
	if err := s.checkEndpoint(e); err != nil {
		return err
	}
	var err error
	if e.Secret, err = outbound.NewSecret(); err != nil {
		return err
	}
	// The store refuses it when there are models.MaxEndpoints already,
	// however many creates race.
	if err := s.outbound.Store.CreateEndpoint(c.Request().Context(), e); err != nil {
		return err
	}
	e.Revision = 1
	s.recordFor(e)
	s.endpointsChanged()
	s.logEndpoint(c, "endpoint created", e)
	j := s.newEndpointJSON(e)
	j.Secret = e.Secret
	return c.JSON(http.StatusCreated, j)
}

// recordFor turns the outbox's recording on at once when e keeps changes
// (models.Endpoint.Keeps: enabled, or disabled and keeping them):
// the changes this instance applies from now on are sent to it. (Other
// instances start at their dispatcher's next read of the endpoints,
// within a second; turning it off is left to that read too.)
func (s *server) recordFor(e models.Endpoint) {
	switch {
	case !models.Recording([]models.Endpoint{e}):
	case s.outbound.RecordNow != nil:
		s.outbound.RecordNow()
	default:
		s.outbound.Store.SetRecording(true)
	}
}

// endpointsChanged tells the dispatcher that an endpoint changed: its next
// round reads them first.
func (s *server) endpointsChanged() {
	if s.outbound.Notify != nil {
		s.outbound.Notify()
	}
}

// logEndpoint logs an admin's change of an endpoint: its id and host,
// never its secret or the rest of its URL (which may carry a token).
func (s *server) logEndpoint(c echo.Context, msg string, e models.Endpoint) {
	host := e.URL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		host = host[:i]
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, msg, slog.String("endpoint", e.ID),
		slog.String("host", boundMessage(host)), slog.String("by", KeyFingerprint(keyHash(c))),
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
}

// listEndpoints answers GET /v1/endpoints: every endpoint, with its
// backlog.
func (s *server) listEndpoints(c echo.Context) error {
	if err := s.outboundOff(); err != nil {
		return err
	}
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	eps, err := s.outbound.Store.Endpoints(ctx)
	if err != nil {
		return err
	}
	backlog, err := s.outbound.Store.Backlog(ctx)
	if err != nil {
		return err
	}
	out := make([]endpointJSON, len(eps))
	for i, e := range eps {
		out[i] = withBacklog(s.newEndpointJSON(e), backlog[e.ID])
	}
	return c.JSON(http.StatusOK, map[string]any{"endpoints": out})
}

func withBacklog(j endpointJSON, b models.Backlog) endpointJSON {
	j.Backlog, j.OldestPendingAt = &b.Pending, optTime(b.Oldest)
	return j
}

// endpoint binds req and reads the endpoint its path names.
func (s *server) endpoint(c echo.Context, req interface{ endpointID() (string, error) }) (models.Endpoint, error) {
	if err := s.outboundOff(); err != nil {
		return models.Endpoint{}, err
	}
	if err := bind(c, req); err != nil {
		return models.Endpoint{}, err
	}
	id, err := req.endpointID()
	if err != nil {
		return models.Endpoint{}, err
	}
	e, err := s.outbound.Store.Endpoint(c.Request().Context(), id)
	return e, notFound(err, "endpoint", id)
}

// getEndpoint answers GET /v1/endpoints/{id}.
func (s *server) getEndpoint(c echo.Context) error {
	e, err := s.endpoint(c, &endpointRequest{})
	if err != nil {
		return err
	}
	backlog, err := s.outbound.Store.Backlog(c.Request().Context(), e.ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, withBacklog(s.newEndpointJSON(e), backlog[e.ID]))
}

// fromConfig refuses to change an endpoint that comes from the
// configuration.
func fromConfig(e models.Endpoint) error {
	if e.FromConfig {
		return models.Public(models.ErrConflict, "endpoint %s comes from the configuration (%s): change it there", e.ID, endpointsFileVar)
	}
	return nil
}

type patchEndpointBody struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"eventTypes"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

// patchEndpoint answers PATCH /v1/endpoints/{id}: enabling an endpoint
// usersync disabled clears why.
func (s *server) patchEndpoint(c echo.Context) error {
	req := endpointRequest{}
	if err := s.outboundOff(); err != nil {
		return err
	}
	if err := bind(c, &req); err != nil {
		return err
	}
	var b patchEndpointBody
	if err := readJSON(c, &b, endpointShape, false); err != nil {
		return err
	}
	enabled := false
	e, err := s.changeEndpoint(c, &req, func(e *models.Endpoint) error {
		enabled = b.Enabled != nil && *b.Enabled && !e.Enabled
		if b.URL != nil && *b.URL != e.URL {
			e.URL, e.LegacyURL = *b.URL, false // a new URL is judged as any
		}
		if b.EventTypes != nil {
			e.EventTypes = *b.EventTypes
		}
		if b.Description != nil {
			e.Description = strings.TrimSpace(*b.Description)
		}
		if b.Enabled != nil {
			if *b.Enabled && !e.Enabled {
				e.Disabled = ""
			}
			e.Enabled = *b.Enabled
		}
		return s.checkEndpoint(*e)
	})
	if err != nil {
		return err
	}
	s.recordFor(e)
	if enabled {
		// What failed while it was away is sent again, with what it kept.
		if err := s.requeueFailed(c.Request().Context(), e.ID); err != nil {
			return err
		}
	}
	s.endpointsChanged()
	s.logEndpoint(c, "endpoint changed", e)
	return c.JSON(http.StatusOK, s.newEndpointJSON(e))
}

// requeueFailed makes every failed delivery of endpoint id pending again
// (maxReplayWindow a write), and wakes the dispatcher.
func (s *server) requeueFailed(ctx context.Context, id string) error {
	for {
		n, err := s.outbound.Store.Requeue(ctx, models.Requeue{EndpointID: id, Failed: true, Limit: maxReplayWindow}, s.now().UTC())
		if err != nil {
			return err
		}
		if n > 0 && s.outbound.Notify != nil {
			s.outbound.Notify()
		}
		if n < maxReplayWindow {
			return nil
		}
	}
}

type resyncBody struct {
	IncludeDeleted bool `json:"includeDeleted"`
}

// resyncEndpoint answers POST /v1/endpoints/{id}/resync: the current
// state of every object the endpoint wants is queued for it, a page a
// round, in place of a resync under way; 202 with the endpoint, whose
// resync says how far it is.
func (s *server) resyncEndpoint(c echo.Context) error {
	e, err := s.endpoint(c, &endpointRequest{})
	if err != nil {
		return err
	}
	var b resyncBody
	if err := readJSON(c, &b, `{"includeDeleted": false}`, true); err != nil {
		return err
	}
	r := models.Resync{StartedAt: s.now().UTC().Truncate(time.Millisecond), IncludeDeleted: b.IncludeDeleted, Kind: models.ResyncKinds[0]}
	if err := s.outbound.Store.StartResync(c.Request().Context(), e.ID, r); err != nil {
		return notFound(err, "endpoint", e.ID)
	}
	e.Resync = &r
	s.recordFor(e)
	if s.outbound.Notify != nil {
		s.outbound.Notify()
	}
	s.endpointsChanged()
	s.logEndpoint(c, "endpoint resync started", e)
	return c.JSON(http.StatusAccepted, s.newEndpointJSON(e))
}

// changeEndpoint changes the endpoint req names with change, written
// over the revision read (repository.ChangeEndpoint: no other write is
// undone); an endpoint from the configuration is refused. It returns the
// endpoint as written.
func (s *server) changeEndpoint(c echo.Context, req interface{ endpointID() (string, error) }, change func(*models.Endpoint) error) (models.Endpoint, error) {
	id, err := req.endpointID()
	if err != nil {
		return models.Endpoint{}, err
	}
	e, err := repository.ChangeEndpoint(c.Request().Context(), s.outbound.Store, id, func(e *models.Endpoint) error {
		if err := fromConfig(*e); err != nil {
			return err
		}
		if err := change(e); err != nil {
			return err
		}
		e.UpdatedAt = s.now().UTC().Truncate(time.Millisecond)
		return nil
	})
	return e, notFound(err, "endpoint", id)
}

// deleteEndpoint answers DELETE /v1/endpoints/{id}.
func (s *server) deleteEndpoint(c echo.Context) error {
	e, err := s.endpoint(c, &endpointRequest{})
	if err != nil {
		return err
	}
	if err := fromConfig(e); err != nil {
		return err
	}
	if err := s.outbound.Store.DeleteEndpoint(c.Request().Context(), e.ID); err != nil {
		return notFound(err, "endpoint", e.ID)
	}
	s.endpointsChanged()
	s.logEndpoint(c, "endpoint deleted", e)
	return c.NoContent(http.StatusNoContent)
}

type rotateBody struct {
	// Overlap is how long the previous secret still signs: a Go duration
	// ("24h", "0s"), at most models.MaxRotationOverlap.
	Overlap string `json:"overlap"`
}

// defaultOverlap is how long a rotated secret signs by default.
const defaultOverlap = 24 * time.Hour

// rotateSecret answers POST /v1/endpoints/{id}/rotate-secret: a new
// secret, shown this once; the previous one signs too until the overlap
// ends. An endpoint keeps two secrets at most: a rotation with an overlap
// while the previous one's runs is refused with the time it ends; one
// with an overlap of 0s (a secret that leaked) replaces both at once.
func (s *server) rotateSecret(c echo.Context) error {
	req := endpointRequest{}
	if err := s.outboundOff(); err != nil {
		return err
	}
	if err := bind(c, &req); err != nil {
		return err
	}
	b := rotateBody{Overlap: defaultOverlap.String()}
	if err := readJSON(c, &b, `{"overlap": "24h"}`, true); err != nil {
		return err
	}
	overlap, err := time.ParseDuration(b.Overlap)
	if err != nil || overlap < 0 || overlap > models.MaxRotationOverlap {
		return models.Public(models.ErrInvalid, "overlap must be a duration from 0s to %s", models.MaxRotationOverlap).In("overlap")
	}
	secret, err := outbound.NewSecret()
	if err != nil {
		return err
	}
	e, err := s.changeEndpoint(c, &req, func(e *models.Endpoint) error {
		now := s.now().UTC().Truncate(time.Millisecond)
		if overlap > 0 && len(e.Secrets(now)) > 1 {
			return models.Public(models.ErrConflict, "the previous rotation's overlap runs until %s, and an endpoint keeps two secrets at most: "+
				"rotate again after it, or now with {\"overlap\": \"0s\"} to replace both", formatTime(*e.PreviousUntil))
		}
		until := now.Add(overlap)
		e.PreviousSecret, e.PreviousUntil, e.Secret = e.Secret, &until, secret
		if overlap == 0 {
			e.PreviousSecret, e.PreviousUntil = "", nil
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.endpointsChanged()
	s.logEndpoint(c, "endpoint secret rotated", e)
	j := s.newEndpointJSON(e)
	j.Secret = secret
	return c.JSON(http.StatusOK, j)
}

// testEndpoint answers POST /v1/endpoints/{id}/test: a usersync.test
// message sent now, signed, and what the endpoint answered. It is not
// queued, retried or recorded.
func (s *server) testEndpoint(c echo.Context) error {
	e, err := s.endpoint(c, &endpointRequest{})
	if err != nil {
		return err
	}
	now := s.now().UTC()
	id := "msg_test_" + strings.TrimPrefix(newEndpointID(), "ep_")
	body, err := json.Marshal(map[string]any{"type": "usersync.test", "timestamp": now,
		"data": map[string]string{"endpointId": e.ID}, "changed": []string{}, "origin": "test"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), outbound.DefaultTimeout+time.Second)
	defer cancel()
	res := s.outbound.Sender.Send(ctx, outbound.TargetOf(e, now), outbound.Message{ID: id, Timestamp: now, Body: body})
	return c.JSON(http.StatusOK, map[string]any{"webhookId": id, "delivered": res.Verdict == outbound.Delivered,
		"status": res.Status, "latencyMs": res.Latency.Milliseconds(), "error": res.Err, "response": res.Body})
}

type listAttemptsRequest struct {
	ID     string `param:"id" validate:"required,max=44"`
	Failed bool   `query:"failed"`
	Limit  int    `query:"limit" validate:"min=1,max=200"`
	Cursor string `query:"cursor" validate:"max=1024"`
}

func (r *listAttemptsRequest) endpointID() (string, error) { return checkEndpointID(r.ID) }

type listDeliveriesRequest struct {
	ID     string `param:"id" validate:"required,max=44"`
	Status string `query:"status" validate:"omitempty,oneof=pending delivered failed dropped"`
	Limit  int    `query:"limit" validate:"min=1,max=200"`
	Cursor string `query:"cursor" validate:"max=1024"`
}

func (r *listDeliveriesRequest) endpointID() (string, error) { return checkEndpointID(r.ID) }

type attemptJSON struct {
	ID        string `json:"id"`
	WebhookID string `json:"webhookId"`
	Type      string `json:"type"`
	ObjectID  string `json:"objectId"`
	At        string `json:"at"`
	Status    int    `json:"status"`
	LatencyMS int64  `json:"latencyMs"`
	Error     string `json:"error,omitempty"`
	Delivered bool   `json:"delivered"`
}

// listAttempts answers GET /v1/endpoints/{id}/attempts: the endpoint's
// attempts, newest first (failed=true: its failures).
func (s *server) listAttempts(c echo.Context) error {
	req := listAttemptsRequest{Limit: 50}
	e, err := s.endpoint(c, &req)
	if err != nil {
		return err
	}
	as, next, err := s.outbound.Store.Attempts(c.Request().Context(),
		models.AttemptFilter{EndpointID: e.ID, Failed: req.Failed, After: req.Cursor, Limit: req.Limit})
	if err != nil {
		return err
	}
	out := make([]attemptJSON, len(as))
	for i, a := range as {
		out[i] = attemptJSON{ID: a.ID, WebhookID: a.MessageID, Type: a.Type, ObjectID: a.ObjectID, At: formatTime(a.At),
			Status: a.Status, LatencyMS: a.Latency.Milliseconds(), Error: a.Error, Delivered: a.Delivered}
	}
	return c.JSON(http.StatusOK, map[string]any{"attempts": out, "nextCursor": next})
}

type deliveryJSON struct {
	Kind        string  `json:"kind"`
	ObjectID    string  `json:"objectId"`
	WebhookID   string  `json:"webhookId"`
	Type        string  `json:"type"`
	Origin      string  `json:"origin"`
	Status      string  `json:"status"`
	Attempts    int     `json:"attempts"`
	NextAt      *string `json:"nextAttemptAt"`
	PendingAt   *string `json:"pendingSince"`
	LastStatus  int     `json:"lastStatus"`
	LastError   string  `json:"lastError,omitempty"`
	LastAt      *string `json:"lastAttemptAt"`
	DeliveredAt *string `json:"deliveredAt"`
}

// listDeliveries answers GET /v1/endpoints/{id}/deliveries: what the
// endpoint has been told of each object, by kind and object (status=…:
// those in that state).
func (s *server) listDeliveries(c echo.Context) error {
	req := listDeliveriesRequest{Limit: 50}
	e, err := s.endpoint(c, &req)
	if err != nil {
		return err
	}
	ds, next, err := s.outbound.Store.Deliveries(c.Request().Context(),
		models.DeliveryFilter{EndpointID: e.ID, Status: req.Status, After: req.Cursor, Limit: req.Limit})
	if err != nil {
		return err
	}
	out := make([]deliveryJSON, len(ds))
	for i, d := range ds {
		j := deliveryJSON{Kind: string(d.Kind), ObjectID: d.ObjectID, WebhookID: d.MessageID,
			Type: models.OutboundType(d.Kind, d.Change), Origin: d.Origin, Status: d.Status, Attempts: d.Attempts,
			LastStatus: d.LastStatus, LastError: d.LastError, LastAt: optTime(d.LastAt), DeliveredAt: optTime(d.DeliveredAt)}
		if d.Status == models.DeliveryPending {
			j.NextAt, j.PendingAt = optTime(&d.NextAt), optTime(&d.Since)
		}
		out[i] = j
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": out, "nextCursor": next})
}

type replayDeliveriesBody struct {
	Kind     string `json:"kind"`
	ObjectID string `json:"objectId"`
	Since    string `json:"since"`
}

// maxReplayWindow bounds the deliveries one replay of a window requeues.
const maxReplayWindow = 10000

// replayDeliveries answers POST /v1/endpoints/{id}/replay: one object's
// delivery ({"kind", "objectId"}) or those last attempted since a time
// ({"since"}), sent again whole, with their webhook-id.
func (s *server) replayDeliveries(c echo.Context) error {
	e, err := s.endpoint(c, &endpointRequest{})
	if err != nil {
		return err
	}
	var b replayDeliveriesBody
	if err := readJSON(c, &b, `{"kind": "user", "objectId": "user_…"} or {"since": "2026-01-02T03:04:05Z"}`, false); err != nil {
		return err
	}
	r := models.Requeue{EndpointID: e.ID, Limit: maxReplayWindow}
	switch {
	case b.Since != "" && (b.Kind != "" || b.ObjectID != ""):
		return models.Public(models.ErrInvalid, "give either kind and objectId, or since").In("body")
	case b.Since != "":
		t, err := time.Parse(time.RFC3339, b.Since)
		if err != nil {
			return models.Public(models.ErrInvalid, "since must be an RFC 3339 time").In("since")
		}
		r.Since = t
	default:
		k, ok := models.ParseKind(b.Kind)
		if b.Kind == string(models.KindPlan) {
			k, ok = models.KindPlan, true // a payer's plan, by the payer's id
		}
		if !ok {
			return models.Public(models.ErrInvalid, "kind must be one of %s", strings.Join(append(kindList(), string(models.KindPlan)), ", ")).In("kind")
		}
		if b.ObjectID == "" || len(b.ObjectID) > 128 {
			return models.Public(models.ErrInvalid, "objectId is required (at most 128 bytes)").In("objectId")
		}
		r.Kind, r.ObjectID = k, b.ObjectID
	}
	if r.Kind != "" {
		if _, err := s.outbound.Store.Delivery(c.Request().Context(), e.ID, r.Kind, r.ObjectID); err != nil {
			if errors.Is(err, models.ErrNotFound) {
				return models.Public(models.ErrNotFound, "endpoint %s has no delivery of %s %s: resync it to send the objects it never had",
					e.ID, r.Kind, models.Quote(r.ObjectID))
			}
			return err
		}
	}
	n, err := s.outbound.Store.Requeue(c.Request().Context(), r, s.now().UTC())
	if err != nil {
		return err
	}
	if n > 0 && s.outbound.Notify != nil {
		s.outbound.Notify()
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "deliveries replayed", slog.String("endpoint", e.ID),
		slog.Int("requeued", n), slog.String("by", KeyFingerprint(keyHash(c))))
	return c.JSON(http.StatusOK, map[string]any{"requeued": n})
}

func kindList() []string {
	out := make([]string, len(models.Kinds))
	for i, k := range models.Kinds {
		out[i] = string(k)
	}
	return out
}
