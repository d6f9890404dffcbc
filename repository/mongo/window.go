package mongo

import (
	"math"
	"math/bits"
	stdsync "sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Bounded pages.
//
// A page is the first limit+1 matches of a filter in the order of an
// index. MongoDB reads them in index order and stops there, whatever the
// number of matches. The DocumentDB-based engines (FerretDB 2, Cosmos DB
// vCore) do not read an index in order for a sort: they find every match
// through the index and sort them all, so a page of the whole event log
// costs as much as the log (measured: 53 ms at 5k events, 5.3 s at 500k).
//
// So a page walks its index range in windows of the sort key, nearest
// first, each window a range query sorted and limited as the page is:
// the engine sorts at most the window's matches. The first window is sized
// from the density of matches the walk met last time, to hold about two
// pages; each next window is windowGrowth times wider, until the page is
// full or a window reaches the end of the range, which is then unbounded
// on that side (the rest of the filter still bounds it). On MongoDB the
// first window usually holds the page, and a window is a range of the
// same index read in the same order: the bounded form costs nothing.
//
// Keys are uint64: a time as its Unix milliseconds shifted to unsigned
// (timeKey), an _id by its first 8 bytes (idKey; ids are hashes, spread
// evenly over that space).

// windowGrowth is how much wider each window is than the one before.
const windowGrowth = 4

// windowPlan is a walk of keys from start towards end, in windows.
type windowPlan struct {
	start, end uint64
	desc       bool   // from start down to end; else up
	width      uint64 // of the first window, at least 1
	// openStart: the first window is unbounded on the start side. An
	// ascending walk from a start that is only a hint (the oldest key
	// seen) uses it, so that nothing before the hint is missed.
	openStart bool
	// edge, when hasEdge, is where the matches begin, as the last walk of
	// the kind found them (densities.edge): window 0 reaches from start to edge
	// in one, whatever it holds (usually little: what arrived since), and
	// the walk goes on from edge in windows of width. A walk from a far
	// start (the log from now, the change feed from long ago) so crosses a
	// gap in one window, instead of windows growing across it until one
	// holds every match beyond it, which an engine without index-ordered
	// sorts sorts whole. It is a hint: it moves window
	// bounds, never what the walk reads in all.
	edge    uint64
	hasEdge bool
}

// withEdge is p with the hint edge (see windowPlan.edge), when edge lies
// strictly between p's start and end; else p as it is.
func (p windowPlan) withEdge(edge uint64, ok bool) windowPlan {
	if ok && (p.desc && edge < p.start && edge > p.end || !p.desc && edge > p.start && edge < p.end) {
		p.edge, p.hasEdge = edge, true
	}
	return p
}

// from is where p's windows of width begin: its edge, or its start.
func (p windowPlan) from() uint64 {
	if p.hasEdge {
		return p.edge
	}
	return p.start
}

// window is the keys [lo, hi) of one window; noLo and noHi say that a
// side is unbounded. last is the walk's last window.
type window struct {
	lo, hi     uint64
	noLo, noHi bool
	last       bool
}

// window returns the i-th window of p (0 first). Window i ends where
// window i-1 ended plus width×growth^i: the walk covers 1, 5, 21, 85…
// widths. Its far side is unbounded once it would reach past end.
func (p windowPlan) window(i int) window {
	if p.hasEdge {
		if i == 0 { // [start, edge), or [edge, start) going down
			if p.desc {
				return window{lo: p.edge, noHi: true}
			}
			return window{lo: p.start, noLo: p.openStart, hi: p.edge}
		}
		rest := p
		rest.hasEdge, rest.start, rest.openStart = false, p.edge, false
		w := rest.window(i - 1)
		if p.desc && i == 1 {
			w.hi, w.noHi = p.edge, false
		}
		return w
	}
	width := max(p.width, 1)
	near, far := span(width, i-1), span(width, i)
	var w window
	if p.desc {
		// [start-far, start-near); the first window's upper side is the
		// filter's own bound.
		w.hi, w.noHi = sub(p.start, near), i == 0
		lo, under := subOK(p.start, far)
		w.lo = lo
		if under || lo <= p.end || far == math.MaxUint64 {
			w.lo, w.noLo, w.last = 0, true, true
		}
		return w
	}
	w.lo, w.noLo = add(p.start, near), i == 0 && p.openStart
	hi, over := addOK(p.start, far)
	w.hi = hi
	if over || hi > p.end || far == math.MaxUint64 {
		w.hi, w.noHi, w.last = 0, true, true
	}
	return w
}

// span is the keys covered by windows 0..i: width×(growth^(i+1)-1)/(growth-1),
// saturated at MaxUint64; 0 for i < 0.
func span(width uint64, i int) uint64 {
	if i < 0 {
		return 0
	}
	total, w := uint64(0), width
	for j := 0; j <= i; j++ {
		var over bool
		if total, over = addOK(total, w); over {
			return math.MaxUint64
		}
		hi, lo := bits.Mul64(w, windowGrowth)
		if hi != 0 {
			w = math.MaxUint64
		} else {
			w = lo
		}
	}
	return total
}

func addOK(a, b uint64) (uint64, bool) {
	s, c := bits.Add64(a, b, 0)
	return s, c != 0
}

func subOK(a, b uint64) (uint64, bool) {
	d, c := bits.Sub64(a, b, 0)
	return d, c != 0
}

func add(a, b uint64) uint64 {
	if s, over := addOK(a, b); !over {
		return s
	}
	return math.MaxUint64
}

func sub(a, b uint64) uint64 {
	if d, under := subOK(a, b); !under {
		return d
	}
	return 0
}

// timeKey is t's key: its Unix milliseconds, shifted so that order holds.
func timeKey(t time.Time) uint64 { return uint64(t.UnixMilli()) ^ (1 << 63) }

// keyTime is the time of key k.
func keyTime(k uint64) time.Time { return time.UnixMilli(int64(k ^ (1 << 63))).UTC() }

// idKey is the key of an _id: its first 8 bytes.
func idKey(id bson.ObjectID) uint64 {
	var k uint64
	for _, b := range id[:8] {
		k = k<<8 | uint64(b)
	}
	return k
}

// keyID is the smallest _id of key k.
func keyID(k uint64) bson.ObjectID {
	var id bson.ObjectID
	for i := 7; i >= 0; i-- {
		id[i] = byte(k)
		k >>= 8
	}
	return id
}

// idRange is a window of _id keys as the operators of a range filter on
// _id ([lo, hi)).
func (w window) idRange() bson.D {
	var r bson.D
	if !w.noLo {
		r = append(r, bson.E{Key: "$gte", Value: keyID(w.lo)})
	}
	if !w.noHi {
		r = append(r, bson.E{Key: "$lt", Value: keyID(w.hi)})
	}
	return r
}

// densities remembers, per kind of walk, how many matches a key held the
// last time (an exponential average): what sizes the next first window.
// It is a hint: a wrong one costs windows, never a missed match.
type densities struct {
	mu       stdsync.Mutex
	m        map[string]float64
	edges    map[string]uint64 // see edge
	fewKinds map[string]bool   // see few
}

// maxHintKinds bounds each map of densities: a kind of walk may come from
// a request (the subscriptions' status filter), so a new kind past the
// bound is not remembered; its walks start from their defaults.
const maxHintKinds = 256

// roomFor reports whether m may hold kind: it does, or it has room.
func roomFor[V any](m map[string]V, kind string) bool {
	_, ok := m[kind]
	return ok || len(m) < maxHintKinds
}

// get returns the density of kind, or ok=false if no walk measured it.
func (d *densities) get(kind string) (density float64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	density, ok = d.m[kind]
	return density, ok
}

// note records that a walk of kind found n matches in covered keys.
func (d *densities) note(kind string, n int, covered uint64) {
	if covered == 0 {
		return
	}
	measured := float64(n) / float64(covered)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]float64{}
	}
	if !roomFor(d.m, kind) {
		return
	}
	if old, ok := d.m[kind]; ok {
		measured = (old + measured) / 2
	}
	d.m[kind] = measured
}

