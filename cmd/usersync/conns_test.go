package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/repository/repotest"
)

// idleConn opens a keep-alive connection to addr, makes one request on it
// and leaves it idle.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("healthz on a keep-alive connection: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz = %d (close %v), want 200 on a kept connection", resp.StatusCode, resp.Close)
	}
	return c
}

func TestRun_IdleConnectionsBeyondTheCapDoNotKeepAWebhookOut(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t),
		"CLERK_WEBHOOK_SECRET": secret, "USERSYNC_API_KEYS": "usk_conns_api_0123456789",
	}
	const maxConns = 4
	base, _, _ := startSeams(t, env, seams{maxConns: maxConns})
	addr := strings.TrimPrefix(base, "http://")
	for range 2 * maxConns {
		idleConn(t, addr)
	}
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(secret)
	now := time.Now()
	sig, _ := wh.Sign("msg_conns", now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", "msg_conns")
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a webhook while %d idle connections are open, cap %d: %v", 2*maxConns, maxConns, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("webhook = %d, want 200", resp.StatusCode)
	}
}

// pipeListener is a listener whose connections the test makes.
type pipeListener struct {
	conns chan net.Conn
}

func (p *pipeListener) Accept() (net.Conn, error) {
	c, ok := <-p.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}
func (p *pipeListener) Close() error   { return nil }
func (p *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }

// dial hands the listener a new connection and returns the client's end.
func (p *pipeListener) dial() net.Conn { return p.dialFrom("192.0.2.1") }

// dialFrom is dial from the client address ip.
func (p *pipeListener) dialFrom(ip string) net.Conn {
	server, client := net.Pipe()
	p.conns <- &remoteConn{Conn: server, remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
	return client
}

// remoteConn is a pipe's end with a client address.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c *remoteConn) RemoteAddr() net.Addr { return c.remote }

// serveOn tells l that c's request headers were read, as its server does.
func serveOn(t *testing.T, l *connLimiter, c net.Conn) {
	t.Helper()
	l.connState(c, http.StateActive)
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req = req.WithContext(l.connContext(req.Context(), c))
	l.track(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), req)
}

// closed reports whether the server closed c's other end.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

