package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/usersync/usersync/internal/buildinfo"
	"github.com/usersync/usersync/models"
)

type overviewResponse struct {
	Now   string     `json:"now"`
	Ready readyState `json:"ready"`
	// LastWebhookAt is when this instance last received a signed webhook,
	// since it started; null before the first.
	LastWebhookAt *string `json:"lastWebhookAt"`
	// Events are the counts of GET /v1/events/stats, with the backlog; null
	// when they could not be read (EventsError says why).
	Events      *overviewEvents `json:"events"`
	EventsError string          `json:"eventsError,omitempty"`
	Sweep       passState       `json:"sweep"`
	Retention   passState       `json:"retention"`
	Reconcile   reconcileState  `json:"reconcile"`
	Build       buildState      `json:"build"`
}

type readyState struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type overviewEvents struct {
	statsResponse
	// Backlog counts the events usersync still works on: stored, and
	// failed ones the sweep will retry.
	Backlog int64 `json:"backlog"`
}

type passState struct {
	// LastSuccessAt is when this instance last ran the pass to the end;
	// null before the first (and for retention while it is off).
	LastSuccessAt *string `json:"lastSuccessAt"`
	// LastDeleted counts the events the last retention pass deleted.
	LastDeleted *int64 `json:"lastDeleted,omitempty"`
}

type reconcileState struct {
	// DryRunAvailable is true when CLERK_SECRET_KEY is set.
	DryRunAvailable bool `json:"dryRunAvailable"`
	// LastRun is the newest recorded run, if any.
	LastRun *reconcileRunJSON `json:"lastRun"`
	// LastRunError says why the runs could not be read.
	LastRunError string `json:"lastRunError,omitempty"`
}

type buildState struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
}

// overviewTimeout bounds each read of the overview, so that a database
// that does not answer shows as such rather than as a page that waits.
const overviewTimeout = 5 * time.Second

// overview answers GET /v1/admin/overview: health at a glance. Each part
// is read on its own; a part that fails is reported as such and the rest
// is still answered.
func (s *server) overview(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	ctx := c.Request().Context()
	now := s.now()
	resp := overviewResponse{Now: formatTime(now)}
	resp.Ready = s.readiness(ctx, now)
	resp.LastWebhookAt = gaugeTime(s.metrics.lastWebhook)
	resp.Sweep.LastSuccessAt = gaugeTime(s.metrics.lastSweep)
	resp.Retention.LastSuccessAt = gaugeTime(s.metrics.lastRetention)
	if resp.Retention.LastSuccessAt != nil {
		n := int64(gaugeValue(s.metrics.retentionPass))
		resp.Retention.LastDeleted = &n
	}

	sctx, cancel := context.WithTimeout(ctx, overviewTimeout)
	st, err := s.events.Stats(sctx)
	cancel()
	at, stale := now, false
	if err != nil {
		var ok bool
		if st, at, ok = s.metrics.LastStats(); ok {
			stale = true
		}
	} else {
		s.metrics.NoteStats(st, at)
	}
	if err != nil && !stale {
		resp.EventsError = publicMessage(err)
	} else {
		backlog := st.ByStatus[models.StatusStored] + st.ByStatus[models.StatusFailed] - st.GaveUp
		resp.Events = &overviewEvents{
			statsResponse: newStatsResponse(st, at, stale),
			Backlog:       max(backlog, 0),
		}
	}

	resp.Reconcile.DryRunAvailable = s.consoleCfg.DryRun != nil
	if s.consoleCfg.Runs != nil {
		rctx, cancel := context.WithTimeout(ctx, overviewTimeout)
		runs, err := s.consoleCfg.Runs.Last(rctx, 1)
		cancel()
		switch {
		case err != nil:
			resp.Reconcile.LastRunError = publicMessage(err)
		case len(runs) > 0:
			j := newReconcileRunJSON(runs[0])
			resp.Reconcile.LastRun = &j
		}
	}
	b := buildinfo.Read()
	resp.Build = buildState{Version: b.Version, Revision: b.Revision}
	return c.JSON(http.StatusOK, resp)
}

