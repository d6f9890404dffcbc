package outbound

import (
	"math"
	"testing"
	"time"
)

func TestNextAttempt_FollowsTheScheduleWithinTenPercent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for attempts := 1; attempts < len(Schedule); attempts++ {
		step := Schedule[attempts]
		for _, c := range []struct {
			jitter float64
			want   time.Duration
		}{
			{0, step * 9 / 10},
			{0.5, step},
			{math.Nextafter(1, 0), step * 11 / 10},
		} {
			at, ok := NextAttempt(attempts, now, 0, c.jitter)
			if !ok {
				t.Fatalf("attempts %d: schedule exhausted", attempts)
			}
			// Float arithmetic may land a nanosecond or so either way.
			if d := at.Sub(now) - c.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("attempts %d, jitter %v: after %v, want %v", attempts, c.jitter, at.Sub(now), c.want)
			}
			if lo, hi := step*9/10, step*11/10; at.Sub(now) < lo-time.Microsecond || at.Sub(now) > hi {
				t.Errorf("attempts %d, jitter %v: after %v, outside %v..%v", attempts, c.jitter, at.Sub(now), lo, hi)
			}
		}
	}
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, w := range want {
		if at, _ := NextAttempt(i+1, now, 0, 0.5); at.Sub(now) != w {
			t.Errorf("after %d failed attempts: %v, want %v", i+1, at.Sub(now), w)
		}
	}
}

func TestNextAttempt_ALongerRetryAfterWins(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		attempts   int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 120 * time.Second, 120 * time.Second}, // step 5s
		{2, 120 * time.Second, 5 * time.Minute},   // step 5m is later
		{3, time.Hour, time.Hour},                 // step 30m
		{1, -time.Hour, 5 * time.Second},          // a negative wait is none
		{1, 100 * time.Hour, MaxRetryAfter},       // clamped to a day
		{7, 11 * time.Hour, 11 * time.Hour},       // step 10h
	}
	for _, c := range cases {
		at, ok := NextAttempt(c.attempts, now, c.retryAfter, 0.5)
		if !ok || at.Sub(now) != c.want {
			t.Errorf("attempts %d, Retry-After %v: %v (ok %v), want %v", c.attempts, c.retryAfter, at.Sub(now), ok, c.want)
		}
	}
}

func TestNextAttempt_TheScheduleRunsOut(t *testing.T) {
	now := time.Now()
	for _, attempts := range []int{len(Schedule), len(Schedule) + 1, math.MaxInt} {
		if at, ok := NextAttempt(attempts, now, time.Minute, 0.5); ok || !at.IsZero() {
			t.Errorf("attempts %d: %v, %v; want the schedule exhausted", attempts, at, ok)
		}
	}
	if _, ok := NextAttempt(len(Schedule)-1, now, 0, 0.5); !ok {
		t.Error("the last attempt of the schedule is not given")
	}
}

func TestNextAttempt_JitterOutsideItsRangeIsBounded(t *testing.T) {
	now := time.Now()
	for _, j := range []float64{-1, 1, 2, math.Inf(1), math.Inf(-1), math.NaN()} {
		at, ok := NextAttempt(4, now, 0, j)
		if d := at.Sub(now); !ok || d < 2*time.Hour*9/10 || d > 2*time.Hour*11/10 {
			t.Errorf("jitter %v: after %v, want within 10%% of 2h", j, d)
		}
	}
	if at, ok := NextAttempt(0, now, 0, 0.5); !ok || !at.Equal(now) {
		t.Errorf("no failed attempt yet: %v, want now", at)
	}
}
