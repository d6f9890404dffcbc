// Package api is usersync's HTTP surface: the signed Clerk webhook, the
// users API for the application, admin reads, and health checks. Handlers
// return errors; errors.go turns them into statuses and JSON bodies.
package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// Ingester stores and applies the events of users, organizations and
// memberships: new deliveries, and stored events again (replay).
type Ingester interface {
	Ingest(ctx context.Context, d sync.Delivery) (sync.Result, error)
	// Replay processes stored or failed events again (see sync.Service.Replay).
	Replay(ctx context.Context, evs []models.Event, lease time.Duration, each func(sync.Replayed)) error
}

// EventReader reads the event log, and discards a failed event an admin
// gives up on (see repository.Events.Discard).
type EventReader interface {
	Get(ctx context.Context, id string) (models.Event, error)
	List(ctx context.Context, f models.EventFilter) (models.EventPage, error)
	Stats(ctx context.Context) (models.EventStats, error)
	Discard(ctx context.Context, id string, d models.Discard) (models.Event, error)
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

// Backuper copies the database while it runs (the embedded store; see
// sqlite.Store.Backup).
type Backuper interface {
	Backup(ctx context.Context, now time.Time, progress func(copied int64)) (models.Backup, error)
}

// Pinger checks that the database answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Config is what the server is built from.
type Config struct {
	Sync          Ingester
	Users         UserReader
	Organizations OrganizationReader
	Memberships   MembershipReader
	Invitations   InvitationReader
	Billing       BillingReader
	Events        EventReader
	Eraser        UserEraser
	DB            Pinger
	Logger        *slog.Logger
	// Backup, if set, serves POST /v1/admin/backup (the embedded store);
	// without it the route answers 501.
	Backup Backuper

	// WebhookSecrets are the Svix signing secrets (whsec_...); any of them
	// may sign a request, so that secrets can be rotated.
	WebhookSecrets []string
	// APIKeys may read active users; AdminKeys may read everything.
	APIKeys   []string
	AdminKeys []string

	// ClerkSync, if set, serves POST /v1/users/{userId}/sync and POST
	// /v1/organizations/{orgId}/sync; without it (no CLERK_SECRET_KEY)
	// they answer 501.
	ClerkSync ClerkSyncer

	// Console is what the operator's console at /admin reads.
	Console Console

	// Metrics, if set, are served at /metrics and updated by the server;
	// nil makes a set of its own.
	Metrics *Metrics

	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// Limits bound the work and memory of webhook deliveries in flight;
	// zero values take the defaults (see Limits).
	Limits Limits

	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client a webhook body is counted under (see Limits); nil: every
	// body is counted under its TCP peer.
	TrustedProxies peer.Proxies

	// ChangeSettle is how old a change must be before the change feed
	// serves it; 0 means models.ChangeSettle.
	ChangeSettle time.Duration
	// BillingGrace is how long a payer's plan reads as pending between a
	// plan change's two events before it reads as ended; 0 means
	// DefaultBillingGrace.
	BillingGrace time.Duration

	// Outbound, if set, serves the endpoints of outbound webhooks
	// (/v1/endpoints); without it they answer 501.
	Outbound *Outbound

	// MetricsKey, if set, is the bearer key GET /metrics requires.
	MetricsKey string
}

type server struct {
	sync     Ingester
	users    UserReader
	orgs     OrganizationReader
	members  MembershipReader
	invites  InvitationReader
	billing  BillingReader
	events   EventReader
	eraser   UserEraser
	db       Pinger
	log      *slog.Logger
	verifier *verifier
	keys     keyring
	metrics  *Metrics
	now      func() time.Time
	// billingGrace: see Config.BillingGrace.
	billingGrace time.Duration
	inflight     *inflight
	syncs        *syncGuard
	reads        *reads
	health       *health

	clerkSync ClerkSyncer
	outbound  *Outbound

	consoleCfg Console
	dryRun     dryRunJob
	backuper   Backuper
	backup     backupJob

	settle     time.Duration
	metricsKey *[32]byte // SHA-256 of the metrics key; nil: /metrics is open

	webhookApart bool // the webhook is served by a handler of its own
}

// New returns the HTTP handler of usersync: every route. It fails when a
// webhook secret cannot be decoded.
func New(cfg Config) (*echo.Echo, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	e := s.echo()
	s.routes(e)
	return e, nil
}

// NewApart returns two handlers of one server: main serves every route
// but the webhook, and webhook serves only POST /webhooks/clerk and
// /healthz, for a listener of its own. The webhook must be reachable from
// the internet (Svix) while the API, the admin routes and the metrics need
// not be: apart, they can be exposed apart.
func NewApart(cfg Config) (main, webhook *echo.Echo, err error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	s.webhookApart = true
	main, webhook = s.echo(), s.echo()
	s.routes(main)
	s.webhookRoutes(webhook)
	return main, webhook, nil
}

func newServer(cfg Config) (*server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BillingGrace <= 0 {
		cfg.BillingGrace = DefaultBillingGrace
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
		sync:         cfg.Sync,
		users:        cfg.Users,
		orgs:         cfg.Organizations,
		members:      cfg.Memberships,
		invites:      cfg.Invitations,
		billing:      cfg.Billing,
		events:       cfg.Events,
		eraser:       cfg.Eraser,
		backuper:     cfg.Backup,
		db:           cfg.DB,
		log:          cfg.Logger,
		verifier:     v,
		keys:         newKeyring(cfg.APIKeys, cfg.AdminKeys),
		metrics:      cfg.Metrics,
		now:          cfg.Now,
		billingGrace: cfg.BillingGrace,
		inflight:     newInflight(cfg.Limits, cfg.Metrics.bodyBytes, cfg.TrustedProxies),
		syncs:        newSyncGuard(cfg.Limits),
		reads:        newReads(cfg.Limits, cfg.Metrics.listReads),
		health:       &health{},

		clerkSync: cfg.ClerkSync,
		outbound:  cfg.Outbound,

		consoleCfg: cfg.Console,

		settle: cfg.ChangeSettle,
	}
	if cfg.MetricsKey != "" {
		h := sha256.Sum256([]byte(cfg.MetricsKey))
		s.metricsKey = &h
	}
	return s, nil
}

// echo returns an echo with usersync's error handler and middleware, and
// no routes.
func (s *server) echo() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Pre(webhookTrailingSlash)
	e.Use(requestID)
	e.Use(s.logRequests())
	e.Use(s.metrics.observe())
	e.Use(checkQuery)
	return e
}