// readiness is what /readyz would answer.
func (s *server) readiness(ctx context.Context, now time.Time) readyState {
	if at, full := s.health.storageFullSince(now); full {
		return readyState{Error: "a write failed for lack of space at " + formatTime(at)}
	}
	if at, bad := s.health.corruptSince(); bad {
		return readyState{Error: "the database file was found damaged at " + formatTime(at) + "; restore it from a backup"}
	}
	if s.db == nil {
		return readyState{Error: "no database configured"}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		switch {
		case errors.Is(err, models.ErrStalled):
			return readyState{Error: "the database's writes are stalled"}
		case errors.Is(err, models.ErrCorrupt):
			return readyState{Error: "the database file is damaged; restore it from a backup"}
		}
		return readyState{Error: "the database does not answer"}
	}
	return readyState{OK: true}
}

// gaugeValue reads a gauge of this process.
func gaugeValue(g prometheus.Gauge) float64 {
	if g == nil {
		return 0
	}
	var m dto.Metric
	if err := g.Write(&m); err != nil || m.Gauge == nil {
		return 0
	}
	return m.Gauge.GetValue()
}

// gaugeTime reads a gauge of Unix seconds as a time; nil while it is 0.
func gaugeTime(g prometheus.Gauge) *string {
	v := gaugeValue(g)
	if v <= 0 {
		return nil
	}
	t := formatTime(time.Unix(0, int64(v*1e9)))
	return &t
}

// Chart ranges: how far back each goes, the size of its points, and the
// buckets they are summed from. A chart reads at most 1440 buckets,
// whatever the number of events.
var activityRanges = map[string]struct {
	span, step, bucket time.Duration
}{
	"hour": {time.Hour, time.Minute, models.ActivityMinute},
	"day":  {24 * time.Hour, 15 * time.Minute, models.ActivityMinute},
	"week": {7 * 24 * time.Hour, time.Hour, models.ActivityHour},
}

type activityRequest struct {
	Range string `query:"range" validate:"omitempty,oneof=hour day week"`
}

type activityPoint struct {
	Start  string           `json:"start"`
	Counts map[string]int64 `json:"counts"`
}

type activityResponse struct {
	Range string `json:"range"`
	// StepSeconds is the length of one point; BucketSeconds that of the
	// stored buckets summed into it.
	StepSeconds   int64            `json:"stepSeconds"`
	BucketSeconds int64            `json:"bucketSeconds"`
	From          string           `json:"from"`
	To            string           `json:"to"`
	Kinds         []string         `json:"kinds"`
	Totals        map[string]int64 `json:"totals"`
	Points        []activityPoint  `json:"points"`
}

// activity answers GET /v1/admin/activity: events received and
// processing outcomes per point of time over the last hour (per minute),
// day (per 15 minutes, from minute buckets) or week (per hour, from hour
// buckets). Every point is present, 0 where nothing happened.
func (s *server) activity(c echo.Context) error {
	req := activityRequest{Range: "hour"}
	if err := bind(c, &req); err != nil {
		return err
	}
	if s.consoleCfg.Activity == nil {
		return notConfigured("activity counting")
	}
	r := activityRanges[req.Range]
	// The last point is the one now is in; the first is span earlier.
	to := s.now().UTC().Truncate(r.step).Add(r.step)
	from := to.Add(-r.span)
	buckets, err := s.consoleCfg.Activity.Buckets(c.Request().Context(), r.bucket, from, to)
	if err != nil {
		return err
	}
	n := int(r.span / r.step)
	resp := activityResponse{
		Range: req.Range, StepSeconds: int64(r.step / time.Second), BucketSeconds: int64(r.bucket / time.Second),
		From: formatTime(from), To: formatTime(to), Kinds: models.ActivityKinds, Totals: map[string]int64{},
		Points: make([]activityPoint, n),
	}
	for _, k := range models.ActivityKinds {
		resp.Totals[k] = 0
	}
	for i := range resp.Points {
		resp.Points[i] = activityPoint{Start: formatTime(from.Add(time.Duration(i) * r.step)), Counts: map[string]int64{}}
		for _, k := range models.ActivityKinds {
			resp.Points[i].Counts[k] = 0
		}
	}
	for _, b := range buckets {
		i := int(b.Start.Sub(from) / r.step)
		if b.Start.Before(from) || i >= n {
			continue
		}
		for k, v := range b.Counts {
			resp.Points[i].Counts[k] += v
			resp.Totals[k] += v
		}
	}
	return c.JSON(http.StatusOK, resp)
}
