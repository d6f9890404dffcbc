package api

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// budget of their own that large ones cannot use; one remote address may
// hold only a share of each budget; and a body must arrive within BodyWait
// of its headers.
type Limits struct {
	// BodyBytes bounds the bytes of large webhook bodies (a Content-Length
	// over SmallBody, or none) held at once; default 16 MiB (64 bodies of
	// the largest size).
	BodyBytes int64
	// SmallBodyBytes bounds the bytes of small webhook bodies (a
	// Content-Length of at most SmallBody) held at once; default 4 MiB.
	SmallBodyBytes int64
	// PeerBodyBytes bounds the bytes one remote address (an IPv6 /64)
	// holds in each of the two budgets; default 1 MiB. Behind a reverse
	// proxy every delivery comes from the proxy's address: raise it to
	// BodyBytes there (the proxy buffers bodies anyway).
	PeerBodyBytes int64
	// BodyWait bounds the time from the end of a delivery's headers to
	// the end of its body; default 5 s.
	BodyWait time.Duration
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
}

func newInflight(l Limits, gauge *prometheus.GaugeVec) *inflight {
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
	}
}

// budget counts the bytes held in one budget, in all and per remote
// address.
type budget struct {
	max, peerMax int64
	bytes        atomic.Int64
	gauge        prometheus.Gauge

	mu    stdsync.Mutex
	peers map[string]int64 // only addresses holding bytes: bounded by the connections
}

func newBudget(max, peerMax int64, gauge prometheus.Gauge) *budget {
	return &budget{max: max, peerMax: min(peerMax, max), gauge: gauge, peers: map[string]int64{}}
}

// take counts n more bytes of peer, or reports false (and counts nothing)
// when that would pass the budget or the peer's share of it.
func (b *budget) take(peer string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes.Load()+n > b.max || b.peers[peer]+n > b.peerMax {
		return false
	}
	b.bytes.Add(n)
	b.gauge.Add(float64(n))
	b.peers[peer] += n
	return true
}

// give returns n bytes of peer.
func (b *budget) give(peer string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes.Add(-n)
	b.gauge.Sub(float64(n))
	if left := b.peers[peer] - n; left > 0 {
		b.peers[peer] = left
	} else {
		delete(b.peers, peer)
	}
}

// peerOf is the remote address a request's bytes are counted under: the
// TCP peer (never a header a client writes), an IPv6 address by its /64,
// the block one subscriber usually gets.
func peerOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// initialBody is the largest buffer a body gets before its bytes arrive:
// Clerk's user events are a few KB.
const initialBody = 16 << 10

// readBody reads the webhook body of req, of at most MaxWebhookBody
// bytes, within the body wait. Bytes are counted as they arrive (a client
// that trickles its body holds only what it sent) and stay counted until
// release is called. It fails with models.ErrOverloaded when the body
// would pass its budget or its address's share of it, with
// models.ErrTimeout when it does not arrive in time, and with a 413 when it
// is too large.
func (f *inflight) readBody(w http.ResponseWriter, req *http.Request) (body []byte, release func(), err error) {
	sizeHint := req.ContentLength
	b := f.large
	if sizeHint >= 0 && sizeHint <= SmallBody {
		b = f.small
	}
	peer := peerOf(req.RemoteAddr)
	var held int64
	release = func() { b.give(peer, held); held = 0 }

	// A deadline on the connection, not a timer: the read in progress
	// ends with it. It is lifted once the whole body is in, so that a slow
	// database does not end the request (net/http cancels a request's
	// context when its connection's read deadline passes). On a refusal it
	// stays, and the connection is closed after the answer: net/http reads
	// what is left of a body before it closes, and a client that stalls
	// must not hold the connection past the deadline.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(f.bodyWait)) == nil
	fail := func(err error) ([]byte, func(), error) {
		release()
		w.Header().Set("Connection", "close")
		return nil, nil, err
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
			if !b.take(peer, int64(n)) {
				return fail(models.Public(models.ErrOverloaded, "too many webhook bodies in flight; retry shortly"))
			}
			held += int64(n)
			buf = buf[:len(buf)+n]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fail(models.Public(models.ErrTimeout, "the whole body must arrive within %s of the headers", f.bodyWait))
		}
		if err != nil {
			return fail(&refusal{reason: reasonBodyRead, err: models.Public(models.ErrInvalid, "the body could not be read").Because(err)})
		}
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
