package api

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
)

// outboundMetrics are outbound webhooks' metrics, by endpoint id (at most
// models.MaxEndpoints of them: the label's values are bounded, and the
// series of a deleted endpoint go at the next backlog refresh).
type outboundMetrics struct {
	attempts *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	backlog  *prometheus.GaugeVec
	oldest   *prometheus.GaugeVec
	disabled *prometheus.GaugeVec
	outbox   prometheus.Gauge

	mu    sync.Mutex
	known map[string]bool
}

func newOutboundMetrics(reg *prometheus.Registry) *outboundMetrics {
	m := &outboundMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_outbound_attempts_total",
			Help: "Attempts to send an outbound webhook by this instance, by endpoint and result: delivered (2xx), retry (any other answer, or none), gone (410: the endpoint is disabled).",
		}, []string{"endpoint", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "usersync_outbound_attempt_duration_seconds", Help: "Time of an attempt to send an outbound webhook, by endpoint.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15},
		}, []string{"endpoint"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_outbound_backlog",
			Help: "Outbound deliveries waiting to be sent (or sent again), by endpoint, counted up to 10000; read every 15 s by the instance that dispatches.",
		}, []string{"endpoint"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_outbound_oldest_pending_seconds",
			Help: "Age of the oldest change an enabled endpoint has not received yet, by endpoint; 0 when none waits, or while it is disabled.",
		}, []string{"endpoint"}),
		disabled: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_outbound_endpoint_disabled",
			Help: "1 for an endpoint usersync disabled (it answered 410, or failed every delivery for 5 days), by endpoint; 0 otherwise.",
		}, []string{"endpoint"}),
		outbox: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersync_outbound_outbox_oldest_seconds",
			Help: "Age of the oldest change recorded for the endpoints and not fanned out to them yet (a burst of webhooks holds the fan-out off); 0 when none waits. Read every 15 s by the instance that dispatches.",
		}),
		known: map[string]bool{},
	}
	reg.MustRegister(m.attempts, m.latency, m.backlog, m.oldest, m.disabled, m.outbox)
	return m
}

// Outbound is what the dispatcher tells the metrics.
func (m *Metrics) Outbound() outbound.Observer { return m.outbound }

// Attempted counts an attempt.
func (m *outboundMetrics) Attempted(endpointID string, v outbound.Verdict, latency time.Duration) {
	m.mu.Lock()
	m.known[endpointID] = true
	m.mu.Unlock()
	m.attempts.WithLabelValues(endpointID, strings.ToLower(v.String())).Inc()
	m.latency.WithLabelValues(endpointID).Observe(latency.Seconds())
}

// Disabled marks an endpoint usersync disabled.
func (m *outboundMetrics) Disabled(endpointID, _ string) {
	m.disabled.WithLabelValues(endpointID).Set(1)
}

// Backlog sets the gauges of every endpoint and of the outbox, and
// deletes the series of endpoints that are gone.
func (m *outboundMetrics) Backlog(eps []models.Endpoint, backlog map[string]models.Backlog, outbox *time.Time, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now = now.UTC()
	m.outbox.Set(age(outbox, now))
	present := map[string]bool{}
	for _, e := range eps {
		present[e.ID] = true
		b := backlog[e.ID]
		m.backlog.WithLabelValues(e.ID).Set(float64(b.Pending))
		// What a disabled endpoint keeps waits by design: its age is not
		// a delivery running late (UsersyncOutboundBacklogOld), and one
		// usersync disabled has an alert of its own.
		oldest := b.Oldest
		if !e.Enabled {
			oldest = nil
		}
		m.oldest.WithLabelValues(e.ID).Set(age(oldest, now))
		off := 0.0
		if !e.Enabled && e.Disabled != "" {
			off = 1
		}
		m.disabled.WithLabelValues(e.ID).Set(off)
	}
	for id := range m.known {
		if !present[id] {
			m.backlog.DeleteLabelValues(id)
			m.oldest.DeleteLabelValues(id)
			m.disabled.DeleteLabelValues(id)
			m.latency.DeleteLabelValues(id)
			m.attempts.DeletePartialMatch(prometheus.Labels{"endpoint": id})
		}
	}
	m.known = present
}

// age is the seconds from t to now; 0 for none.
func age(t *time.Time, now time.Time) float64 {
	if t == nil {
		return 0
	}
	return max(now.Sub(*t).Seconds(), 0)
}
