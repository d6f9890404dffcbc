package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// eventJSON is an event as the admin API shows it.
type eventJSON struct {
	ID              string          `json:"id"`
	EventID         string          `json:"eventId,omitempty"`
	Type            string          `json:"type"`
	EventType       string          `json:"eventType"`
	UserID          string          `json:"userId,omitempty"`
	ObjectID        string          `json:"objectId,omitempty"`
	Status          string          `json:"status"`
	Outcome         string          `json:"outcome,omitempty"`
	Attempts        int             `json:"attempts"`
	Error           string          `json:"error,omitempty"`
	RetryAt         *string         `json:"retryAt,omitempty"`
	Source          string          `json:"source"`
	SignatureValid  *bool           `json:"signatureValid"`
	SourceTimestamp *string         `json:"sourceTimestamp"`
	ReceivedAt      string          `json:"receivedAt"`
	ProcessedAt     *string         `json:"processedAt"`
	Signature       string          `json:"signature,omitempty"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	// Erased: the user is deleted and the body is gone; no payload.
	Erased   bool    `json:"erased"`
	ErasedAt *string `json:"erasedAt,omitempty"`
	// A discarded event's when, why and which admin key.
	DiscardedAt   *string `json:"discardedAt,omitempty"`
	DiscardReason string  `json:"discardReason,omitempty"`
	DiscardedBy   string  `json:"discardedBy,omitempty"`
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// newEventJSON shows ev; withBody adds the signature and the payload, the
// body exactly as received.
func newEventJSON(ev models.Event, withBody bool) eventJSON {
	j := eventJSON{
		ID: ev.ID, EventID: ev.EventID, Type: ev.Type, EventType: string(ev.EventType), UserID: ev.UserID, ObjectID: ev.ObjectID,
		Status: string(ev.Status), Outcome: string(ev.Outcome), Attempts: ev.Attempts, Error: ev.Error,
		RetryAt: optTime(ev.RetryAt), Source: ev.Source, SignatureValid: ev.SignatureValid,
		SourceTimestamp: optTime(ev.SourceTimestamp), ReceivedAt: formatTime(ev.ReceivedAt),
		ProcessedAt: optTime(ev.ProcessedAt),
		Erased:      ev.ErasedAt != nil, ErasedAt: optTime(ev.ErasedAt),
	}
	if d := ev.Discarded; d != nil {
		j.DiscardedAt, j.DiscardReason, j.DiscardedBy = optTime(&d.At), d.Reason, d.By
	}
	if withBody {
		j.Signature = ev.Signature
	}
	if withBody && !j.Erased {
		if json.Valid(ev.RawBody) {
			j.Payload = ev.RawBody
		} else {
			b, _ := json.Marshal(string(ev.RawBody)) // stored events are JSON; never fail on one that is not
			j.Payload = b
		}
	}
	return j
}

type listEventsRequest struct {
	Limit     int    `query:"limit" validate:"min=1,max=200"`
	Cursor    string `query:"cursor" validate:"max=64"`
	Status    string `query:"status" validate:"omitempty,oneof=stored processed failed discarded"`
	EventType string `query:"eventType" validate:"omitempty,eventtype"`
	Kind      string `query:"kind" validate:"omitempty,kind"`
	UserID    string `query:"userId" validate:"max=128"`
	ObjectID  string `query:"objectId" validate:"max=128"`
	Since     string `query:"since"`
	Until     string `query:"until"`
}

type listEventsResponse struct {
	Data       []eventJSON `json:"data"`
	NextCursor *string     `json:"nextCursor"`
}

// parseTime reads an RFC 3339 time from query parameter name.
func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, models.Public(models.ErrInvalid, "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z", name).In(name)
	}
	return t.UTC(), nil
}

// logFilter is the event log filter of a request's parameters, bound and
// validated: the times are RFC 3339, and eventType is the event's short
// type or its Clerk type, which names its kind too (one of another kind
// than kind is refused).
func logFilter(status, eventType, kind, userID, objectID, since, until string) (models.EventFilter, error) {
	f := models.EventFilter{Status: models.EventStatus(status), EventType: models.EventType(eventType),
		Kind: models.Kind(kind), UserID: userID, ObjectID: objectID}
	var err error
	if f.Since, err = parseTime("since", since); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", until); err != nil {
		return f, err
	}
	if k := models.KindOf(eventType); k != "" {
		if f.Kind != "" && f.Kind != k {
			return f, models.Public(models.ErrInvalid, "eventType %s is not of kind %s", eventType, kind).In("eventType")
		}
		f.Kind, f.EventType = k, models.EventTypeOf(eventType)
	}
	return f, nil
}

// listEvents answers GET /v1/events: the event log, newest first.
func (s *server) listEvents(c echo.Context) error {
	req := listEventsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	f, err := logFilter(req.Status, req.EventType, req.Kind, req.UserID, req.ObjectID, req.Since, req.Until)
	if err != nil {
		return err
	}
	f.After, f.Limit = req.Cursor, req.Limit
	return s.listRead(c, func(ctx context.Context) (any, error) {
		page, err := s.events.List(ctx, f)
		if err != nil {
			return nil, err
		}
		resp := listEventsResponse{Data: make([]eventJSON, 0, len(page.Events))}
		for _, ev := range page.Events {
			resp.Data = append(resp.Data, newEventJSON(ev, false))
		}
		if page.NextCursor != "" {
			resp.NextCursor = &page.NextCursor
		}
		return resp, nil
	})
}

type eventRequest struct {
	ID string `param:"id" validate:"required,max=256"`
}

// getEvent answers GET /v1/events/{id}; id is the event's id or its eventId.
func (s *server) getEvent(c echo.Context) error {
	var req eventRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	ev, err := s.events.Get(c.Request().Context(), req.ID)
	if err != nil {
		return notFound(err, "event", req.ID)
	}
	return c.JSON(http.StatusOK, newEventJSON(ev, true))
}

type statsResponse struct {
	Status  map[models.EventStatus]int64 `json:"status"`
	Outcome map[models.Outcome]int64     `json:"outcome"`
	GaveUp  int64                        `json:"gaveUp"`
	// Kind counts the stored and failed events per kind of object.
	Kind map[models.Kind]kindStatsJSON `json:"kind"`
	// AsOf is when the counts were read; Stale is true when the database
	// did not answer and these are the last counts read before.
	AsOf  string `json:"asOf"`
	Stale bool   `json:"stale"`
}

// eventStats answers GET /v1/events/stats. While the database does not
// answer, it serves the last counts read (by this request or by the
// background refresh of the metrics) marked stale, rather than nothing: an
// operator in an outage still sees where the inbox stood.
func (s *server) eventStats(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err // it takes no parameters
	}
	st, err := s.events.Stats(c.Request().Context())
	at, stale := s.now(), false
	if errors.Is(err, models.ErrUnavailable) {
		var ok bool
		if st, at, ok = s.metrics.LastStats(); ok {
			err, stale = nil, true
		}
	} else if err == nil {
		s.metrics.NoteStats(st, at)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newStatsResponse(st, at, stale))
}

type kindStatsJSON struct {
	Stored int64 `json:"stored"`
	Failed int64 `json:"failed"`
	GaveUp int64 `json:"gaveUp"`
}

func newStatsResponse(st models.EventStats, at time.Time, stale bool) statsResponse {
	r := statsResponse{Status: st.ByStatus, Outcome: st.ByOutcome, GaveUp: st.GaveUp, AsOf: formatTime(at), Stale: stale,
		Kind: map[models.Kind]kindStatsJSON{}}
	for _, k := range models.Kinds {
		ks := st.ByKind[k]
		r.Kind[k] = kindStatsJSON{Stored: ks.Stored, Failed: ks.Failed, GaveUp: ks.GaveUp}
	}
	return r
}

// replayLease is how long a replay holds the events it processes, as a
// sweep holds those it claims.
const replayLease = time.Minute

type replayResponse struct {
	EventID string `json:"eventId"`
	Status  string `json:"status"`
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

// replayEvent answers POST /v1/events/{id}/replay: it processes a stored or
// failed event again through the webhook's code path. A processed event is
// a conflict and stays as it is.
func (s *server) replayEvent(c echo.Context) error {
	var req eventRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	ev, err := s.events.Get(ctx, req.ID)
	if err != nil {
		return notFound(err, "event", req.ID)
	}
	if ev.ErasedAt != nil {
		return models.Public(models.ErrConflict, "event %s was erased (its user is deleted); there is nothing to replay", models.Quote(req.ID))
	}
	if ev.Status == models.StatusProcessed {
		return models.Public(models.ErrConflict, "event %s is already processed (outcome %s); replaying it would change nothing",
			models.Quote(req.ID), ev.Outcome)
	}
	if ev.Status == models.StatusDiscarded {
		return models.Public(models.ErrConflict, "event %s was discarded by an admin; it is never applied", models.Quote(req.ID))
	}
	var done sync.Replayed
	if err := s.sync.Replay(ctx, []models.Event{ev}, replayLease, func(r sync.Replayed) { done = r }); err != nil {
		return err
	}
	if done.Skip != "" {
		return models.Public(models.ErrConflict, "event %s is being processed by a sweep or another replay (%s); try again shortly",
			models.Quote(req.ID), done.Skip)
	}
	res, err := done.Result, done.Err
	s.metrics.replayed.WithLabelValues(string(res.Status)).Inc()
	resp := replayResponse{EventID: ev.EventID, Status: string(res.Status), Outcome: string(res.Outcome)}
	if err != nil {
		resp.Error = publicMessage(err) // the event's own failure: the replay itself worked
	}
	s.logEvent(c, ev.EventID, ev.UserID, ev.ObjectID, res.Status, res.Outcome, err)
	return c.JSON(http.StatusOK, resp)
}

// maxDiscardBody bounds the body of POST /v1/events/{id}/discard.
const maxDiscardBody = 4 << 10

type discardRequest struct {
	Reason string `json:"reason"`
}

// discardEvent answers POST /v1/events/{id}/discard, body {"reason"}: it
// gives up on a failed event for good. The event is kept, as discarded,
// with when, why and the fingerprint of the admin key that asked; it is
// never applied or replayed, a later delivery of its svix-id is answered
// as a duplicate, and retention deletes it as a processed event. Any
// event but a failed one free of sweeps and replays is a conflict.
func (s *server) discardEvent(c echo.Context) error {
	var req eventRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxDiscardBody+1))
	if err != nil {
		return models.Public(models.ErrInvalid, "the body could not be read").Because(err)
	}
	if len(body) > maxDiscardBody {
		return models.Public(models.ErrInvalid, "the body is larger than %d bytes", maxDiscardBody).In("body")
	}
	var dr discardRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&dr); err != nil || dec.More() {
		return models.Public(models.ErrInvalid, `the body must be a JSON object {"reason": "why the event is discarded"}`).In("body")
	}
	reason := strings.TrimSpace(dr.Reason)
	switch {
	case reason == "":
		return models.Public(models.ErrInvalid, "reason is required: say why the event is discarded").In("reason")
	case len(reason) > models.MaxDiscardReason:
		return models.Public(models.ErrInvalid, "reason must be at most %d bytes", models.MaxDiscardReason).In("reason")
	}
	h := keyHash(c)
	d := models.Discard{At: s.now().UTC().Truncate(time.Millisecond), Reason: reason, By: KeyFingerprint(h)}
	ev, err := s.events.Discard(c.Request().Context(), req.ID, d)
	if err != nil {
		return notFound(err, "event", req.ID)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "event discarded",
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("event_id", ev.EventID), slog.String("id", ev.ID), slog.String("by", d.By),
		slog.String("reason", boundMessage(reason)))
	return c.JSON(http.StatusOK, newEventJSON(ev, false))
}

// KeyFingerprint names an admin key in what usersync keeps of its acts
// (a discard's By), never the key itself: "key sha256:" and the first 12
// hex digits of the SHA-256 of the key (sum), as `printf %s "$KEY" |
// sha256sum | cut -c1-12` prints them.
func KeyFingerprint(sum [32]byte) string {
	return "key sha256:" + hex.EncodeToString(sum[:6])
}
