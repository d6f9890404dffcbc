package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// MaxWebhookBody is the largest webhook body accepted: 256 KiB. Clerk's
// user events are a few kilobytes, and the metadata usersync keeps is at
// most 64 KiB (models.MaxMetadataBytes); a smaller bound keeps the memory
// held by bodies in flight small (see Limits).
const MaxWebhookBody = 256 << 10

// maxEventID bounds the svix-id (or webhook-id) header; Svix's ids are
// about 30 characters. A longer one is refused before anything is stored.
const maxEventID = 128

// webhookTimeout bounds the work for one delivery; Svix gives up after 15 s.
const webhookTimeout = 10 * time.Second

// tolerance is how far a signed timestamp may be from the server's clock.
const tolerance = 5 * time.Minute

// verifier checks Svix signatures against every configured secret.
type verifier struct {
	hooks []*svix.Webhook
	now   func() time.Time
}

func newVerifier(secrets []string, now func() time.Time) (*verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no webhook secret configured")
	}
	v := &verifier{now: now}
	for i, s := range secrets {
		wh, err := svix.NewWebhook(s)
		if err != nil {
			return nil, fmt.Errorf("webhook secret %d is not a whsec_ base64 secret: %w", i+1, err)
		}
		v.hooks = append(v.hooks, wh)
	}
	return v, nil
}

// CheckWebhookSecrets reports whether every secret is a Svix secret that
// New can verify with (whsec_ and base64); its error says which is not.
func CheckWebhookSecrets(secrets []string) error {
	_, err := newVerifier(secrets, time.Now)
	return err
}

// svixHeaders returns the message id, timestamp and signatures, from the
// svix-* headers or else the webhook-* ones (as the svix library reads them).
func svixHeaders(h http.Header) (id, ts, sig string) {
	id, ts, sig = h.Get("svix-id"), h.Get("svix-timestamp"), h.Get("svix-signature")
	if id == "" || ts == "" || sig == "" {
		id, ts, sig = h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	}
	return id, ts, sig
}

// verify checks body against the signature headers. Errors wrap
// ErrInvalid (headers missing or malformed) or ErrUnauthorized.
func (v *verifier) verify(body []byte, h http.Header) error {
	id, ts, sig := svixHeaders(h)
	if id == "" || ts == "" || sig == "" {
		return refuse(reasonMissingHeader, models.Public(models.ErrInvalid, "svix-id, svix-timestamp and svix-signature headers are required"))
	}
	if len(id) > maxEventID {
		return refuse(reasonInvalidHeader, models.Public(models.ErrInvalid, "svix-id is %d bytes long; at most %d are accepted", len(id), maxEventID),
			slog.String("field", "svix-id"))
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return refuse(reasonInvalidHeader, models.Public(models.ErrInvalid, "svix-timestamp must be Unix seconds"),
			slog.String("field", "svix-timestamp"))
	}
	now, at := v.now(), time.Unix(sec, 0)
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return refuse(reasonTimestamp, models.Public(models.ErrUnauthorized, "svix-timestamp is more than 5 minutes from the server's time"),
			slog.Int64("skew_seconds", skewSeconds(at, now)))
	}
	for _, wh := range v.hooks {
		// The svix library checks the same tolerance against time.Now.
		if wh.VerifyIgnoringTimestamp(body, h) == nil {
			return nil
		}
	}
	return refuse(reasonSignature, models.Public(models.ErrUnauthorized, "no signature matches the body with any configured secret"))
}

type webhookResponse struct {
	Received  bool           `json:"received"`
	EventID   string         `json:"eventId"`
	Status    string         `json:"status"`
	Outcome   models.Outcome `json:"outcome,omitempty"`
	Duplicate bool           `json:"duplicate"`
	Type      string         `json:"type,omitempty"`
}

// clerkWebhook receives one Svix delivery: it reads the raw body, verifies
// it, and only then decodes it. Events of users, organizations and
// memberships are stored and applied; every other type is acknowledged
// and ignored. Once its type is read, the delivery is counted by type
// (GET /v1/event-types), whatever becomes of it.
func (s *server) clerkWebhook(c echo.Context) (err error) {
	result := "rejected" // until the event is stored
	var kind models.Kind // once the body is decoded, for an event usersync stores
	defer func() {
		s.metrics.webhooks.WithLabelValues(result).Inc()
		if kind != "" {
			s.metrics.kinds.WithLabelValues(string(kind), result).Inc()
		}
		if err != nil {
			s.noteRefusal(c, err)
		}
	}()
	req := c.Request()
	if req.ContentLength > MaxWebhookBody {
		return tooLarge()
	}
	body, release, err := s.inflight.readBody(c.Response(), req)
	if err != nil {
		if errors.Is(err, models.ErrOverloaded) {
			result = "overloaded"
		}
		return err
	}
	defer release()
	if err = s.verifier.verify(body, req.Header); err != nil {
		return err
	}
	s.metrics.webhookReceived(s.now())
	id, _, sig := svixHeaders(req.Header)
	ev, err := models.DecodeEvent(body)
	if err != nil {
		return err
	}
	s.countType(c, ev.Type)
	if !ev.IsStored() {
		result = "ignored"
		s.metrics.ignored.WithLabelValues(ignoredType(ev.Type)).Inc()
		return c.JSON(http.StatusOK, webhookResponse{Received: true, EventID: id, Status: "ignored", Type: ev.Type})
	}
	kind = ev.Kind()
	ctx, cancel := context.WithTimeout(req.Context(), webhookTimeout)
	defer cancel()
	done, err := s.inflight.acquire(ctx)
	if err != nil {
		if errors.Is(err, models.ErrOverloaded) {
			result = "overloaded"
		}
		return err
	}
	defer done()
	start := time.Now()
	res, err := s.sync.Ingest(ctx, sync.Delivery{EventID: id, Signature: sig, Body: body, Event: ev})
	s.metrics.process.Observe(time.Since(start).Seconds())
	s.logEvent(c, id, res.UserID, res.ObjectID, res.Status, res.Outcome, err)
	switch {
	case err == nil && res.Duplicate:
		result = "duplicate"
	case err == nil:
		result = "processed"
	case res.Status == models.StatusFailed:
		result = "failed"
	default:
		result = "error"
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookResponse{
		Received: true, EventID: id, Status: string(res.Status), Outcome: res.Outcome, Duplicate: res.Duplicate,
	})
}

func tooLarge() error {
	return echo.NewHTTPError(http.StatusRequestEntityTooLarge,
		fmt.Sprintf("body is larger than %d bytes", MaxWebhookBody))
}

// logEvent logs what became of one event, with the request's id.
func (s *server) logEvent(c echo.Context, eventID, userID, objectID string, status models.EventStatus, outcome models.Outcome, err error) {
	attrs := []slog.Attr{
		slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)),
		slog.String("event_id", eventID), slog.String("user_id", userID), slog.String("object_id", objectID),
		slog.String("status", string(status)), slog.String("outcome", string(outcome)),
	}
	level := slog.LevelInfo
	switch {
	case errors.Is(err, models.ErrInvalid):
		// What is wrong is named by its field: the message may quote a
		// key or value of the payload.
		level = slog.LevelWarn
		_, more, _ := refusalOf(err)
		attrs = append(attrs, slog.String("err", "invalid payload"))
		attrs = append(attrs, more...)
	case err != nil:
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.log.LogAttrs(c.Request().Context(), level, "event", attrs...)
}
