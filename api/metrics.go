package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// StatsSource counts events per status, for the events gauge.
type StatsSource interface {
	Stats(ctx context.Context) (models.EventStats, error)
}

// Metrics are usersync's Prometheus metrics, served at /metrics.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.HistogramVec
	webhooks  *prometheus.CounterVec
	kinds     *prometheus.CounterVec
	bodyBytes *prometheus.GaugeVec
	listReads *prometheus.GaugeVec
	refused   *prometheus.CounterVec
	ignored   *prometheus.CounterVec
	process   prometheus.Histogram
	swept     *prometheus.CounterVec
	replayed  *prometheus.CounterVec
	retention prometheus.Counter
	engine    prometheus.Counter
	reconcile *reconcileMetrics
	outbound  *outboundMetrics
	// types counts deliveries by event type, for GET /v1/event-types:
	// in memory, never a label (unknown types are Clerk's or a sender's text).
	types *typeCounts

	// Background work and freshness; see operations.go.
	lastSweep     prometheus.Gauge
	lastRetention prometheus.Gauge
	retentionPass prometheus.Gauge
	lastWebhook   prometheus.Gauge
	statsFailures prometheus.Counter
	lastStats     prometheus.Gauge
	stats         *eventsCollector
}

// NewMetrics registers usersync's metrics. stats, if not nil, feeds the
// usersync_events and usersync_events_backlog gauges, from the value of the
// last RefreshStats that succeeded: a scrape never reads the database.
func NewMetrics(stats StatsSource) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "usersync_http_request_duration_seconds", Help: "HTTP requests by route, method and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method", "code"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_webhook_requests_total",
			Help: "Webhook deliveries by result: processed, duplicate, ignored (a type usersync does not store), failed (stored, not applied), rejected (refused before storing), error (5xx).",
		}, []string{"result"}),
		kinds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_webhook_events_total",
			Help: "Webhook deliveries of the events usersync stores, by the kind of object they change (user, organization, membership) and result (processed, duplicate, failed, error, overloaded).",
		}, []string{"kind", "result"}),
		bodyBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_webhook_body_bytes",
			Help: "Bytes of webhook bodies held now (arrived, being read or processed), by budget: small (Content-Length up to 64 KiB) or large.",
		}, []string{"budget"}),
		listReads: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_list_reads",
			Help: "List reads now, by state: reading (holding a read slot), waiting (for one), writing (the answer, its slot given back).",
		}, []string{"state"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_webhook_refused_total",
			Help: "Webhook deliveries refused, by reason (each also logged as \"webhook refused\" with its reason).",
		}, []string{"reason"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_webhook_ignored_total",
			Help: "Signed webhook events acknowledged and not stored (not of users, organizations or memberships), by Clerk's type; other for a type Clerk does not document.",
		}, []string{"type"}),
		process: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "usersync_event_processing_duration_seconds", Help: "Time to store and apply one webhook event.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_sweep_events_total", Help: "Events processed again by the recovery sweep, by their new status.",
		}, []string{"status"}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_replay_events_total", Help: "Events replayed through the admin API, by their new status.",
		}, []string{"status"}),
		retention: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usersync_retention_deleted_events_total", Help: "Processed events deleted by retention.",
		}),
		engine: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "usersync_engine_errors_total", Help: "Operations that failed because the database did not answer.",
		}),
	}
	m.reg.MustRegister(m.requests, m.webhooks, m.kinds, m.bodyBytes, m.listReads, m.refused, m.ignored, m.process, m.swept, m.replayed, m.retention, m.engine,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range models.Kinds {
		for _, r := range kindResults {
			m.kinds.WithLabelValues(string(k), r)
		}
	}
	for _, r := range webhookResults {
		m.webhooks.WithLabelValues(r)
	}
	for _, r := range refusalReasons {
		m.refused.WithLabelValues(r)
	}
	for _, t := range models.ClerkEventTypes {
		if models.KindOf(t.Type) == "" { // stored types are never ignored
			m.ignored.WithLabelValues(t.Type)
		}
	}
	m.ignored.WithLabelValues(otherType)
	m.bodyBytes.WithLabelValues("small")
	m.bodyBytes.WithLabelValues("large")
	for _, state := range []string{"reading", "waiting", "writing"} {
		m.listReads.WithLabelValues(state)
	}
	m.types = newTypeCounts(time.Now())
	m.reconcile = newReconcileMetrics(m.reg)
	m.outbound = newOutboundMetrics(m.reg)
	m.registerOperations(stats)
	return m
}

// ObserveRecovery records one pass of the recovery sweep and retention;
// it is meant for sync.Recovery.Observe.
func (m *Metrics) ObserveRecovery(r sync.Report) {
	for status, n := range r.Swept {
		m.swept.WithLabelValues(string(status)).Add(float64(n))
	}
	m.retention.Add(float64(r.Deleted))
	m.observePass(r)
	if errors.Is(r.Err, models.ErrUnavailable) {
		m.engine.Inc()
	}
}

func (m *Metrics) handler() echo.HandlerFunc {
	return echo.WrapHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
}

// observe times every request by route.
func (m *Metrics) observe() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			code := c.Response().Status
			if err != nil {
				code, _, _ = answer(c, err)
			}
			// Labels come from fixed sets, never from what a client sent:
			// the route template echo matched (one of ours), the method if
			// it is a standard one.
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			m.requests.WithLabelValues(route, methodLabel(c.Request().Method), strconv.Itoa(code)).Observe(time.Since(start).Seconds())
			if errors.Is(err, models.ErrUnavailable) {
				m.engine.Inc()
			}
			return err
		}
	}
}

// kindResults are the results of usersync_webhook_events_total: those of
// a delivery of an event usersync stores.
var kindResults = []string{"processed", "duplicate", "failed", "overloaded", "error"}

// webhookResults are the labels of usersync_webhook_requests_total.
var webhookResults = []string{"processed", "duplicate", "ignored", "failed", "rejected", "overloaded", "error"}

// otherType labels an ignored event whose type Clerk does not document.
const otherType = "other"

// ignoredType is the label of an ignored event of type t: t if Clerk
// documents it, else "other".
func ignoredType(t string) string {
	if models.IsClerkEventType(t) {
		return t
	}
	return otherType
}

// methodLabel is method if it is one of the methods usersync's routes or
// probes use, else "other".
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions:
		return method
	}
	return "other"
}
