package sync

import (
	"context"
	"testing"
	"time"
)

func TestNextWait_BackgroundWorkTakesAtMostATenthOfTheTime(t *testing.T) {
	for _, tc := range []struct{ interval, took, want time.Duration }{
		{30 * time.Second, 10 * time.Millisecond, 30 * time.Second},
		{30 * time.Second, 3 * time.Second, 30 * time.Second},
		{30 * time.Second, 10 * time.Second, 90 * time.Second},
		{15 * time.Second, time.Minute, 9 * time.Minute},
	} {
		if got := nextWait(tc.interval, tc.took); got != tc.want {
			t.Errorf("nextWait(%s, %s) = %s, want %s", tc.interval, tc.took, got, tc.want)
		}
	}
}

func TestLoop_RunsAtOnceAndStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	passes := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, time.Hour, func(context.Context) {
			passes++
			cancel()
		})
	}()
	<-done
	if passes != 1 {
		t.Errorf("passes = %d, want 1 (at once, then none after the context ended)", passes)
	}
}
