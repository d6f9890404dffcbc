package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	stdsync "sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/models"
)

// Limits bound the webhook work in flight in one instance, so that a burst
// of deliveries, or of large bodies, is answered 503 with Retry-After at
// once (Svix retries it) instead of queuing until its deadline or growing
// the process without bound. Bodies are counted as their bytes arrive, not
// as their Content-Length announces, and stay counted until the delivery
// is answered.
//
// Unauthenticated clients can send bodies before anything is verified, so
// the budgets are shaped to keep genuine deliveries flowing whatever such
// clients do: every Clerk user event is a few KB, so small bodies have a
// budget of their own that large ones cannot use; one client (its address,
// or behind a trusted proxy the address the proxy forwarded) may hold only
// a share of each budget, and when a budget is full a client under its fair
// share makes room by dropping bodies still arriving from the client
// holding the most; a body must arrive within BodyWait of its headers, and
// keep arriving at BodyRate after BodyGrace.
type Limits struct {
	// BodyBytes bounds the bytes of large webhook bodies (a Content-Length
	// over SmallBody, or none) held at once; default 16 MiB (64 bodies of
	// the largest size).
	BodyBytes int64
	// SmallBodyBytes bounds the bytes of small webhook bodies (a
	// Content-Length of at most SmallBody) held at once; default 4 MiB.
	SmallBodyBytes int64
	// PeerBodyBytes bounds the bytes one client (a remote address, an
	// IPv6 /64; behind a trusted proxy, the address it forwarded) holds in
	// each of the two budgets; default 1 MiB.
	PeerBodyBytes int64
	// BodyWait bounds the time from the end of a delivery's headers to
	// the end of its body; default 5 s.
	BodyWait time.Duration
	// BodyRate is how fast, in bytes per second, a body must keep arriving
	// once BodyGrace has passed since its headers (with one second's
	// slack); default 8 KiB/s. BodyGrace defaults to 1 s.
	BodyRate  int64
	BodyGrace time.Duration
	// Ingests bounds the deliveries being stored and applied at once;
	// default 64.
	Ingests int
	// IngestWait is how long a delivery waits for one of those; default 1 s.
	IngestWait time.Duration

	// SyncsPerKey bounds the requests to POST /v1/users/{userId}/sync in
	// flight for one API or admin key; beyond it the answer is 429.
	// Default 4.
	SyncsPerKey int
	// SyncNotFoundFor is how long an id Clerk does not know is answered
	// 404 without asking Clerk again; default 10 s.
	SyncNotFoundFor time.Duration

	// Reads bounds the list reads in flight (GET /v1/users, the change
	// feed, GET /v1/events); default 8. ReadWait is how long one waits for
	// a slot before a 503 with Retry-After; default 1 s.
	Reads    int
	ReadWait time.Duration
	// PageBytes bounds the users one page of GET /v1/users or of the
	// change feed holds (about their JSON size): the page ends early
	// beyond it, with a cursor to the rest; default 4 MiB.
	PageBytes int
}

// SmallBody is the largest Content-Length counted in the small bodies'
// budget: 64 KiB, many times a real Clerk user event.
const SmallBody = 64 << 10

// Default limits.
const (
	DefaultBodyBytes      = 64 * MaxWebhookBody
	DefaultSmallBodyBytes = 64 * SmallBody
	DefaultPeerBodyBytes  = 4 * MaxWebhookBody
	DefaultBodyWait       = 5 * time.Second
	DefaultBodyRate       = 8 << 10
	DefaultBodyGrace      = time.Second
	DefaultIngests        = 64
	DefaultIngestWait     = time.Second
)

// retryAfterOverload is the Retry-After, in seconds, of an overloaded answer.
const retryAfterOverload = "1"

// inflight counts the webhook work in flight.
type inflight struct {
	small, large *budget
	slots        chan struct{}
	wait         time.Duration
	bodyWait     time.Duration
	bodyRate     int64
	grace        time.Duration // before a body must arrive at bodyRate
	proxies      peer.Proxies
}

func newInflight(l Limits, gauge *prometheus.GaugeVec, proxies peer.Proxies) *inflight {
	if l.BodyBytes <= 0 {
		l.BodyBytes = DefaultBodyBytes
	}
	if l.SmallBodyBytes <= 0 {
		l.SmallBodyBytes = DefaultSmallBodyBytes
	}
	if l.PeerBodyBytes <= 0 {
		l.PeerBodyBytes = DefaultPeerBodyBytes
	}
	if l.BodyWait <= 0 {
		l.BodyWait = DefaultBodyWait
	}
	if l.BodyRate <= 0 {
		l.BodyRate = DefaultBodyRate
	}
	if l.BodyGrace <= 0 {
		l.BodyGrace = DefaultBodyGrace
	}
	if l.Ingests <= 0 {
		l.Ingests = DefaultIngests
	}
	if l.IngestWait <= 0 {
		l.IngestWait = DefaultIngestWait
	}
	return &inflight{
		small:    newBudget(l.SmallBodyBytes, l.PeerBodyBytes, gauge.WithLabelValues("small")),
		large:    newBudget(l.BodyBytes, l.PeerBodyBytes, gauge.WithLabelValues("large")),
		slots:    make(chan struct{}, l.Ingests),
		wait:     l.IngestWait,
		bodyWait: l.BodyWait,
		bodyRate: l.BodyRate,
		grace:    l.BodyGrace,
		proxies:  proxies,
	}
}

