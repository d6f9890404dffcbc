package mongo

import (
	"context"
	"math/bits"
	"sync"
	"time"
)

// share paces outbound webhooks' writes (a relay's batch, a batch of
// settles) by the engine's answer time, so that they take what the engine
// has to spare and yield it to Clerk's deliveries when it has none: a
// MongoDB store has no single writer to share out, and a fixed rate
// cannot give both a fast drain when the engine is idle and the webhook
// path its throughput during a burst.
//
// Each write's time is measured against the least seen lately for writes
// of about as many documents (base, per power of two; it drifts up slowly
// so that a one-off fast answer does not hold it down). A write that took over slowAfter times base
// found the engine busy with other work: the pause before the next write
// doubles (from minPause, up to maxPause); one that did not halves it.
// The pause never grows past maxPause: outbound writes never stop.
type share struct {
	mu    sync.Mutex
	base  [bits.UintSize + 1]time.Duration // by bits.Len of the documents written
	pause time.Duration
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

const (
	slowAfter = 3
	minPause  = 2 * time.Millisecond
	maxPause  = 500 * time.Millisecond
	// baseDrift is how much base rises at each write (a 1024th), so that
	// it follows the engine's answer time as the data grows.
	baseDrift = 1024
)

func newShare() *share {
	return &share{now: time.Now, sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// do runs write, of n documents, after the pause the last writes set,
// and sets the next pause from its time.
func (s *share) do(ctx context.Context, n int, write func() error) error {
	s.mu.Lock()
	pause := s.pause
	s.mu.Unlock()
	if pause > 0 {
		if err := s.sleep(ctx, pause); err != nil {
			return err
		}
	}
	start := s.now()
	err := write()
	s.observe(s.now().Sub(start), n)
	return err
}

// observe sets the next pause from a write of n documents that took took.
func (s *share) observe(took time.Duration, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	base := &s.base[bits.Len(uint(max(n, 1)))]
	if *base == 0 || took < *base {
		*base = took
	} else {
		*base += *base/baseDrift + 1
	}
	if took > slowAfter**base {
		s.pause = min(max(2*s.pause, minPause), maxPause)
	} else {
		s.pause /= 2
	}
}

// Pause is the pause before the next outbound write (tests).
func (s *share) Pause() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pause
}
