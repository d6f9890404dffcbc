// Package api is usersync's HTTP surface: the signed Clerk webhook, the
// users API for the application, admin reads, and health checks. Handlers
// return errors; errors.go turns them into statuses and JSON bodies.
package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// Ingester stores and applies user events: new deliveries, and stored
// events again (replay).
type Ingester interface {
	Ingest(ctx context.Context, d sync.Delivery) (sync.Result, error)
	Process(ctx context.Context, ev models.Event) (sync.Result, error)
}

// EventReader reads the event log.
type EventReader interface {
	Get(ctx context.Context, id string) (models.Event, error)
	List(ctx context.Context, f models.EventFilter) (models.EventPage, error)
	Stats(ctx context.Context) (models.EventStats, error)
}

// UserReader reads users.
type UserReader interface {
	Get(ctx context.Context, userID string) (models.User, error)
	List(ctx context.Context, f models.UserFilter) (models.UserPage, error)
	// Changes returns a page of the change feed; NextCursor is always set.
	Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error)
}

// UserEraser erases the personal data kept in a deleted user's events.
type UserEraser interface {
	// EraseUser erases now; it wraps models.ErrNotFound for an unknown user
	// and models.ErrConflict for an active one.
	EraseUser(ctx context.Context, userID string, now time.Time) (models.Erasure, error)
}

// Pinger checks that the database answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config is what the server is built from.
type Config struct {
	Sync   Ingester
	Users  UserReader
	Events EventReader
	Eraser UserEraser
	DB     Pinger
	Logger *slog.Logger

	// WebhookSecrets are the Svix signing secrets (whsec_...); any of them
	// may sign a request, so that secrets can be rotated.
	WebhookSecrets []string
	// APIKeys may read active users; AdminKeys may read everything.
	APIKeys   []string
	AdminKeys []string

	// Metrics, if set, are served at /metrics and updated by the server;
	// nil makes a set of its own.
	Metrics *Metrics

	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ChangeSettle is how old a change must be before the change feed
	// serves it; 0 means models.ChangeSettle.
	ChangeSettle time.Duration
}

type server struct {
	sync     Ingester
	users    UserReader
	events   EventReader
	eraser   UserEraser
	db       Pinger
	log      *slog.Logger
	verifier *verifier
	keys     keyring
	metrics  *Metrics
	now      func() time.Time
	settle   time.Duration
}

// New returns the HTTP handler of usersync. It fails when a webhook secret
// cannot be decoded.
func New(cfg Config) (*echo.Echo, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ChangeSettle <= 0 {
		cfg.ChangeSettle = models.ChangeSettle
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.Events)
	}
	v, err := newVerifier(cfg.WebhookSecrets, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &server{
		sync:     cfg.Sync,
		users:    cfg.Users,
		events:   cfg.Events,
		eraser:   cfg.Eraser,
		db:       cfg.DB,
		log:      cfg.Logger,
		verifier: v,
		keys:     newKeyring(cfg.APIKeys, cfg.AdminKeys),
		metrics:  cfg.Metrics,
		now:      cfg.Now,
		settle:   cfg.ChangeSettle,
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RequestID())
	e.Use(s.logRequests())
	e.Use(s.metrics.observe())
	s.routes(e)
	return e, nil
}

// logRequests logs one line per request: never the query (it may hold an
// email) nor bodies.
func (s *server) logRequests() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError: true, LogMethod: true, LogURIPath: true, LogStatus: true, LogLatency: true, LogRequestID: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
				slog.String("method", v.Method), slog.String("path", v.URIPath),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency),
				slog.String("request_id", v.RequestID))
			return nil
		},
	})
}
