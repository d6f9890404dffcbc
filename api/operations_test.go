package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func (h *harness) head(path string) response {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodHead, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(req)
}

func TestProbes_AnswerHEADAsTheyAnswerGET(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		r := h.head(path)
		if r.Code != http.StatusOK || len(r.Body) != 0 {
			t.Errorf("HEAD %s = %s, want 200 without a body", path, r)
		}
		if g := h.get(path, ""); g.Code != http.StatusOK {
			t.Errorf("GET %s = %s", path, g)
		}
	}
}

func TestProbes_HEADReadyzIs503WhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	engine := repotest.NewOutage(t)
	h := newHarness(t, func(o *harnessOptions) { o.store = engine })
	engine.Stop()
	if r := h.head("/readyz"); r.Code != http.StatusServiceUnavailable {
		t.Errorf("HEAD /readyz with the engine down = %s, want 503", r)
	}
	if r := h.head("/healthz"); r.Code != http.StatusOK {
		t.Errorf("HEAD /healthz with the engine down = %s, want 200", r)
	}
}

// metricValue returns the value of the sample named exactly series (name
// and labels as exposed), failing the test if it is absent.
func metricValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return v
		}
	}
	t.Fatalf("no %s in the metrics:\n%s", series, exposition)
	return 0
}

func TestMetrics_BackgroundWorkIsVisibleFromTheStart(t *testing.T) {
	t.Parallel()
	h, metrics := newMetricsHarness(t)
	scrape := func() string {
		t.Helper()
		r := h.get("/metrics", "")
		if r.Code != http.StatusOK {
			t.Fatalf("GET /metrics = %s", r)
		}
		return string(r.Body)
	}
	m := scrape()
	if !regexp.MustCompile(`(?m)^usersync_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1$`).MatchString(m) {
		t.Errorf("no usersync_build_info with version, revision and goversion:\n%s", m)
	}
	for _, series := range []string{
		"usersync_sweep_last_success_timestamp_seconds",
		"usersync_retention_last_success_timestamp_seconds",
		"usersync_retention_last_deleted_events",
		"usersync_webhook_last_received_timestamp_seconds",
		"usersync_stats_refresh_failures_total",
		"usersync_stats_last_refresh_timestamp_seconds",
		`usersync_sweep_events_total{status="processed"}`,
		`usersync_sweep_events_total{status="failed"}`,
	} {
		if v := metricValue(t, m, series); v != 0 {
			t.Errorf("%s = %v before anything happened, want 0", series, v)
		}
	}

	before := float64(time.Now().Unix())
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_ops", UpdatedAt: t0}))
	metrics.ObserveRecovery(sync.Report{SweepDone: true, RetentionDone: true, Deleted: 3})
	if err := metrics.RefreshStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	m = scrape()
	for _, series := range []string{
		"usersync_webhook_last_received_timestamp_seconds",
		"usersync_sweep_last_success_timestamp_seconds",
		"usersync_retention_last_success_timestamp_seconds",
		"usersync_stats_last_refresh_timestamp_seconds",
	} {
		if v := metricValue(t, m, series); v < before {
			t.Errorf("%s = %v, want a time after %v", series, v, before)
		}
	}
	if v := metricValue(t, m, "usersync_retention_last_deleted_events"); v != 3 {
		t.Errorf("usersync_retention_last_deleted_events = %v, want 3", v)
	}
	if v := metricValue(t, m, "usersync_events_backlog"); v != 0 {
		t.Errorf("usersync_events_backlog = %v with every event processed, want 0", v)
	}

	// A sweep that failed moves neither time; a failed retention keeps the
	// sweep's.
	sweepAt := metricValue(t, m, "usersync_sweep_last_success_timestamp_seconds")
	metrics.ObserveRecovery(sync.Report{SweepDone: true, RetentionDone: false})
	if v := metricValue(t, scrape(), "usersync_retention_last_deleted_events"); v != 3 {
		t.Errorf("a failed retention pass changed the last deleted count to %v", v)
	}
	if v := metricValue(t, scrape(), "usersync_sweep_last_success_timestamp_seconds"); v < sweepAt {
		t.Errorf("sweep time went back from %v to %v", sweepAt, v)
	}
}

func TestMetrics_BacklogCountsEventsNotProcessed(t *testing.T) {
	t.Parallel()
	h, metrics := newMetricsHarness(t)
	// Never applicable: stored as failed, and not retried by the sweep.
	h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`))
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_ok", UpdatedAt: t0}))
	if err := metrics.RefreshStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := string(h.get("/metrics", "").Body)
	if v := metricValue(t, m, `usersync_events{status="failed"}`); v != 1 {
		t.Errorf(`usersync_events{status="failed"} = %v, want 1`, v)
	}
	if v := metricValue(t, m, "usersync_events_gave_up"); v != 1 {
		t.Errorf("usersync_events_gave_up = %v, want 1", v)
	}
	if v := metricValue(t, m, "usersync_events_backlog"); v != 0 {
		t.Errorf("usersync_events_backlog = %v, want 0 (the failed event is given up, not pending)", v)
	}
	for series, want := range map[string]float64{
		`usersync_events_gave_up_by_kind{kind="user"}`:         1,
		`usersync_events_gave_up_by_kind{kind="organization"}`: 0,
		`usersync_events_gave_up_by_kind{kind="membership"}`:   0,
		`usersync_events_backlog_by_kind{kind="user"}`:         0,
	} {
		if v := metricValue(t, m, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
}

func TestMetricsAndStats_KeepTheLastGoodEventCountsWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	engine := repotest.NewOutage(t)
	var metrics *api.Metrics
	h := newHarness(t, func(o *harnessOptions) {
		o.store = engine
		metrics = api.NewMetrics(o.store.Events())
		o.metrics = metrics
	})
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_kept", UpdatedAt: t0}))
	if err := metrics.RefreshStats(context.Background()); err != nil {
		t.Fatal(err)
	}

	engine.Stop()
	if err := metrics.RefreshStats(context.Background()); err == nil {
		t.Fatal("stats refresh with the engine down succeeded")
	}
	// The admin's stats answer too: the last counts, marked stale.
	r := h.get("/v1/events/stats", testAdminKey)
	if r.Code != http.StatusOK {
		t.Fatalf("GET /v1/events/stats with the engine down = %s, want 200 with the last counts", r)
	}
	st := r.JSON(t)
	if st["stale"] != true || st["status"].(map[string]any)["processed"] != 1.0 || st["asOf"] == "" {
		t.Errorf("GET /v1/events/stats with the engine down = %v, want the last counts (processed 1) with stale true", st)
	}
	for range 2 { // scrapes go on answering, from memory
		r := h.get("/metrics", "")
		if r.Code != http.StatusOK {
			t.Fatalf("GET /metrics with the engine down = %s, want 200", r)
		}
		m := string(r.Body)
		if v := metricValue(t, m, `usersync_events{status="processed"}`); v != 1 {
			t.Errorf(`usersync_events{status="processed"} with the engine down = %v, want the last good value 1`, v)
		}
		if v := metricValue(t, m, "usersync_stats_refresh_failures_total"); v != 1 {
			t.Errorf("usersync_stats_refresh_failures_total = %v, want 1", v)
		}
	}

	engine.Start()
	if err := metrics.RefreshStats(context.Background()); err != nil {
		t.Errorf("stats refresh after the engine is back: %v", err)
	}
}
