package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestLoad_ASteadyStreamIsSpacedAtItsRateAndReportsTheBacklog: with
// -rate, the webhook's requests go out no faster than the rate asks, and
// the outbound section reports the backlog read while sending and, per
// window, what the endpoint received against what was acknowledged.
func TestLoad_ASteadyStreamIsSpacedAtItsRateAndReportsTheBacklog(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Users, cfg.Updates, cfg.Duplicates, cfg.Shuffled, cfg.Reads = 30, 1, 0, 0, 0
	cfg.Endpoint, cfg.AdminKey, cfg.EndpointWait = true, testAdminKey, 2*time.Minute
	cfg.Rate = 10 // 60 requests: at least 5.9 s
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.OK() {
		t.Fatalf("check failed: end state %q, outbound %q", rep.Check.Problems, rep.Outbound.Problems)
	}
	if rep.Elapsed < 59*time.Second/10 {
		t.Errorf("60 requests at 10 a second were sent in %s, want at least 5.9 s", rep.Elapsed)
	}
	st := rep.Outbound.Steady
	if st == nil || len(st.Backlog) < 4 || len(st.Acked) != int(rep.Elapsed/window) || st.LeastShare < 0 {
		t.Fatalf("steady = %+v; want a backlog read each second of sending and a whole window or more", st)
	}
	acked := 0
	for _, a := range st.Acked {
		acked += a
	}
	if acked == 0 || acked > 60 {
		t.Errorf("acknowledged per window %v, want some of the 60", st.Acked)
	}
	for _, line := range []string{"backlog while sending, read every 1s: ", "received per 5s window of sending"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("printed report has no %q", line)
		}
	}
}

// TestSteady_TheTrendIsTheBacklogsSlopeAndGrewWhenItAddsUpToASecondOfWebhooks
// checks the sums on readings made up for it.
func TestSteady_TheTrendIsTheBacklogsSlopeAndGrewWhenItAddsUpToASecondOfWebhooks(t *testing.T) {
	start := time.Now()
	ws := func(per []int) *windows {
		w := newWindows(start)
		for i, n := range per {
			for range n {
				w.add(start.Add(time.Duration(i)*window + time.Second))
			}
		}
		return w
	}
	for _, tc := range []struct {
		name     string
		backlog  []int64
		acked    []int
		received []int
		trend    float64
		grew     bool
		least    float64
	}{
		{"flat", []int64{5, 7, 5, 7, 5, 7, 5, 7, 5, 7}, []int{50, 50}, []int{50, 48}, 0.0606, false, 0.96},
		{"growing by 20 a second at 10 acknowledged a second", []int64{0, 20, 40, 60, 80, 100, 120, 140, 160, 180},
			[]int{50, 50}, []int{5, 0}, 20, true, 0},
		{"drained", []int64{90, 80, 70, 60, 50, 40, 30, 20, 10, 0}, []int{50, 50}, []int{60, 60}, -10, false, 1.2},
		{"nothing acknowledged", []int64{0}, []int{0, 0}, []int{0, 0}, 0, false, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := steady(tc.backlog, ws(tc.acked), ws(tc.received), 10*time.Second)
			if d := s.Trend - tc.trend; d > 0.01 || d < -0.01 || s.Grew != tc.grew {
				t.Errorf("trend %.3f, grew %v; want %.3f, %v", s.Trend, s.Grew, tc.trend, tc.grew)
			}
			if d := s.LeastShare - tc.least; d > 0.001 || d < -0.001 {
				t.Errorf("least share %.3f, want %.3f", s.LeastShare, tc.least)
			}
		})
	}
}

// TestPacer_SlotsAreSpacedByTheRate: the i-th wait ends no earlier than
// i/rate after the first.
func TestPacer_SlotsAreSpacedByTheRate(t *testing.T) {
	p := newPacer(200)
	for range 21 {
		if !p.wait(context.Background()) {
			t.Fatal("wait ended without its slot")
		}
	}
	if took := time.Since(p.start); took < 100*time.Millisecond {
		t.Errorf("21 slots at 200 a second took %s, want at least 100ms", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.n.Add(1000) // far ahead
	if p.wait(ctx) {
		t.Error("a wait in an ended context reported its slot")
	}
}
