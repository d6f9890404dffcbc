package mongo

import (
	"context"
	"testing"
	"time"
)

// TestShare_OutboundWritesYieldToABusyEngineAndNeverStop: writes that take
// as long as the least seen keep no pause; once they take over slowAfter
// times as long (the engine busy with Clerk's writes), the pause doubles
// up to maxPause, never more; and it halves again once they are fast. A
// write's time is compared with writes of about as many documents.
func TestShare_OutboundWritesYieldToABusyEngineAndNeverStop(t *testing.T) {
	s := newShare()
	var slept []time.Duration
	s.sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
	now := time.Unix(0, 0)
	s.now = func() time.Time { return now }
	write := func(n int, took time.Duration) {
		t.Helper()
		if err := s.do(context.Background(), n, func() error { now = now.Add(took); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	write(1, time.Millisecond)
	write(64, 5*time.Millisecond) // a batch takes longer: not slow
	if p := s.Pause(); p != 0 {
		t.Fatalf("pause after writes at the engine's pace = %v, want none", p)
	}
	for range 20 {
		write(64, 100*time.Millisecond)
	}
	if p := s.Pause(); p != maxPause {
		t.Fatalf("pause after 20 slow writes = %v, want %v (bounded: outbound never stops)", p, maxPause)
	}
	if len(slept) == 0 || slept[0] != minPause {
		t.Errorf("the pauses slept = %v, want them to start at %v", slept, minPause)
	}
	for range 10 {
		write(64, 5*time.Millisecond)
	}
	if p := s.Pause(); p > maxPause/512 {
		t.Errorf("pause after 10 fast writes = %v, want it halved each time", p)
	}
}
