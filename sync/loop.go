package sync

import (
	"context"
	"time"
)

// busyShare bounds the share of its time a background loop spends working:
// after a pass that took d, the next one starts no sooner than
// (busyShare-1)·d later.
const busyShare = 10

// nextWait is how long a loop that runs every interval waits after a pass
// that took took.
func nextWait(interval, took time.Duration) time.Duration {
	return max(interval, (busyShare-1)*took)
}

// Loop runs pass at once, then again every interval until ctx is done, but
// never spends more than about a tenth of its time in pass: after a pass
// that took d, the next starts no sooner than 9·d later. On both stores a
// pass is a few index reads and this changes nothing; a pass that a slow
// disk or a slow database makes long (the sweep, retention, erasure, the
// event counts) runs less often instead of taking the machine from the
// webhooks.
func Loop(ctx context.Context, interval time.Duration, pass func(context.Context)) {
	for {
		start := time.Now()
		pass(ctx)
		t := time.NewTimer(nextWait(interval, time.Since(start)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
