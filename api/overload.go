package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/usersync/usersync/models"
)

// Limits bound the webhook work in flight in one instance, so that a burst
// of deliveries, or of large bodies, is answered 503 with Retry-After at
// once (Svix retries it) instead of queuing until its deadline or growing
// the process without bound.
type Limits struct {
	// BodyBytes bounds the bytes of webhook bodies held at once, being
	// read or being processed; default 16 MiB (64 bodies of the largest
	// size).
	BodyBytes int64
	// Ingests bounds the deliveries being stored and applied at once;
	// default 64.
	Ingests int
	// IngestWait is how long a delivery waits for one of those; default 1 s.
	IngestWait time.Duration
}

// Default limits.
const (
	DefaultBodyBytes  = 64 * MaxWebhookBody
	DefaultIngests    = 64
	DefaultIngestWait = time.Second
)

// errOverloaded: this instance has as much webhook work in flight as it
// takes; a retry shortly after may succeed. errors.go maps it to 503.
var errOverloaded = errors.New("overloaded")

// retryAfterOverload is the Retry-After, in seconds, of an overloaded answer.
const retryAfterOverload = "1"

// inflight counts the webhook work in flight.
type inflight struct {
	maxBytes int64
	bytes    atomic.Int64
	slots    chan struct{}
	wait     time.Duration
}

func newInflight(l Limits) *inflight {
	if l.BodyBytes <= 0 {
		l.BodyBytes = DefaultBodyBytes
	}
	if l.Ingests <= 0 {
		l.Ingests = DefaultIngests
	}
	if l.IngestWait <= 0 {
		l.IngestWait = DefaultIngestWait
	}
	return &inflight{maxBytes: l.BodyBytes, slots: make(chan struct{}, l.Ingests), wait: l.IngestWait}
}

// initialBody is the largest buffer a body gets before its bytes arrive:
// Clerk's user events are a few KB.
const initialBody = 16 << 10

// readBody reads a webhook body of at most MaxWebhookBody bytes. Bytes are
// counted as they arrive (a client that trickles its body holds only what
// it sent) and stay counted until release is called. It fails with
// errOverloaded when the bodies in flight would pass their bound, and with
// a 413 when the body is too large. sizeHint is the request's
// Content-Length (-1 when unknown).
func (f *inflight) readBody(r io.Reader, sizeHint int64) (body []byte, release func(), err error) {
	var held int64
	release = func() { f.bytes.Add(-held); held = 0 }
	// Read straight into the body's own buffer, sized from Content-Length
	// up to initialBody: beyond that it grows only as bytes arrive, so a
	// client that announces a large body and trickles it holds at most
	// twice what it sent.
	size := int64(initialBody)
	if sizeHint >= 0 {
		size = min(sizeHint+1, initialBody) // + 1: the read that sees EOF needs room
	}
	buf := make([]byte, 0, size)
	lr := io.LimitReader(r, MaxWebhookBody+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // grow
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		if n > 0 {
			if f.bytes.Add(int64(n)) > f.maxBytes {
				f.bytes.Add(-int64(n))
				release()
				return nil, nil, fmt.Errorf("%w: too many webhook bodies in flight; retry shortly", errOverloaded)
			}
			held += int64(n)
			buf = buf[:len(buf)+n]
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("%w: reading the body: %v", models.ErrInvalid, err)
		}
	}
	if len(buf) > MaxWebhookBody {
		release()
		return nil, nil, tooLarge()
	}
	return buf, release, nil
}

// acquire takes one of the ingest slots, waiting at most the configured
// time; it fails with errOverloaded when none came free.
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
		return nil, fmt.Errorf("%w: %d deliveries are being processed; retry shortly", errOverloaded, cap(f.slots))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