// logRequests logs one line per request: never the query (it may hold an
// email) nor bodies.
func (s *server) logRequests() echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		HandleError: true, LogMethod: true, LogURIPath: true, LogStatus: true, LogLatency: true, LogRequestID: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
				slog.String("method", methodLabel(v.Method)), slog.String("path", logPath(v.URIPath)),
				slog.Int("status", v.Status), slog.Duration("latency", v.Latency),
				slog.String("request_id", v.RequestID))
			return nil
		},
	})
}

// maxRequestID bounds a client's X-Request-Id; longer ones are replaced.
const maxRequestID = 64

// requestID gives every request an id, in the X-Request-Id response header
// and in every log line written for it. A client's own X-Request-Id is kept
// only if it is at most 64 characters of [A-Za-z0-9._-]; any other is
// replaced by a generated one, so that a client cannot write what it likes
// into the logs.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		rid := req.Header.Get(echo.HeaderXRequestID)
		if !safeRequestID(rid) {
			rid = newRequestID()
		}
		req.Header.Set(echo.HeaderXRequestID, rid) // what the request logger reads
		c.Response().Header().Set(echo.HeaderXRequestID, rid)
		return next(c)
	}
}

func safeRequestID(s string) bool {
	if s == "" || len(s) > maxRequestID {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '.', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// webhookTrailingSlash serves POST /webhooks/clerk/ as /webhooks/clerk: an
// endpoint URL pasted with a slash must work, and a redirect would not do
// (Svix counts a 3xx as a failed delivery).
func webhookTrailingSlash(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if u := c.Request().URL; u.Path == "/webhooks/clerk/" {
			u.Path, u.RawPath = "/webhooks/clerk", ""
		}
		return next(c)
	}
}

// maxLoggedPath bounds the request path in a log line.
const maxLoggedPath = 256

// logPath is path cut to maxLoggedPath bytes: a client chooses it.
func logPath(path string) string {
	if len(path) <= maxLoggedPath {
		return path
	}
	return strings.ToValidUTF8(path[:maxLoggedPath], "") + "..."
}
