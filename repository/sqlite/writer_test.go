package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/sqlite"
)

// TestWriter_BackgroundWritesTakeTheirShareAndNeverWait: with more of
// Clerk's writes waiting than a transaction holds, and outbound's
// background writes beside them, each transaction runs the writes waiting
// first and then a quarter of its size of background writes: the
// background ones never wait for the others to run out.
func TestWriter_BackgroundWritesTakeTheirShareAndNeverWait(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	var gateOnce stdsync.Once
	s, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{MaxBatch: 8, WriteGate: func() {
		gateOnce.Do(func() { <-release }) // the first transaction waits for every write to be queued
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var (
		mu    stdsync.Mutex
		order []string
		wg    stdsync.WaitGroup
	)
	record := func(what string) func() {
		return func() { mu.Lock(); order = append(order, what); mu.Unlock() }
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = sqlite.Write(ctx, s, record("first")) }() // held by the gate
	for !s.Busy() {
		time.Sleep(time.Millisecond)
	}
	for i := range 40 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = sqlite.Write(ctx, s, record(fmt.Sprintf("w%d", i))) }()
	}
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = sqlite.WriteBackground(ctx, s, record(fmt.Sprintf("b%d", i))) }()
	}
	for s.Queued() < 44 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	// The first transaction ran "first" alone; the second takes 8 of the
	// waiting writes, then 2 background ones (a quarter of 8).
	second := order[1:11]
	bg := 0
	for i, w := range second {
		if w[0] == 'b' {
			bg++
			if i < 8 {
				t.Errorf("a background write ran before the writes waiting: %v", second)
			}
		}
	}
	if bg != 2 {
		t.Errorf("the second transaction ran %v: %d background writes, want 2 (its share) after 8 others", second, bg)
	}
}

// TestWriter_AHeavyBackgroundWriteWaitsForItsShareNotForTheOthers: a
// background write that weighs more than a transaction's share (a batch
// of settles, a relay's batch) runs once the share kept over the
// transactions begun by Clerk's writes reaches its weight: after some of
// them, never after all of them, and never ahead of its share.
func TestWriter_AHeavyBackgroundWriteWaitsForItsShareNotForTheOthers(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	var gateOnce stdsync.Once
	s, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{MaxBatch: 8, WriteGate: func() {
		gateOnce.Do(func() { <-release })
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var (
		mu    stdsync.Mutex
		order []string
		wg    stdsync.WaitGroup
	)
	record := func(what string) func() {
		return func() { mu.Lock(); order = append(order, what); mu.Unlock() }
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = sqlite.Write(ctx, s, record("first")) }()
	for !s.Busy() {
		time.Sleep(time.Millisecond)
	}
	for i := range 40 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = sqlite.Write(ctx, s, record(fmt.Sprintf("w%d", i))) }()
	}
	for s.Queued() < 40 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = sqlite.WriteBackgroundN(ctx, s, 6, record("heavy")) }()
	for s.Queued() < 41 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	// Each transaction of 8 waiting writes earns the background 2: the
	// heavy write (6) runs in the third of them, after 24.
	at := slices.Index(order, "heavy")
	if at != 1+24 {
		t.Errorf("the heavy background write ran after %d others, want 24 (its share reached in the third transaction of 8): %v", at-1, order)
	}
}
