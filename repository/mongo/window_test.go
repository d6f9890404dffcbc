package mongo

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// TestWindowPlan_CoversTheRangeOnceInOrder checks the windows of walks in
// both directions: each starts where the one before ended, the first is
// open on the filter's side (descending) or before a hinted start (when
// asked), the last is open beyond the end, and the walk reaches the end in
// about log4(range/width) windows, saturating instead of overflowing.
func TestWindowPlan_CoversTheRangeOnceInOrder(t *testing.T) {
	tests := []windowPlan{
		{start: 1_000_000, end: 0, desc: true, width: 10},
		{start: 1_000_000, end: 999_999, desc: true, width: 10},
		{start: 1_000_000, end: 500, desc: true, width: 1_000_000_000},
		{start: math.MaxUint64, end: 0, desc: true, width: 1},
		{start: 5, end: 0, desc: true, width: math.MaxUint64},
		{start: 0, end: math.MaxUint64, width: 1 << 40},
		{start: 100, end: 1000, width: 3, openStart: true},
		{start: math.MaxUint64 - 10, end: math.MaxUint64, width: 4},
		{start: 7, end: 9, width: math.MaxUint64, openStart: true},
		// with an edge: a gap crossed in one window, then windows from it
		windowPlan{start: 1_000_000, end: 0, desc: true, width: 10}.withEdge(400_000, true),
		windowPlan{start: 100, end: 1_000_000, width: 3, openStart: true}.withEdge(900_000, true),
		windowPlan{start: 0, end: math.MaxUint64, width: 1 << 10}.withEdge(1<<62, true),
		// an edge outside the range is no edge
		windowPlan{start: 1_000_000, end: 500, desc: true, width: 10}.withEdge(100, true),
	}
	for _, p := range tests {
		var ws []window
		for i := 0; ; i++ {
			if i > 70 {
				t.Fatalf("%+v: no last window after 70", p)
			}
			w := p.window(i)
			ws = append(ws, w)
			if w.last {
				break
			}
		}
		first, last := ws[0], ws[len(ws)-1]
		if p.desc && (!first.noHi || !last.noLo) || !p.desc && (first.noLo != p.openStart || !last.noHi) {
			t.Errorf("%+v: first %+v, last %+v: wrong open sides", p, first, last)
		}
		for i := 1; i < len(ws); i++ {
			prev, w := ws[i-1], ws[i]
			if p.desc && (w.noHi || prev.noLo || w.hi != prev.lo) || !p.desc && (w.noLo || prev.noHi || w.lo != prev.hi) {
				t.Errorf("%+v: window %d %+v does not continue %+v", p, i, w, prev)
			}
		}
		if p.hasEdge && (p.desc && ws[0].lo != p.edge || !p.desc && ws[0].hi != p.edge) {
			t.Errorf("%+v: the first window %+v does not reach the edge", p, ws[0])
		}
		dist := float64(p.from()) - float64(p.end)
		if !p.desc {
			dist = -dist
		}
		bound := math.Max(math.Log(max(dist, 1)/float64(max(p.width, 1)))/math.Log(windowGrowth), 0) + 2
		if p.hasEdge {
			bound++
		}
		if float64(len(ws)) > bound {
			t.Errorf("%+v: %d windows, want at most %.0f", p, len(ws), bound)
		}
	}
}

// TestWalkWindows_FindsWhatOneSortedQueryFinds runs walks over keys of
// random, bursty distributions against an in-memory query, and compares
// each page with the first keys of one sorted query over everything.
func TestWalkWindows_FindsWhatOneSortedQueryFinds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 200 {
		var keys []uint64
		base := uint64(1) << 40
		for range r.IntN(300) {
			switch r.IntN(3) {
			case 0: // a burst
				keys = append(keys, base+uint64(r.IntN(50)))
			case 1:
				keys = append(keys, base+uint64(r.IntN(1<<20)))
			default:
				keys = append(keys, base+uint64(r.Int64N(1<<38)))
			}
		}
		slices.Sort(keys)
		desc := run%2 == 0
		want := 1 + r.IntN(20)
		var from uint64
		if len(keys) > 0 {
			from = keys[r.IntN(len(keys))]
		}
		plan := windowPlan{start: from, desc: desc, width: 1 + uint64(r.IntN(1000))}
		var expect []uint64
		if desc {
			plan.end = base - 1
			for i := len(keys) - 1; i >= 0 && len(expect) < want; i-- {
				if keys[i] < from {
					expect = append(expect, keys[i])
				}
			}
		} else {
			plan.end = math.MaxUint64
			for _, k := range keys {
				if k >= from && len(expect) < want {
					expect = append(expect, k)
				}
			}
		}
		query := func(w window, limit int) ([]uint64, error) {
			var got []uint64
			in := func(k uint64) bool {
				return (w.noLo || k >= w.lo) && (w.noHi || k < w.hi) && (desc && k < from || !desc && k >= from)
			}
			if desc {
				for i := len(keys) - 1; i >= 0 && len(got) < limit; i-- {
					if in(keys[i]) {
						got = append(got, keys[i])
					}
				}
			} else {
				for _, k := range keys {
					if in(k) && len(got) < limit {
						got = append(got, k)
					}
				}
			}
			return got, nil
		}
		got, _, err := walkWindows(&plan, want, nil, query)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > want {
			got = got[:want]
		}
		if !slices.Equal(got, expect) {
			t.Fatalf("run %d (%+v, want %d): walk = %v, one query = %v", run, plan, want, got, expect)
		}
	}
}

