package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/usersync/usersync/models"
)

// reconcileMetrics describe the last reconcile run of this process.
type reconcileMetrics struct {
	last     prometheus.Gauge
	success  prometheus.Gauge
	duration prometheus.Gauge
	users    *prometheus.GaugeVec
	objects  *prometheus.GaugeVec
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
			Help: "Users of the last scheduled reconcile run by this instance: clerk (listed), local (active before the listing), applied, stale, deleted, unchanged, failed. The same as usersync_reconcile_last_run_objects{object=\"users\"}.",
		}, []string{"kind"}),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "usersync_reconcile_last_run_objects",
			Help: "Objects of the last scheduled reconcile run by this instance, by object (users, organizations, memberships, invitations, subscription_items) and kind: clerk (listed), local (active before the listing; never read for invitations and subscription_items), applied, stale, deleted, unchanged, failed. 0 of a kind the run did not read (organizations or Billing turned off in the Clerk instance), local left as it was.",
		}, []string{"object", "kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "usersync_reconcile_runs_total", Help: "Scheduled reconcile runs by this instance, by result: success or failure.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.last, m.success, m.duration, m.users, m.objects, m.runs)
	// Present from start-up, at 0, as every other metric.
	for _, kind := range reconcileKinds {
		m.users.WithLabelValues(kind)
		for _, k := range models.SummaryKinds { // the kinds a summary counts
			m.objects.WithLabelValues(k.Plural(), kind)
		}
	}
	m.runs.WithLabelValues("success")
	m.runs.WithLabelValues("failure")
	return m
}

// reconcileKinds are the kind labels of usersync_reconcile_last_run_users
// and usersync_reconcile_last_run_objects.
var reconcileKinds = []string{"clerk", "local", "applied", "stale", "deleted", "unchanged", "failed"}

// ObserveReconcile records a scheduled reconcile run.
func (m *Metrics) ObserveReconcile(r models.ReconcileSummary) {
	rm := m.reconcile
	rm.last.Set(float64(r.StartedAt.UnixMilli()) / 1000)
	rm.duration.Set(r.Duration.Seconds())
	result, ok := "failure", 0.0
	if r.Success {
		result, ok = "success", 1
	}
	rm.success.Set(ok)
	rm.runs.WithLabelValues(result).Inc()
	for _, k := range models.SummaryKinds { // the kinds a summary counts
		c := r.Of(k)
		if c == nil {
			c = &models.ReconcileCounts{Local: -1} // none read
		}
		for kind, n := range map[string]int{
			"clerk": c.Clerk, "local": c.Local, "applied": c.Applied, "stale": c.Stale,
			"deleted": c.Deleted, "unchanged": c.Unchanged, "failed": c.Failed,
		} {
			if n < 0 {
				continue
			}
			rm.objects.WithLabelValues(k.Plural(), kind).Set(float64(n))
			if k == models.KindUser {
				rm.users.WithLabelValues(kind).Set(float64(n))
			}
		}
	}
}