// budget counts the bytes held in one budget, in all and per client.
//
// A client may hold at most peerMax bytes. When the budget is full, a
// client that holds less than its fair share (⌈max ÷ the clients holding
// bytes⌉, itself included) makes room by dropping bodies still arriving
// from the client that holds the most above its share: bodies that have
// arrived (being verified or processed) are never dropped, and a genuine
// delivery, a few KB that arrive at once, is not kept out by clients that
// each keep their share of the budget full with bodies they never finish.
type budget struct {
	max, peerMax int64
	gauge        prometheus.Gauge

	mu    stdsync.Mutex
	bytes int64
	peers map[string]*peerBodies // only clients holding bytes or reading a body: bounded by the connections
}

// peerBodies is what one client holds in a budget.
type peerBodies struct {
	bytes    int64
	arriving map[*bodyHold]struct{}
}

// bodyHold is one body counted in a budget.
type bodyHold struct {
	b       *budget
	peer    string
	held    int64
	dropped bool         // dropped to make room: its bytes are no longer counted
	arrived bool         // read whole: no longer droppable
	cut     func() error // ends the read in progress (sets the read deadline to now)
}

func newBudget(max, peerMax int64, gauge prometheus.Gauge) *budget {
	return &budget{max: max, peerMax: min(peerMax, max), gauge: gauge, peers: map[string]*peerBodies{}}
}

// errDropped is the refusal of a body dropped to make room for others.
var errDropped = models.Public(models.ErrOverloaded, "this body arrived while the webhook bodies in flight filled their budget, and its address held more than its share; retry shortly")

// open starts counting a body of peer; cut ends its read in progress.
func (b *budget) open(peer string, cut func() error) *bodyHold {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[peer]
	if p == nil {
		p = &peerBodies{arriving: map[*bodyHold]struct{}{}}
		b.peers[peer] = p
	}
	h := &bodyHold{b: b, peer: peer, cut: cut}
	p.arriving[h] = struct{}{}
	return h
}

// take counts n more bytes of h. It fails with errDropped if h was
// dropped, and with models.ErrOverloaded when the bytes would pass the
// client's share or the budget and no room can be made.
func (h *bodyHold) take(n int64) error {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.dropped {
		return errDropped
	}
	p := b.peers[h.peer]
	if p.bytes+n > b.peerMax {
		return models.Public(models.ErrOverloaded, "this address holds its share of the webhook bodies in flight; retry shortly")
	}
	for b.bytes+n > b.max {
		fair := (b.max + int64(len(b.peers)) - 1) / int64(len(b.peers))
		victim := b.victim(h.peer, fair)
		if p.bytes+n > fair || victim == nil {
			return models.Public(models.ErrOverloaded, "too many webhook bodies in flight; retry shortly")
		}
		b.drop(victim)
	}
	b.bytes += n
	b.gauge.Add(float64(n))
	p.bytes += n
	h.held += n
	return nil
}

// victim is the body to drop to make room for a client other than peer
// under its fair share: of the clients above that share, the one holding
// the most; of its bodies still arriving, the largest. nil when none.
func (b *budget) victim(peer string, fair int64) *bodyHold {
	var top *peerBodies
	for name, p := range b.peers {
		if name != peer && p.bytes > fair && len(p.arriving) > 0 && (top == nil || p.bytes > top.bytes) {
			top = p
		}
	}
	if top == nil {
		return nil
	}
	var v *bodyHold
	for h := range top.arriving {
		if v == nil || h.held > v.held {
			v = h
		}
	}
	return v
}

// drop stops counting v and ends its read; its reader answers 503.
func (b *budget) drop(v *bodyHold) {
	v.dropped = true
	b.forget(v)
	_ = v.cut()
}

// forget stops counting h's bytes and body. Under b.mu.
func (b *budget) forget(h *bodyHold) {
	p := b.peers[h.peer]
	if p == nil {
		return
	}
	delete(p.arriving, h)
	b.bytes -= h.held
	b.gauge.Sub(float64(h.held))
	p.bytes -= h.held
	h.held = 0
	if p.bytes <= 0 && len(p.arriving) == 0 {
		delete(b.peers, h.peer)
	}
}

// setDeadline sets the read deadline of h's connection, unless h was
// dropped (then it fails with errDropped): under the budget's lock, so
// that a drop's deadline is never overwritten by a later one.
func (h *bodyHold) setDeadline(set func() error) (bool, error) {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.dropped {
		return false, errDropped
	}
	return set() == nil, nil
}

