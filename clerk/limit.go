package clerk

import (
	"context"
	stdsync "sync"
	"time"
)

// Clerk's Backend API allows 100 requests per 10 s on development
// instances (1,000 on production ones); a process stays within the lower
// one by default.
const (
	DefaultRate = 100
	DefaultPer  = 10 * time.Second
)

// Limiter is a token bucket: up to n requests at once, then one every
// per/n. Its zero value is not usable; see NewLimiter.
type Limiter struct {
	mu     stdsync.Mutex
	every  time.Duration // time to earn one token
	burst  float64
	tokens float64
	at     time.Time // when tokens was last brought up to date
	now    func() time.Time
}

// NewLimiter returns a full bucket that allows n requests per period.
func NewLimiter(n int, per time.Duration) *Limiter {
	n = max(n, 1)
	return &Limiter{every: per / time.Duration(n), burst: float64(n), tokens: float64(n), at: time.Now(), now: time.Now}
}

// Wait takes a token, waiting until one is earned. It fails with ctx's
// error when ctx ends first; a token it waited for is then not taken.
func (l *Limiter) Wait(ctx context.Context) error {
	for {
		l.mu.Lock()
		now := l.now()
		l.tokens = min(l.burst, l.tokens+float64(now.Sub(l.at))/float64(l.every))
		l.at = now
		if l.tokens >= 1 {
			l.tokens--
			l.mu.Unlock()
			return nil
		}
		wait := time.Duration((1 - l.tokens) * float64(l.every))
		l.mu.Unlock()
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return context.DeadlineExceeded
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}
