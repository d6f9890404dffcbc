package clerk

import (
	"time"

	"golang.org/x/time/rate"
)

// Clerk's Backend API allows 100 requests per 10 s on development
// instances (1,000 on production ones); a process stays within the lower
// one by default.
const (
	DefaultRate = 100
	DefaultPer  = 10 * time.Second
)

// NewLimiter returns a full token bucket that allows n requests at once,
// then one every per/n.
func NewLimiter(n int, per time.Duration) *rate.Limiter {
	n = max(n, 1)
	return rate.NewLimiter(rate.Every(per/time.Duration(n)), n)
}
