package main

import (
	"net"
	"net/http"
	stdsync "sync"
	"time"
)

// maxConns bounds the connections one listener of serve keeps open; a
// variable so that tests can lower it.
var maxConns = 1024

// idleTimeout is how long a keep-alive connection may wait for its next
// request.
const idleTimeout = 30 * time.Second

// connLimiter is a listener that keeps at most max connections open. A
// connection beyond the bound is accepted, and room is made for it by
// closing the connection idle the longest (a keep-alive connection between
// requests); if none is idle, the new connection is closed at once (the
// client retries; Svix does). netutil.LimitListener would instead stop
// accepting, and a few hundred idle keep-alive connections would keep
// every new one, a webhook delivery's too, waiting in the kernel's queue.
type connLimiter struct {
	net.Listener
	max int

	mu    stdsync.Mutex
	open  map[*limitedConn]uint64 // when it became idle, in idle order; 0 while not idle
	idles uint64                  // the order of the last connection to become idle
}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, open: map[*limitedConn]uint64{}}
}

// Accept returns the next connection, once there is room for it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l}
		l.mu.Lock()
		var victim *limitedConn
		if len(l.open) >= l.max {
			victim = l.longestIdle()
		}
		if len(l.open) < l.max || victim != nil {
			l.open[lc] = 0
			if victim != nil {
				delete(l.open, victim)
			}
			l.mu.Unlock()
			if victim != nil {
				victim.Conn.Close()
			}
			return lc, nil
		}
		l.mu.Unlock()
		c.Close() // every connection is busy: no room
	}
}

// longestIdle returns the connection idle the longest, or nil.
func (l *connLimiter) longestIdle() *limitedConn {
	var oldest *limitedConn
	var since uint64
	for c, at := range l.open {
		if at != 0 && (oldest == nil || at < since) {
			oldest, since = c, at
		}
	}
	return oldest
}

// connState is the http.Server's ConnState: it tells which connections
// are idle.
func (l *connLimiter) connState(c net.Conn, state http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[lc]; !open {
		return
	}
	switch state {
	case http.StateIdle:
		l.idles++
		l.open[lc] = l.idles
	case http.StateActive, http.StateNew:
		l.open[lc] = 0
	case http.StateClosed, http.StateHijacked:
		delete(l.open, lc)
	}
}

// limitedConn is a connection counted by its connLimiter until closed.
type limitedConn struct {
	net.Conn
	l *connLimiter
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.open, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