func TestConnLimiter_MakesRoomByClosingTheLongestIdleElseRefuses(t *testing.T) {
	t.Parallel()
	p := &pipeListener{conns: make(chan net.Conn, 10)}
	l := newConnLimiter(p, 2, 2, nil)
	accept := func() net.Conn {
		t.Helper()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := p.dial(), p.dial()
	s1, s2 := accept(), accept()
	serveOn(t, l, s1)
	serveOn(t, l, s2)

	// Both busy: a third is refused.
	c3 := p.dial()
	accepted := make(chan net.Conn)
	go func() { accepted <- accept() }()
	if !closed(c3) {
		t.Fatal("a connection beyond the cap, every one busy, was not refused")
	}
	// One becomes idle: it is closed to make room for the next.
	l.connState(s2, http.StateIdle)
	c4 := p.dial()
	s4 := <-accepted
	if !closed(c2) {
		t.Error("the idle connection was not closed to make room")
	}
	l.connState(s4, http.StateIdle)
	l.connState(s1, http.StateIdle) // idle after s4
	p.dial()
	accept()
	if !closed(c4) {
		t.Error("the connection idle the longest was not the one closed")
	}
	_ = c1.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if !errors.Is(readErr(c1), os.ErrDeadlineExceeded) {
		t.Error("a connection idle for less time was closed")
	}
}

func readErr(c net.Conn) error {
	_, err := c.Read(make([]byte, 1))
	return err
}

// acceptFrom dials l's pipe listener from ip and accepts the connection.
func acceptFrom(t *testing.T, p *pipeListener, l *connLimiter, ip string) (client, server net.Conn) {
	t.Helper()
	client = p.dialFrom(ip)
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

// open reports whether c's other end is still open.
func open(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	return errors.Is(readErr(c), os.ErrDeadlineExceeded)
}

func TestConnLimiter_AConnectionWithoutItsHeadersGoesFirst(t *testing.T) {
	t.Parallel()
	p := &pipeListener{conns: make(chan net.Conn, 10)}
	l := newConnLimiter(p, 3, 3, nil)
	idleC, idleS := acceptFrom(t, p, l, "192.0.2.1")
	serveOn(t, l, idleS)
	l.connState(idleS, http.StateIdle) // a keep-alive connection between requests
	halfC, halfS := acceptFrom(t, p, l, "192.0.2.1")
	l.connState(halfS, http.StateActive) // half a request line, and nothing more
	_, busyS := acceptFrom(t, p, l, "192.0.2.1")
	serveOn(t, l, busyS)
	// Full: the next one makes room by closing the one without headers,
	// though the idle one has waited longer.
	acceptFrom(t, p, l, "192.0.2.2")
	if !closed(halfC) {
		t.Error("the connection that had not sent its headers was not closed")
	}
	if !open(idleC) {
		t.Error("the idle connection was closed, not the one without headers")
	}
}

func TestConnLimiter_OneAddressKeepsOnlyItsShare(t *testing.T) {
	t.Parallel()
	p := &pipeListener{conns: make(chan net.Conn, 10)}
	proxies, err := peer.ParseProxies("198.51.100.0/24")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(p, 8, 2, proxies)
	firstC, _ := acceptFrom(t, p, l, "203.0.113.5")
	secondC, _ := acceptFrom(t, p, l, "203.0.113.5")
	// A third from that address, below the listener's bound: its own
	// connection waiting the longest goes.
	_, thirdS := acceptFrom(t, p, l, "203.0.113.5")
	if !closed(firstC) {
		t.Error("a third connection of an address whose share is 2 did not close its oldest")
	}
	if !open(secondC) {
		t.Error("the newer connection of the address was closed")
	}
	// Both serving: a third is refused, and another address is served.
	serveOn(t, l, thirdS)
	for s := range l.open {
		serveOn(t, l, s)
	}
	refused := p.dialFrom("203.0.113.5")
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	if !closed(refused) {
		t.Error("a connection beyond its address's share, every one serving, was not refused")
	}
	otherC := p.dialFrom("203.0.113.6")
	<-accepted
	if !open(otherC) {
		t.Error("another address's connection was not kept")
	}
	// A trusted proxy's connections are not bounded per address.
	var fromProxy []net.Conn
	for range 3 {
		c, _ := acceptFrom(t, p, l, "198.51.100.7")
		fromProxy = append(fromProxy, c)
	}
	for i, c := range fromProxy {
		if !open(c) {
			t.Errorf("the trusted proxy's connection %d was closed", i+1)
		}
	}
}

// halfRequests opens n connections to addr from local, each sending half
// a request line and nothing more, as a client that holds connections does.
func halfRequests(t *testing.T, local, addr string, n int) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", local, err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte("POST /webhooks/cl")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRun_ConnectionsThatNeverSendTheirHeadersDoNotKeepDeliveriesOut(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	const secret, apiKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "usk_conns_api_0123456789"
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_WEBHOOK_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t),
		"CLERK_WEBHOOK_SECRET": secret, "USERSYNC_API_KEYS": apiKey, "USERSYNC_CONNS_PER_ADDR": "4",
	}
	const maxConns = 16
	base, out, _ := startSeams(t, env, seams{maxConns: maxConns})
	m := regexp.MustCompile(`"webhook_addr":"([^"]+)"`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no webhook_addr in the listening line:\n%s", out)
	}
	mainAddr, webhookAddr := strings.TrimPrefix(base, "http://"), m[1]
	for _, addr := range []string{mainAddr, webhookAddr} {
		// One address opening three times the listener's connections, and
		// eight more opening their share each: together twice the bound.
		halfRequests(t, "127.0.0.2", addr, 3*maxConns)
		for i := range 8 {
			halfRequests(t, fmt.Sprintf("127.0.0.%d", 3+i), addr, 4)
		}
	}
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(secret)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 5 {
		id := fmt.Sprintf("msg_half_%d", i)
		now := time.Now()
		sig, _ := wh.Sign(id, now, body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+webhookAddr+"/webhooks/clerk", bytes.NewReader(body))
		req.Header.Set("svix-id", id)
		req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("svix-signature", sig)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("delivery %d while the webhook listener is full of connections without headers: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("delivery %d = %d, want 200", i+1, resp.StatusCode)
		}
		req, _ = http.NewRequest(http.MethodGet, base+"/v1/users?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err = client.Do(req)
		if err != nil {
			t.Fatalf("read %d while the main listener is full of connections without headers: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("read %d = %d, want 200", i+1, resp.StatusCode)
		}
	}
}
