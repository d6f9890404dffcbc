package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

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
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	defer func(n int) { maxConns = n }(maxConns)
	maxConns = 4
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": t.TempDir(),
		"CLERK_WEBHOOK_SECRET": secret, "USERSYNC_API_KEYS": "usk_conns_api_0123456789",
	}
	base, _, _ := start(t, env)
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
func (p *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	p.conns <- server
	return client
}

// closed reports whether the server closed c's other end.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

func TestConnLimiter_MakesRoomByClosingTheLongestIdleElseRefuses(t *testing.T) {
	p := &pipeListener{conns: make(chan net.Conn, 10)}
	l := newConnLimiter(p, 2)
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
	l.connState(s1, http.StateActive)
	l.connState(s2, http.StateActive)

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
