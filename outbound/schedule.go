package outbound

import (
	"math"
	"time"
)

// Schedule is when each attempt of a delivery happens, after the attempt
// before it failed: Svix's schedule. Schedule[0] is the first attempt (at
// once); a delivery has len(Schedule) attempts in all, over about 28 hours.
var Schedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// MaxRetryAfter bounds the wait an endpoint may ask for with Retry-After.
const MaxRetryAfter = 24 * time.Hour

// jitterSpread is how far either way of its step an attempt may move.
const jitterSpread = 0.1

// NextAttempt says when attempt number attempts+1 happens after attempts
// failed attempts (attempts >= 1), given the last Result's RetryAfter:
// Schedule[attempts] after now, moved by up to ±10% (jitter, in [0, 1),
// picks where: 0 is 10% early, 0.5 on time, near 1 10% late), and never
// before now+retryAfter (clamped to [0, MaxRetryAfter]). ok is false when
// the schedule is exhausted (attempts >= len(Schedule)): the delivery has
// failed for good. An attempts below 1 is taken as 0: the first attempt,
// at once.
func NextAttempt(attempts int, now time.Time, retryAfter time.Duration, jitter float64) (at time.Time, ok bool) {
	if attempts >= len(Schedule) {
		return time.Time{}, false
	}
	if attempts < 0 {
		attempts = 0
	}
	if math.IsNaN(jitter) || jitter < 0 {
		jitter = 0
	}
	if jitter > 1 {
		jitter = 1
	}
	step := Schedule[attempts]
	at = now.Add(time.Duration(float64(step) * (1 - jitterSpread + 2*jitterSpread*jitter)))
	retryAfter = min(max(retryAfter, 0), MaxRetryAfter)
	if earliest := now.Add(retryAfter); earliest.After(at) {
		at = earliest
	}
	return at, true
}
