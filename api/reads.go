package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	stdsync "sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/usersync/usersync/models"
)

// Defaults of the bounds on list reads (see Limits).
const (
	DefaultReads     = 8
	DefaultReadWait  = time.Second
	DefaultPageBytes = 4 << 20
)

// reads bounds the list reads (every list and change feed of users,
// organizations and memberships, and GET /v1/events): each holds a page in
// memory while the store reads it.
//
// A read takes one of the slots while its page is read from the store and
// encoded, and gives it back before the answer is written, so that a client
// slow to read its answers holds no slot. Slots are shared fairly between
// the keys that want them: while more keys hold or wait for slots than
// one, a key may hold at most ⌈slots ÷ those keys⌉, and a slot that comes
// free goes to the first waiter whose key is under that share. A key alone
// may use every slot. Each key may also have at most as many answers being
// written as there are slots, so that the encoded pages waiting for slow
// clients stay bounded (keys × slots × a page) without a slow client of
// one key holding anything another key needs.
type reads struct {
	max   int
	wait  time.Duration
	bytes int
	gauge *prometheus.GaugeVec // by state: reading, waiting, writing

	mu      stdsync.Mutex
	held    map[[32]byte]int // slots held per key; only keys holding some
	total   int              // slots held
	writing map[[32]byte]int // answers being written per key; only keys writing some
	waiters []*readWaiter    // in arrival order
	waiting map[[32]byte]int // waiters per key; only keys waiting
}

// readWaiter is one read waiting for a slot.
type readWaiter struct {
	key     [32]byte
	ready   chan struct{} // closed once granted
	granted bool
}

func newReads(l Limits, gauge *prometheus.GaugeVec) *reads {
	if l.Reads <= 0 {
		l.Reads = DefaultReads
	}
	if l.ReadWait <= 0 {
		l.ReadWait = DefaultReadWait
	}
	if l.PageBytes <= 0 {
		l.PageBytes = DefaultPageBytes
	}
	return &reads{
		max: l.Reads, wait: l.ReadWait, bytes: l.PageBytes, gauge: gauge,
		held: map[[32]byte]int{}, writing: map[[32]byte]int{}, waiting: map[[32]byte]int{},
	}
}

// readSlot is a slot taken by one read of one key.
type readSlot struct {
	r        *reads
	key      [32]byte
	built    stdsync.Once
	released stdsync.Once
}

// listRead serves one list read of the request's key: build reads and
// builds the answer under a read slot; the answer is encoded before the
// slot is given back, and written after. Every list handler answers
// through it.
func (s *server) listRead(c echo.Context, build func(ctx context.Context) (any, error)) error {
	slot, err := s.reads.acquire(c.Request().Context(), keyHash(c))
	if err != nil {
		return err
	}
	defer slot.release()
	resp, err := build(c.Request().Context())
	if err != nil {
		return err
	}
	var body bytes.Buffer
	if err := json.NewEncoder(&body).Encode(resp); err != nil { // as echo's c.JSON encodes
		return err
	}
	resp = nil
	slot.pageBuilt()
	return c.JSONBlob(http.StatusOK, body.Bytes())
}

// acquire takes a read slot for key, waiting at most the configured time;
// it fails with models.ErrOverloaded (503 with Retry-After) when none came
// free for it.
func (r *reads) acquire(ctx context.Context, key [32]byte) (*readSlot, error) {
	r.mu.Lock()
	if len(r.waiters) == 0 && r.eligible(key, 1) {
		r.take(key)
		r.mu.Unlock()
		return &readSlot{r: r, key: key}, nil
	}
	w := &readWaiter{key: key, ready: make(chan struct{})}
	r.waiters = append(r.waiters, w)
	r.waiting[key]++
	r.grant() // the waiters before it may not be eligible, it may be
	r.observe()
	r.mu.Unlock()

	t := time.NewTimer(r.wait)
	defer t.Stop()
	var err error
	select {
	case <-w.ready:
		return &readSlot{r: r, key: key}, nil
	case <-t.C:
		err = models.Public(models.ErrOverloaded, "the %d list reads this instance serves at once are taken (a key gets its share of them while other keys want them too); retry shortly", r.max)
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.granted { // granted as the wait ended: it is served
		return &readSlot{r: r, key: key}, nil
	}
	r.dropWaiter(w)
	r.grant() // one key fewer may widen the others' shares
	r.observe()
	return nil, err
}

// eligible reports whether key may take a slot now, counting waiting
// keys as wanting one; extra is 1 when key is not among the waiters.
func (r *reads) eligible(key [32]byte, extra int) bool {
	if r.total >= r.max || r.writing[key] >= r.max {
		return false
	}
	keys := len(r.held)
	for k := range r.waiting {
		if r.held[k] == 0 {
			keys++
		}
	}
	if extra == 1 && r.held[key] == 0 && r.waiting[key] == 0 {
		keys++
	}
	share := (r.max + keys - 1) / keys
	return r.held[key] < share
}

// take counts a slot, and the answer to be written, for key.
func (r *reads) take(key [32]byte) {
	r.held[key]++
	r.total++
	r.writing[key]++
	r.observe()
}

// grant gives free slots to the waiters eligible for them, in order.
func (r *reads) grant() {
	for i := 0; i < len(r.waiters) && r.total < r.max; {
		w := r.waiters[i]
		if !r.eligible(w.key, 0) {
			i++
			continue
		}
		r.dropWaiter(w)
		w.granted = true
		r.take(w.key)
		close(w.ready)
	}
}

// dropWaiter removes w from the waiters.
func (r *reads) dropWaiter(w *readWaiter) {
	for i, o := range r.waiters {
		if o == w {
			r.waiters = append(r.waiters[:i], r.waiters[i+1:]...)
			break
		}
	}
	if r.waiting[w.key]--; r.waiting[w.key] <= 0 {
		delete(r.waiting, w.key)
	}
}

// observe sets the gauges.
func (r *reads) observe() {
	if r.gauge == nil {
		return
	}
	writing := 0
	for _, n := range r.writing {
		writing += n
	}
	r.gauge.WithLabelValues("reading").Set(float64(r.total))
	r.gauge.WithLabelValues("waiting").Set(float64(len(r.waiters)))
	r.gauge.WithLabelValues("writing").Set(float64(writing - r.total))
}

// pageBuilt gives the slot back: the answer is built and encoded, and only
// its writing is left.
func (s *readSlot) pageBuilt() {
	s.built.Do(func() {
		r := s.r
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.held[s.key]--; r.held[s.key] <= 0 {
			delete(r.held, s.key)
		}
		r.total--
		r.grant()
		r.observe()
	})
}

// release ends the read: its slot, if still held, and its answer.
func (s *readSlot) release() {
	s.pageBuilt()
	s.released.Do(func() {
		r := s.r
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.writing[s.key]--; r.writing[s.key] <= 0 {
			delete(r.writing, s.key)
		}
		r.grant()
		r.observe()
	})
}
