package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	stdsync "sync"
	"sync/atomic"
	"time"
)

// A steady stream (-rate): the webhook's requests are spaced evenly at the
// rate asked, rather than sent as fast as -concurrency allows, so that the
// run measures how outbound keeps up with an inbound stream that does not
// end, not only how it catches up after a burst. With -endpoint, the run
// also samples the endpoint's backlog every second while sending and counts,
// in each 5 s window of sending, the webhooks acknowledged and the
// deliveries the receiver got.

const (
	// maxRate bounds Config.Rate.
	maxRate = 100_000
	// sampleEvery is how often the endpoint's backlog is read while
	// sending.
	sampleEvery = time.Second
	// window is the width of the windows of sending that compare what
	// went out with what came in.
	window = 5 * time.Second
	// maxWindows bounds the windows kept: the run's bound (maxTimeout)
	// holds fewer.
	maxWindows = int(maxTimeout/window) + 1
	// shownWindows is the most windows whose counts the report lists.
	shownWindows = 24
)

// pacer gives each request a slot: the i-th at start + i/rate.
type pacer struct {
	start time.Time
	every time.Duration
	n     atomic.Int64
}

func newPacer(rate int) *pacer {
	return &pacer{start: time.Now(), every: time.Second / time.Duration(rate)}
}

// wait waits for the next slot; false when ctx ended first.
func (p *pacer) wait(ctx context.Context) bool {
	i := p.n.Add(1) - 1
	d := time.Until(p.start.Add(time.Duration(i) * p.every))
	if d <= 0 {
		return ctx.Err() == nil
	}
	return sleep(ctx, d)
}

// windows counts events in consecutive windows of sending.
type windows struct {
	start time.Time
	mu    stdsync.Mutex
	n     []int
}

func newWindows(start time.Time) *windows { return &windows{start: start} }

// add counts one event at t; those before start or past the last window
// kept are not counted.
func (w *windows) add(t time.Time) {
	if w == nil {
		return
	}
	i := int(t.Sub(w.start) / window)
	if i < 0 || i >= maxWindows {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.n) <= i {
		w.n = append(w.n, 0)
	}
	w.n[i]++
}

// counts are the counts of the first k windows.
func (w *windows) counts(k int) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, k)
	copy(out, w.n)
	return out
}

// Steady is what a run learned of outbound while it sent (-endpoint).
type Steady struct {
	// Backlog is the endpoint's backlog read every second while sending.
	Backlog []int64
	// Trend is the backlog's least-squares slope, in changes a second;
	// Grew is true when it adds up, over the sending, to more than a
	// second of the acknowledged webhooks.
	Trend float64
	Grew  bool
	// Acked and Sent are, per whole 5 s window of sending, the webhooks
	// acknowledged and the deliveries the receiver got in it; LeastShare
	// is the least Sent/Acked over the windows with webhooks acknowledged
	// (-1 when there is none).
	Acked, Sent []int
	LeastShare  float64
}

// sampleBacklog reads the endpoint's backlog every second until ctx ends,
// then returns the readings (one that fails is left out).
func (r *runner) sampleBacklog(ctx context.Context, ep *endpoint) []int64 {
	var out []int64
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for len(out) < int(maxTimeout/sampleEvery) {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		code, resp, _, err := r.admin(ctx, http.MethodGet, "/v1/endpoints/"+url.PathEscape(ep.id), nil)
		var j struct {
			Backlog *int64 `json:"backlog"`
		}
		if err == nil && code == http.StatusOK && json.Unmarshal(resp, &j) == nil && j.Backlog != nil {
			out = append(out, *j.Backlog)
		}
	}
	return out
}

// steady sums up the backlog's readings and the windows of a sending that
// took sent.
func steady(backlog []int64, acked, received *windows, sent time.Duration) *Steady {
	s := &Steady{Backlog: backlog, LeastShare: -1}
	if n := len(backlog); n >= 2 {
		// x is the reading's second, y its backlog.
		var sx, sy, sxx, sxy float64
		for i, b := range backlog {
			x, y := float64(i), float64(b)
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		fn := float64(n)
		s.Trend = (fn*sxy - sx*sy) / (fn*sxx - sx*sx) / sampleEvery.Seconds()
	}
	k := min(int(sent/window), maxWindows)
	s.Acked, s.Sent = acked.counts(k), received.counts(k)
	total := 0
	for i, a := range s.Acked {
		total += a
		if a == 0 {
			continue
		}
		if share := float64(s.Sent[i]) / float64(a); s.LeastShare < 0 || share < s.LeastShare {
			s.LeastShare = share
		}
	}
	if secs := sent.Seconds(); secs > 0 {
		s.Grew = s.Trend*secs > float64(total)/max(float64(k)*window.Seconds(), 1)
	}
	return s
}

// print writes the stream's lines of the outbound section.
func (s *Steady) print(w io.Writer) {
	if n := len(s.Backlog); n > 0 {
		verdict := "flat"
		if s.Grew {
			verdict = "GREW"
		}
		fmt.Fprintf(w, "  backlog while sending, read every %s: %d readings, max %d, at the end %d, trend %+.1f a second: %s\n",
			sampleEvery, n, slices.Max(s.Backlog), s.Backlog[n-1], s.Trend, verdict)
	}
	if s.LeastShare >= 0 {
		fmt.Fprintf(w, "  received per %s window of sending, against the webhooks acknowledged in it: at least %.2f× (%d windows",
			window, s.LeastShare, len(s.Acked))
		if len(s.Acked) <= shownWindows {
			fmt.Fprintf(w, "; received %v, acknowledged %v", s.Sent, s.Acked)
		}
		fmt.Fprintln(w, ")")
	}
}
