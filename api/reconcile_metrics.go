package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reconcileMetrics describe the last reconcile run of this process.
type reconcileMetrics struct {
	last     prometheus.Gauge
	success  prometheus.Gauge
	duration prometheus.Gauge
	users    *prometheus.GaugeVec
	runs     *prometheus.CounterVec
}

func newReconcileMetrics(reg *prometheus.Registry) *reconcileMetrics {
	m := &reconcileMetrics{
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersync_reconcile_last_run_timestamp_seconds", Help: "Start of the last scheduled reconcile run by this instance (Unix seconds).",
		}),
		success: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersync_reconcile_last_run_success", Help: "1 if the last scheduled reconcile run by this instance completed, else 0.",
		}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "usersync_reconcile_last_run_duration_seconds", Help: "Duration of the last scheduled reconcile run by this instance.",
		}),
		users: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_reconcile_last_run_users",
			Help: "Users of the last scheduled reconcile run by this instance: clerk (listed), local (active before the listing), applied, stale, deleted, unchanged, failed.",
		}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_reconcile_runs_total", Help: "Scheduled reconcile runs by this instance, by result: success or failure.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.last, m.success, m.duration, m.users, m.runs)
	// Present from start-up, at 0, as every other metric.
	for _, kind := range reconcileKinds {
		m.users.WithLabelValues(kind)
	}
	m.runs.WithLabelValues("success")
	m.runs.WithLabelValues("failure")
	return m
}

// reconcileKinds are the labels of usersync_reconcile_last_run_users.
var reconcileKinds = []string{"clerk", "local", "applied", "stale", "deleted", "unchanged", "failed"}

// ReconcileRun is what one reconcile run did, for ObserveReconcile.
type ReconcileRun struct {
	Start      time.Time
	Duration   time.Duration
	Success    bool
	ClerkUsers int
	LocalUsers int // -1 when not read
	Applied    int
	Stale      int
	Deleted    int
	Unchanged  int
	Failed     int
}

// ObserveReconcile records a reconcile run.
func (m *Metrics) ObserveReconcile(r ReconcileRun) {
	rm := m.reconcile
	rm.last.Set(float64(r.Start.UnixMilli()) / 1000)
	rm.duration.Set(r.Duration.Seconds())
	result, ok := "failure", 0.0
	if r.Success {
		result, ok = "success", 1
	}
	rm.success.Set(ok)
	rm.runs.WithLabelValues(result).Inc()
	for kind, n := range map[string]int{
		"clerk": r.ClerkUsers, "local": r.LocalUsers, "applied": r.Applied, "stale": r.Stale,
		"deleted": r.Deleted, "unchanged": r.Unchanged, "failed": r.Failed,
	} {
		if n >= 0 {
			rm.users.WithLabelValues(kind).Set(float64(n))
		}
	}
}
