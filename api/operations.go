package api

import (
	"context"
	"errors"
	"log/slog"
	stdsync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usersync/usersync/internal/buildinfo"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// statsTimeout bounds one read of the event counts by the background
// refresh; a scrape never waits for it. It is long for the engines whose
// counts read the collection (see sync.PassTimeout); sync.Loop spaces the
// refreshes by what they cost.
const statsTimeout = 5 * time.Minute

// registerOperations registers the metrics an operator watches the
// background work with: build, last successful passes, the last webhook
// received and the event counts of the last stats refresh. Every one is
// present from the start (timestamps are 0 until the first time).
func (m *Metrics) registerOperations(stats StatsSource) {
	v := buildinfo.Read()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "usersync_build_info", Help: "Always 1; the labels say which build is running.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	m.lastSweep = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "usersync_sweep_last_success_timestamp_seconds",
		Help: "Unix time of the last recovery sweep that ran to the end; 0 until the first.",
	})
	m.lastRetention = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "usersync_retention_last_success_timestamp_seconds",
		Help: "Unix time of the last retention pass that ran to the end; 0 until the first, and while retention is off.",
	})
	m.retentionPass = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "usersync_retention_last_deleted_events",
		Help: "Processed events deleted by the last retention pass that ran to the end.",
	})
	m.lastWebhook = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "usersync_webhook_last_received_timestamp_seconds",
		Help: "Unix time of the last webhook request with a valid signature; 0 until the first since start-up.",
	})
	m.statsFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "usersync_stats_refresh_failures_total",
		Help: "Background reads of the event counts that failed; the event gauges keep the last good value meanwhile.",
	})
	m.lastStats = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "usersync_stats_last_refresh_timestamp_seconds",
		Help: "Unix time of the last successful read of the event counts; 0 until the first.",
	})
	m.reg.MustRegister(build, m.lastSweep, m.lastRetention, m.retentionPass, m.lastWebhook, m.statsFailures, m.lastStats)
	for _, st := range []models.EventStatus{models.StatusProcessed, models.StatusFailed} {
		m.swept.WithLabelValues(string(st))
		m.replayed.WithLabelValues(string(st))
	}
	if stats != nil {
		m.stats = &eventsCollector{
			src: stats,
			byStatus: prometheus.NewDesc("usersync_events",
				"Stored events by status, from the last successful stats refresh.", []string{"status"}, nil),
			backlog: prometheus.NewDesc("usersync_events_backlog",
				"Events not processed that usersync still works on: stored, and failed ones the sweep will retry.", nil, nil),
			gaveUp: prometheus.NewDesc("usersync_events_gave_up",
				"Failed events the sweep no longer retries (out of attempts, or never applicable): they wait for an operator.", nil, nil),
			backlogByKind: prometheus.NewDesc("usersync_events_backlog_by_kind",
				"usersync_events_backlog per kind of object: user, organization, membership.", []string{"kind"}, nil),
			gaveUpByKind: prometheus.NewDesc("usersync_events_gave_up_by_kind",
				"usersync_events_gave_up per kind of object: user, organization, membership.", []string{"kind"}, nil),
		}
		m.reg.MustRegister(m.stats)
	}
}

// observePass records when the sweep and retention last ran to the end.
func (m *Metrics) observePass(r sync.Report) {
	now := float64(time.Now().UnixNano()) / 1e9
	if r.SweepDone {
		m.lastSweep.Set(now)
	}
	if r.RetentionDone {
		m.lastRetention.Set(now)
		m.retentionPass.Set(float64(r.Deleted))
	}
}

// webhookReceived records the arrival of a signed webhook request.
func (m *Metrics) webhookReceived(at time.Time) {
	m.lastWebhook.Set(float64(at.UnixNano()) / 1e9)
}

// RefreshStats reads the event counts once, for the event gauges. Its
// error is the store's; on error the gauges keep their last good value and
// usersync_stats_refresh_failures_total counts the failure (unless ctx was
// cancelled: that is a stop, not a failure).
func (m *Metrics) RefreshStats(ctx context.Context) error {
	if m.stats == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	st, err := m.stats.src.Stats(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			m.statsFailures.Inc()
		}
		return err
	}
	now := time.Now()
	m.stats.set(st, now)
	m.lastStats.Set(float64(now.UnixNano()) / 1e9)
	return nil
}

// LastStats returns the event counts of the last successful read (by the
// background refresh or an answered stats request) and when they were
// read; ok is false before the first.
func (m *Metrics) LastStats() (st models.EventStats, at time.Time, ok bool) {
	if m.stats == nil {
		return models.EventStats{}, time.Time{}, false
	}
	return m.stats.lastGood()
}

// NoteStats records counts a stats request read, so that they are the
// last good ones too.
func (m *Metrics) NoteStats(st models.EventStats, at time.Time) {
	if m.stats != nil {
		m.stats.set(st, at)
		m.lastStats.Set(float64(at.UnixNano()) / 1e9)
	}
}

// RunStatsRefresh calls RefreshStats at once and then every interval,
// paced by sync.Loop, until ctx is done, logging failures to log.
func (m *Metrics) RunStatsRefresh(ctx context.Context, interval time.Duration, log *slog.Logger) {
	sync.Loop(ctx, interval, func(ctx context.Context) {
		if err := m.RefreshStats(ctx); err != nil && ctx.Err() == nil {
			log.LogAttrs(ctx, slog.LevelWarn, "stats refresh failed", slog.String("err", err.Error()))
		}
	})
}

// eventsCollector serves the event counts of the last successful refresh;
// it never reads the database itself, so a scrape never waits on it.
type eventsCollector struct {
	src                         StatsSource
	byStatus, backlog, gaveUp   *prometheus.Desc
	backlogByKind, gaveUpByKind *prometheus.Desc

	mu   stdsync.Mutex
	last *models.EventStats // nil until the first refresh
	at   time.Time          // when last was read
}

func (c *eventsCollector) set(st models.EventStats, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.at = &st, at
}

// lastGood returns the counts of the last successful read and when it
// was; ok is false before the first.
func (c *eventsCollector) lastGood() (st models.EventStats, at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return models.EventStats{}, time.Time{}, false
	}
	return *c.last, c.at, true
}

func (c *eventsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byStatus
	ch <- c.backlog
	ch <- c.gaveUp
	ch <- c.backlogByKind
	ch <- c.gaveUpByKind
}

func (c *eventsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return
	}
	for status, n := range c.last.ByStatus {
		ch <- prometheus.MustNewConstMetric(c.byStatus, prometheus.GaugeValue, float64(n), string(status))
	}
	backlog := c.last.ByStatus[models.StatusStored] + c.last.ByStatus[models.StatusFailed] - c.last.GaveUp
	ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(max(backlog, 0)))
	ch <- prometheus.MustNewConstMetric(c.gaveUp, prometheus.GaugeValue, float64(c.last.GaveUp))
	for _, k := range models.Kinds {
		ks := c.last.ByKind[k]
		ch <- prometheus.MustNewConstMetric(c.backlogByKind, prometheus.GaugeValue, float64(max(ks.Stored+ks.Failed-ks.GaveUp, 0)), string(k))
		ch <- prometheus.MustNewConstMetric(c.gaveUpByKind, prometheus.GaugeValue, float64(ks.GaveUp), string(k))
	}
}
