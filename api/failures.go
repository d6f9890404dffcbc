package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

type failuresRequest struct {
	Scan int `query:"scan" validate:"min=1,max=10000"`
}

type failureGroupJSON struct {
	Reason        string `json:"reason"`
	Count         int64  `json:"count"`
	GaveUp        int64  `json:"gaveUp"`
	LatestAt      string `json:"latestAt"`
	LatestEventID string `json:"latestEventId"`
	LatestError   string `json:"latestError"`
}

type failuresResponse struct {
	Groups []failureGroupJSON `json:"groups"`
	// Scanned counts the failed events read, newest first; Complete is
	// false when there were more than scan.
	Scanned  int  `json:"scanned"`
	Complete bool `json:"complete"`
}

// eventFailures answers GET /v1/events/failures: the failed events
// grouped by reason, the largest group first, from at most scan of them.
func (s *server) eventFailures(c echo.Context) error {
	req := failuresRequest{Scan: 5000}
	if err := bind(c, &req); err != nil {
		return err
	}
	if s.consoleCfg.Failures == nil {
		return notConfigured("grouping failures")
	}
	fg, err := s.consoleCfg.Failures.FailureGroups(c.Request().Context(), req.Scan)
	if err != nil {
		return err
	}
	resp := failuresResponse{Groups: make([]failureGroupJSON, 0, len(fg.Groups)), Scanned: fg.Scanned, Complete: fg.Complete}
	for _, g := range fg.Groups {
		resp.Groups = append(resp.Groups, failureGroupJSON{
			Reason: g.Reason, Count: g.Count, GaveUp: g.GaveUp, LatestAt: formatTime(g.LatestAt),
			LatestEventID: g.LatestEventID, LatestError: g.LatestError,
		})
	}
	return c.JSON(http.StatusOK, resp)
}

// Bounds of one bulk replay besides its limit (at most 500 events): the
// events of the log it reads to find them, and its time.
const (
	maxBulkReplayScan = 5000
	bulkReplayBudget  = 20 * time.Second
)

type bulkReplayRequest struct {
	Status    string `query:"status" validate:"omitempty,oneof=stored failed"`
	EventType string `query:"eventType" validate:"omitempty,eventtype"`
	Kind      string `query:"kind" validate:"omitempty,kind"`
	UserID    string `query:"userId" validate:"max=128"`
	ObjectID  string `query:"objectId" validate:"max=128"`
	Since     string `query:"since"`
	Until     string `query:"until"`
	Reason    string `query:"reason" validate:"max=96"`
	Cursor    string `query:"cursor" validate:"max=64"`
	Limit     int    `query:"limit" validate:"min=1,max=500"`
	DryRun    bool   `query:"dryRun"`
}

type bulkReplayResult struct {
	EventID string `json:"eventId"`
	Status  string `json:"status"`
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

type bulkReplayResponse struct {
	DryRun bool `json:"dryRun"`
	// Matched counts the events of the filter found by this call (at most
	// limit); Scanned the events of the log read to find them.
	Matched int `json:"matched"`
	Scanned int `json:"scanned"`
	// More is true when the log may hold more matching events after
	// NextCursor: call again with it to go on.
	More       bool    `json:"more"`
	NextCursor *string `json:"nextCursor"`
	// What the replays did (not in a dry run).
	Replayed  int                `json:"replayed"`
	Processed int                `json:"processed"`
	Failed    int                `json:"failed"`
	Skipped   int                `json:"skipped"`
	Results   []bulkReplayResult `json:"results"`
	// Incomplete: the call's time ran out before every matched event was
	// replayed; NextCursor is then the one it was called with.
	Incomplete bool `json:"incomplete,omitempty"`
}

// replayEvents answers POST /v1/events/replay: it replays every failed
// (or stored) event of a filter of the event log, and of a failure reason,
// at most limit (≤ 500) per call, reading at most 5000 events of the log,
// in Clerk's order. With dryRun=true it only counts them, so that a
// confirmation can say how many a replay would take.
func (s *server) replayEvents(c echo.Context) error {
	req := bulkReplayRequest{Status: string(models.StatusFailed), Limit: 100}
	if err := bind(c, &req); err != nil {
		return err
	}
	f, err := logFilter(req.Status, req.EventType, req.Kind, req.UserID, req.ObjectID, req.Since, req.Until)
	if err != nil {
		return err
	}
	f.After = req.Cursor
	ctx := c.Request().Context()
	resp := bulkReplayResponse{DryRun: req.DryRun, Results: []bulkReplayResult{}}
	var matched []models.Event
	// Whole pages only, each no larger than what is left to find, so that
	// the cursor of the last page read is where the next call goes on.
	for {
		f.Limit = min(200, req.Limit-len(matched), maxBulkReplayScan-resp.Scanned)
		page, err := s.events.List(ctx, f)
		if err != nil {
			return err
		}
		resp.Scanned += len(page.Events)
		for _, ev := range page.Events {
			if req.Reason == "" || models.FailureReason(ev.Error) == req.Reason {
				matched = append(matched, ev)
			}
		}
		f.After = page.NextCursor
		if page.NextCursor == "" || len(matched) >= req.Limit || resp.Scanned >= maxBulkReplayScan {
			break
		}
	}
	resp.Matched = len(matched)
	if f.After != "" {
		resp.More, resp.NextCursor = true, &f.After
	}
	if req.DryRun {
		return c.JSON(http.StatusOK, resp)
	}
	s.replayAll(ctx, matched, &resp)
	if resp.Incomplete {
		resp.NextCursor, resp.More = nil, true
		if req.Cursor != "" {
			resp.NextCursor = &req.Cursor
		}
	}
	return c.JSON(http.StatusOK, resp)
}

// replayAll replays evs through sync.Service.Replay (Clerk's order,
// each claimed), within bulkReplayBudget.
func (s *server) replayAll(ctx context.Context, evs []models.Event, resp *bulkReplayResponse) {
	ctx, cancel := context.WithTimeout(ctx, bulkReplayBudget)
	defer cancel()
	err := s.sync.Replay(ctx, evs, replayLease, func(r sync.Replayed) {
		if r.Skip != "" {
			resp.Skipped++ // deleted, erased, processed or claimed meanwhile
			return
		}
		key := r.Event.EventID
		if key == "" {
			key = r.Event.ID
		}
		res := bulkReplayResult{EventID: key, Status: string(r.Result.Status), Outcome: string(r.Result.Outcome)}
		s.metrics.replayed.WithLabelValues(res.Status).Inc()
		if r.Err != nil {
			res.Error = r.Err.Error() // the event's own failure: the replay itself worked
		}
		resp.Replayed++
		if r.Result.Status == models.StatusProcessed {
			resp.Processed++
		} else {
			resp.Failed++
		}
		resp.Results = append(resp.Results, res)
	})
	if err != nil {
		resp.Incomplete = true // the budget ran out, or the database is down
	}
}