// arrive marks h as read whole: it is no longer dropped to make room. It
// fails with errDropped if it was dropped first.
func (h *bodyHold) arrive() error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.dropped {
		return errDropped
	}
	h.arrived = true
	delete(h.b.peers[h.peer].arriving, h)
	return nil
}

// release stops counting h.
func (h *bodyHold) release() {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if !h.dropped {
		h.b.forget(h)
		h.dropped = true // released once
	}
}

// initialBody is the largest buffer a body gets before its bytes arrive:
// Clerk's user events are a few KB.
const initialBody = 16 << 10

// readBody reads the webhook body of req, of at most MaxWebhookBody
// bytes, within the body wait, and after its first second at the body
// rate or faster (with one second's slack: by 1 s + k s after its headers,
// (k − 1) × the rate more than it had at 1 s). Bytes are counted as they
// arrive (a client that trickles its body holds only what it sent) and
// stay counted until release is called. It fails with
// models.ErrOverloaded when the body would pass its budget or its
// client's share of it, or was dropped to make room for others, with
// models.ErrTimeout when it does not arrive in time or fast enough, and
// with a 413 when it is too large.
func (f *inflight) readBody(w http.ResponseWriter, req *http.Request) (body []byte, release func(), err error) {
	sizeHint := req.ContentLength
	b := f.large
	if sizeHint >= 0 && sizeHint <= SmallBody {
		b = f.small
	}
	// A deadline on the connection, not a timer: the read in progress
	// ends with it. It is lifted once the whole body is in, so that a slow
	// database does not end the request (net/http cancels a request's
	// context when its connection's read deadline passes). On a refusal it
	// stays, and the connection is closed after the answer: net/http reads
	// what is left of a body before it closes, and a client that stalls
	// must not hold the connection past the deadline.
	rc := http.NewResponseController(w)
	h := b.open(f.proxies.Of(req.RemoteAddr, req.Header.Values("X-Forwarded-For")),
		func() error { return rc.SetReadDeadline(time.Now()) })
	release = h.release
	fail := func(err error) ([]byte, func(), error) {
		release()
		w.Header().Set("Connection", "close")
		return nil, nil, err
	}
	start := time.Now()
	end := start.Add(f.bodyWait)
	var late int64 // bytes that arrived after the grace
	slow := false  // the deadline set is the rate's, not the body wait's
	deadline := false
	setDeadline := func() error {
		d := start.Add(f.grace + time.Duration(float64(late+f.bodyRate)/float64(f.bodyRate)*float64(time.Second)))
		slow = d.Before(end)
		if !slow {
			d = end
		}
		ok, err := h.setDeadline(func() error { return rc.SetReadDeadline(d) })
		deadline = ok
		return err
	}
	if err := setDeadline(); err != nil {
		return fail(err)
	}

	// Read straight into the body's own buffer, sized from Content-Length
	// up to initialBody: beyond that it grows only as bytes arrive, so a
	// client that announces a large body and trickles it holds at most
	// twice what it sent.
	size := int64(initialBody)
	if sizeHint >= 0 {
		size = min(sizeHint+1, initialBody) // + 1: the read that sees EOF needs room
	}
	buf := make([]byte, 0, size)
	lr := io.LimitReader(req.Body, MaxWebhookBody+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if err := h.take(int64(n)); err != nil {
				return fail(err)
			}
			buf = buf[:len(buf)+n]
			if time.Since(start) > f.grace {
				late += int64(n)
				if err := setDeadline(); err != nil {
					return fail(err)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if err := h.arrive(); err != nil { // dropped: the deadline was the drop's
				return fail(err)
			}
			if slow {
				return fail(models.Public(models.ErrTimeout, "after its first %s, the body must arrive at %d bytes/s or faster", f.grace, f.bodyRate))
			}
			return fail(models.Public(models.ErrTimeout, "the whole body must arrive within %s of the headers", f.bodyWait))
		}
		if err != nil {
			if err := h.arrive(); err != nil {
				return fail(err)
			}
			return fail(&refusal{reason: reasonBodyRead, err: models.Public(models.ErrInvalid, "the body could not be read").Because(err)})
		}
	}
	if err := h.arrive(); err != nil {
		return fail(err)
	}
	if len(buf) > MaxWebhookBody {
		return fail(tooLarge())
	}
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return buf, release, nil
}

// acquire takes one of the ingest slots, waiting at most the configured
// time; it fails with models.ErrOverloaded when none came free.
func (f *inflight) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-f.slots }
	select {
	case f.slots <- struct{}{}:
		return release, nil
	default:
	}
	t := time.NewTimer(f.wait)
	defer t.Stop()
	select {
	case f.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, models.Public(models.ErrOverloaded, "%d deliveries are being processed; retry shortly", cap(f.slots))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
