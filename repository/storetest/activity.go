package storetest

import (
	"context"
	"errors"
	"maps"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about the activity counts of the console's charts.

// testActivityAddsUp checks that every count lands in its minute and in
// its hour, that the hours are the sums of their minutes, and that a range
// reads only the buckets that start in it.
func testActivityAddsUp(t *testing.T, s repository.Store) {
	ctx := context.Background()
	h0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, a := range []struct {
		at   time.Time
		kind string
		n    int64
	}{
		{h0.Add(30 * time.Second), models.ActivityReceived, 3},
		{h0.Add(59 * time.Second), models.ActivityReceived, 2},
		{h0.Add(59 * time.Second), models.ActivityApplied, 4},
		{h0.Add(61 * time.Second), models.ActivityFailed, 1},
		{h0.Add(59*time.Minute + 59*time.Second), models.ActivityReceived, 7},
		{h0.Add(time.Hour), models.ActivityReceived, 11},
		{h0.Add(time.Hour), models.ActivityStale, 0}, // nothing to add
	} {
		if err := s.Activity().Add(ctx, a.at, a.kind, a.n); err != nil {
			t.Fatalf("Add(%v, %s, %d): %v", a.at, a.kind, a.n, err)
		}
	}
	minutes, err := s.Activity().Buckets(ctx, models.ActivityMinute, h0, h0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []models.ActivityBucket{
		{Start: h0, Counts: map[string]int64{"received": 5, "applied": 4}},
		{Start: h0.Add(time.Minute), Counts: map[string]int64{"failed": 1}},
		{Start: h0.Add(59 * time.Minute), Counts: map[string]int64{"received": 7}},
		{Start: h0.Add(time.Hour), Counts: map[string]int64{"received": 11}},
	}
	checkBuckets(t, "minutes", minutes, want)
	hours, err := s.Activity().Buckets(ctx, models.ActivityHour, h0, h0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "hours", hours, []models.ActivityBucket{
		{Start: h0, Counts: map[string]int64{"received": 12, "applied": 4, "failed": 1}},
		{Start: h0.Add(time.Hour), Counts: map[string]int64{"received": 11}},
	})
	mid, err := s.Activity().Buckets(ctx, models.ActivityMinute, h0.Add(time.Minute), h0.Add(59*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "minutes of [10:01, 10:59)", mid, want[1:2])
}

func checkBuckets(t *testing.T, what string, got, want []models.ActivityBucket) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %+v, want %+v", what, got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || got[i].Start.Location() != time.UTC || !maps.Equal(got[i].Counts, want[i].Counts) {
			t.Errorf("%s[%d] = %v %v, want %v %v (UTC)", what, i, got[i].Start, got[i].Counts, want[i].Start, want[i].Counts)
		}
	}
}

// testActivityConcurrentAdds adds to one bucket from many goroutines, as
// several instances flushing at once do.
func testActivityConcurrentAdds(t *testing.T, s repository.Store) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	const writers, adds = 8, 10
	var wg stdsync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range adds {
				if err := s.Activity().Add(ctx, at, models.ActivityReceived, 1); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, size := range []time.Duration{models.ActivityMinute, models.ActivityHour} {
		got, err := s.Activity().Buckets(ctx, size, at, at.Add(size))
		if err != nil {
			t.Fatal(err)
		}
		checkBuckets(t, size.String()+" buckets", got, []models.ActivityBucket{{Start: at, Counts: map[string]int64{"received": writers * adds}}})
	}
}

func testActivityRetention(t *testing.T, s repository.Store) {
	ctx := context.Background()
	old := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	later := old.Add(models.ActivityMinuteRetention + time.Hour)
	for _, at := range []time.Time{old, later} {
		if err := s.Activity().Add(ctx, at, models.ActivityReceived, 1); err != nil {
			t.Fatal(err)
		}
	}
	minutes, err := s.Activity().Buckets(ctx, models.ActivityMinute, old, later.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "minutes", minutes, []models.ActivityBucket{{Start: later, Counts: map[string]int64{"received": 1}}})
	hours, err := s.Activity().Buckets(ctx, models.ActivityHour, old, later.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	checkBuckets(t, "hours (kept "+models.ActivityHourRetention.String()+")", hours, []models.ActivityBucket{
		{Start: old, Counts: map[string]int64{"received": 1}},
		{Start: later, Counts: map[string]int64{"received": 1}},
	})
	if err := s.Activity().Add(ctx, old.Add(models.ActivityHourRetention+2*time.Hour), models.ActivityReceived, 1); err != nil {
		t.Fatal(err)
	}
	hours, err = s.Activity().Buckets(ctx, models.ActivityHour, old, old.Add(time.Hour))
	if err != nil || len(hours) != 0 {
		t.Errorf("hour buckets past %s = %+v, %v; want none", models.ActivityHourRetention, hours, err)
	}
}

func testActivityRefusesWhatIsNotAName(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, kind := range []string{"", "a.b", "$inc", "Received", "x y", "n.received", strings.Repeat("a", 33)} {
		if err := s.Activity().Add(ctx, t0, kind, 1); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("Add(%q) = %v, want ErrInvalid", kind, err)
		}
	}
	for _, size := range []time.Duration{time.Second, 15 * time.Minute, 24 * time.Hour} {
		if _, err := s.Activity().Buckets(ctx, size, t0, t0.Add(time.Hour)); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("Buckets(%s) = %v, want ErrInvalid", size, err)
		}
	}
}
