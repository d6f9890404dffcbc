package main

import (
	"context"
	"net"
	"net/http"
	stdsync "sync"
	"time"

	"github.com/usersync/usersync/internal/peer"
)

// defaultMaxConns bounds the connections one listener of serve keeps
// open (tests lower it with seams.maxConns).
const defaultMaxConns = 1024

// defaultConnsPerAddr is USERSYNC_CONNS_PER_ADDR's default: a sixteenth of
// the connections, as many as deliveries are applied at once.
const defaultConnsPerAddr = 64

// idleTimeout is how long a keep-alive connection may wait for its next
// request.
const idleTimeout = 30 * time.Second

// connLimiter is a listener that keeps at most max connections open, and
// at most perAddr of one client address (an IPv6 address by its /64; the
// addresses of trusted proxies are not bounded). A connection beyond a
// bound is accepted, and room is made for it by closing a connection that
// is not serving a request: one still waiting for its request's headers
// (a client that opened it and sends nothing, or half a request line, the
// first to go), else one idle between requests (keep-alive). Beyond its
// address's bound, that address's own connection goes, the one waiting
// the longest; beyond the listener's, one of the address that holds the
// most connections. If none can go, the new connection is closed at once
// (the client retries; Svix does). netutil.LimitListener would instead
// stop accepting, and connections that never send a request would keep
// every new one, a webhook delivery's too, waiting in the kernel's queue.
type connLimiter struct {
	net.Listener
	max, perAddr int
	proxies      peer.Proxies

	mu    stdsync.Mutex
	open  map[*limitedConn]struct{}
	addrs map[string]int // open connections per bounded address
	seq   uint64         // orders the changes of state
}

func newConnLimiter(ln net.Listener, max, perAddr int, proxies peer.Proxies) *connLimiter {
	return &connLimiter{Listener: ln, max: max, perAddr: perAddr, proxies: proxies,
		open: map[*limitedConn]struct{}{}, addrs: map[string]int{}}
}

// connPhase is where a connection is in its requests.
type connPhase int

const (
	waiting connPhase = iota // for a request's headers: new, or reading them
	serving                  // a request whose headers were read
	idle                     // between requests
)

// Accept returns the next connection, once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l}
		if a, ok := peer.Addr(c.RemoteAddr().String()); ok && !l.proxies.Trusted(a) {
			lc.addr = peer.Key(a)
		}
		l.mu.Lock()
		var victim *limitedConn
		room := true
		switch {
		case lc.addr != "" && l.addrs[lc.addr] >= l.perAddr:
			victim = l.victim(lc.addr)
			room = victim != nil
		case len(l.open) >= l.max:
			victim = l.victim("")
			room = victim != nil
		}
		if !room {
			l.mu.Unlock()
			c.Close()
			continue
		}
		if victim != nil {
			l.forget(victim)
		}
		l.seq++
		lc.phase, lc.since = waiting, l.seq
		l.open[lc] = struct{}{}
		if lc.addr != "" {
			l.addrs[lc.addr]++
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Conn.Close()
		}
		return lc, nil
	}
}

// victim is the connection to close to make room: of addr's connections
// (of every address's when addr is ""), one not serving a request, from
// the address holding the most connections (trusted proxies' last),
// waiting for headers before idle, the longest in that state first. nil
// when every one is serving.
func (l *connLimiter) victim(addr string) *limitedConn {
	var v *limitedConn
	var vCount int
	for c := range l.open {
		if c.phase == serving || (addr != "" && c.addr != addr) {
			continue
		}
		count := 0
		if c.addr != "" {
			count = l.addrs[c.addr]
		}
		switch {
		case v == nil:
		case count != vCount:
			if count < vCount {
				continue
			}
		case c.phase != v.phase:
			if c.phase != waiting {
				continue
			}
		case c.since > v.since:
			continue
		}
		v, vCount = c, count
	}
	return v
}

// forget stops counting c. Under l.mu.
func (l *connLimiter) forget(c *limitedConn) {
	if _, ok := l.open[c]; !ok {
		return
	}
	delete(l.open, c)
	if c.addr != "" {
		if l.addrs[c.addr]--; l.addrs[c.addr] <= 0 {
			delete(l.addrs, c.addr)
		}
	}
}

// setPhase moves c to phase p.
func (l *connLimiter) setPhase(c *limitedConn, p connPhase) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[c]; !open || c.phase == p {
		return
	}
	l.seq++
	c.phase, c.since = p, l.seq
}

// connState is the http.Server's ConnState: it tells which connections
// are idle, and which begin a request.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateIdle:
		l.setPhase(lc, idle)
	case http.StateActive, http.StateNew:
		// Bytes of a request arrived: its headers are being read.
		l.mu.Lock()
		if lc.phase == idle {
			l.seq++
			lc.phase, lc.since = waiting, l.seq
		}
		l.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		l.forget(lc)
		l.mu.Unlock()
	}
}

// connKey is the context key of a request's connection.
type connKey struct{}

// connContext is the http.Server's ConnContext: it tells track which
// connection a request came on.
func (l *connLimiter) connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// track wraps the server's handler: a request that reaches it has sent
// its headers, and its connection is serving until it is idle again.
func (l *connLimiter) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
			l.setPhase(lc, serving)
		}
		h.ServeHTTP(w, r)
	})
}

// limitedConn is a connection counted by its connLimiter until closed.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	addr  string // the bounded address it counts under; "" for a trusted proxy
	phase connPhase
	since uint64 // when it entered its phase
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