// edge returns where the matches of kind began the last time
// (windowPlan.edge), if a walk noted it. Like a density, a hint.
func (d *densities) edge(kind string) (uint64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.edges[kind]
	return k, ok
}

// noteEdge records that the matches of a walk of kind began at key k.
func (d *densities) noteEdge(kind string, k uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.edges == nil {
		d.edges = map[string]uint64{}
	}
	if roomFor(d.edges, kind) {
		d.edges[kind] = k
	}
}

// few reports whether the last first page of kind found fewer matches
// than it asked for in its whole range (see Events.List).
func (d *densities) few(kind string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fewKinds[kind]
}

// noteFew records whether a first page of kind found fewer matches than
// it asked for in its whole range.
func (d *densities) noteFew(kind string, few bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fewKinds == nil {
		d.fewKinds = map[string]bool{}
	}
	if roomFor(d.fewKinds, kind) {
		d.fewKinds[kind] = few
	}
}

// spanStart is where the matches a walk of plan found begin, for their
// density: the first match's key (first, when found says there is one),
// so that a gap the walk crossed before them does not thin it; else
// where the walk's windows began.
func spanStart(plan windowPlan, found bool, first func() uint64) uint64 {
	if found {
		return first()
	}
	return plan.from()
}

// firstWidth is the width of a first window that should hold want
// matches (twice that, for the variance) at density; at most maxWidth, and
// maxWidth when nothing matched last time (a walk of one window).
func firstWidth(want int, density float64, maxWidth uint64) uint64 {
	if density <= 0 {
		return maxWidth
	}
	w := 2 * float64(want) / density
	if w >= float64(maxWidth) {
		return maxWidth
	}
	return max(uint64(w), 1)
}

// walkWindows runs query on the windows of plan, nearest first, until
// want results are found or the last window ran, and returns them in
// order with the key that the walk covered up to (for densities).
// beforeNext, if set, runs before every window after the first: it may
// move plan's end (a floor read only when the first window did not do).
func walkWindows[T any](plan *windowPlan, want int, beforeNext func() error,
	query func(w window, limit int) ([]T, error)) (found []T, windows int, err error) {
	for i := 0; ; i++ {
		if i > 0 && beforeNext != nil {
			if err := beforeNext(); err != nil {
				return nil, i, err
			}
		}
		w := plan.window(i)
		got, err := query(w, want-len(found))
		if err != nil {
			return nil, i, err
		}
		found = append(found, got...)
		if len(found) >= want || w.last {
			return found, i + 1, nil
		}
	}
}

// covered is the distance a walk from start covered to reach key k.
func covered(start, k uint64, desc bool) uint64 {
	if desc {
		return sub(start, k)
	}
	return sub(k, start)
}

// oldestCache keeps the oldest receivedAt of user_events once read: the
// floor of the event log's walks and the start of the sweep's. Events
// are rarely stored with an older receivedAt later, and a walk's last
// window is unbounded beyond it, so a stale floor costs a window at most.
type oldestCache struct {
	mu stdsync.Mutex
	at time.Time
}