func TestFirstWidth_HoldsAboutTwoPages(t *testing.T) {
	for _, tc := range []struct {
		want    int
		density float64
		w       uint64
	}{
		{51, 0.5, 204},          // two pages at half a match per key
		{51, 0, math.MaxUint64}, // nothing found last time: one window
		{51, 1e-300, 1 << 40},   // wider than the widest: the widest
		{10, 1000, 1},           // at least one key
	} {
		if got := firstWidth(tc.want, tc.density, map[bool]uint64{true: math.MaxUint64, false: 1 << 40}[tc.w == math.MaxUint64]); got != tc.w {
			t.Errorf("firstWidth(%d, %g) = %d, want %d", tc.want, tc.density, got, tc.w)
		}
	}
}

func TestKeys_KeepTheOrderOfTimesAndIDs(t *testing.T) {
	times := []time.Time{time.UnixMilli(-5), time.UnixMilli(0), time.UnixMilli(3), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for i := 1; i < len(times); i++ {
		if timeKey(times[i-1]) >= timeKey(times[i]) || !keyTime(timeKey(times[i])).Equal(times[i]) {
			t.Errorf("timeKey of %v and %v out of order, or not reversible", times[i-1], times[i])
		}
	}
	a, b := docID("user_a"), docID("user_b")
	if (idKey(a) < idKey(b)) != (a.Hex() < b.Hex()) || keyID(idKey(a)).Hex() > a.Hex() {
		t.Errorf("idKey does not keep the order of ids, or keyID is not the smallest id of a key")
	}
}

// TestWalkWindows_EachWindowHoldsAboutAPage walks keys spread evenly with
// the first window sized from their density, as a walk after the first
// is: an engine that sorts every match of a query sorts about two pages,
// not the range, and the first window holds the page (on MongoDB, one
// query, as without windows).
func TestWalkWindows_EachWindowHoldsAboutAPage(t *testing.T) {
	const n, every = 100_000, 1_000 // keys 0, 1000, 2000…
	for _, want := range []int{2, 51, 501} {
		for _, start := range []uint64{n * every, n * every / 2, 3 * every * uint64(want)} {
			plan := windowPlan{start: start, desc: true, width: firstWidth(want, 1.0/every, math.MaxUint64)}
			most, windows := 0, 0
			query := func(w window, limit int) ([]uint64, error) {
				windows++
				var got []uint64
				matches := 0
				for k := int64(start) - 1; k >= 0; k-- {
					key := uint64(k)
					if key%every != 0 || (!w.noLo && key < w.lo) || (!w.noHi && key >= w.hi) {
						continue
					}
					matches++
					if len(got) < limit {
						got = append(got, key)
					}
				}
				most = max(most, matches)
				return got, nil
			}
			if _, _, err := walkWindows(&plan, want, nil, query); err != nil {
				t.Fatal(err)
			}
			if most > 2*want+1 || windows > 1 && start > 2*every*uint64(want) {
				t.Errorf("want %d from %d: %d windows, the largest with %d matches; want 1 window of about 2 pages", want, start, windows, most)
			}
		}
	}
}

// TestWindowFilters_OneBoundASide: the filter of a window of the change
// feed, and of a page of _id after a cursor, has one bound on each side
// of its field (the narrower), not the window's and the filter's both:
// with two, the DocumentDB engines scanned the index between the wider
// ones (33 ms for an empty window of 100k users, against 8 ms).
func TestWindowFilters_OneBoundASide(t *testing.T) {
	until := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feed, _, err := changesFilter(models.ChangeFilter{Since: until.Add(-time.Hour), Until: until, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []window{
		{lo: timeKey(until.Add(-time.Minute)), hi: timeKey(until.Add(-time.Second))},
		{lo: timeKey(until.Add(-2 * time.Hour)), hi: timeKey(until.Add(time.Hour))},
		{noLo: true, noHi: true},
	} {
		r := changesWindowFilter(feed, w)[0].Value.(bson.D)
		if len(r) != 2 || r[0].Key != "$gte" || (r[1].Key != "$lt" && r[1].Key != "$lte") {
			t.Errorf("feed window %+v: updatedAt %v, want one lower and one upper bound", w, r)
		}
	}
	cursor := bson.NewObjectID().Hex()
	for _, w := range []window{{lo: 0, hi: math.MaxUint64 / 2}, {lo: math.MaxUint64 - 5, hi: math.MaxUint64}, allKeys} {
		f, err := withIDRange(bson.D{}, cursor, w)
		if err != nil {
			t.Fatal(err)
		}
		r := f[0].Value.(bson.D)
		lower := 0
		for _, e := range r {
			if e.Key == "$gt" || e.Key == "$gte" {
				lower++
			}
		}
		if lower != 1 {
			t.Errorf("_id window %+v after a cursor: %v, want one lower bound", w, r)
		}
	}
}
