package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
)

// received is one request an endpoint got.
type received struct {
	header http.Header
	body   []byte
}

// endpoint is a real HTTP server on loopback that records what it gets
// and answers with handle.
type endpoint struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
}

func newEndpoint(t *testing.T, handle http.HandlerFunc) *endpoint {
	t.Helper()
	e := &endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		e.mu.Lock()
		e.got = append(e.got, received{header: r.Header.Clone(), body: body})
		e.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) requests() []received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]received(nil), e.got...)
}

func status(code int) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

func mustSecret(t *testing.T) string {
	t.Helper()
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func message() Message {
	return Message{ID: "msg_2xYz", Timestamp: time.Now(), Body: []byte(`{"type":"user.updated","timestamp":1,"data":{"id":"user_1"}}`)}
}

// loopbackSender is a sender allowed to reach the test's loopback
// servers.
func loopbackSender() *Sender {
	return NewSender(SenderOptions{AllowPrivate: true, Timeout: 10 * time.Second})
}

func TestSend_EachSecretsSignatureVerifiesWithSvix(t *testing.T) {
	e := newEndpoint(t, status(http.StatusOK))
	old, cur := mustSecret(t), mustSecret(t)
	m := message()
	res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL + "/hook", Secrets: []string{old, cur}}, m)
	if res.Verdict != Delivered || res.Status != 200 || res.Err != "" {
		t.Fatalf("result %+v, want delivered 200", res)
	}
	got := e.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	for _, secret := range []string{old, cur} {
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("svix Verify with one of the secrets: %v", err)
		}
	}
	other, _ := svix.NewWebhook(mustSecret(t))
	if other.Verify(r.body, r.header) == nil {
		t.Error("a secret the target does not have verifies")
	}
	if sigs := strings.Split(r.header.Get("webhook-signature"), " "); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Errorf("webhook-signature %q, want two v1 signatures", r.header.Get("webhook-signature"))
	}
	want := map[string]string{
		"content-type":      "application/json",
		"user-agent":        "usersync",
		"webhook-id":        m.ID,
		"webhook-timestamp": strconv.FormatInt(m.Timestamp.Unix(), 10),
	}
	for k, v := range want {
		if g := r.header.Get(k); g != v {
			t.Errorf("%s: %q, want %q", k, g, v)
		}
	}
	if string(r.body) != string(m.Body) {
		t.Errorf("body %q, want %q", r.body, m.Body)
	}
}

func TestSend_TheSameMessageKeepsItsIDOnEveryAttempt(t *testing.T) {
	e := newEndpoint(t, status(http.StatusInternalServerError))
	s, secret, m := loopbackSender(), mustSecret(t), message()
	for range 2 {
		s.Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{secret}}, m)
	}
	got := e.requests()
	if len(got) != 2 || got[0].header.Get("webhook-id") != m.ID || got[1].header.Get("webhook-id") != m.ID {
		t.Fatalf("webhook-ids of the attempts differ from %q", m.ID)
	}
}

func TestSend_OnlyA2xxIsDelivered(t *testing.T) {
	for _, code := range []int{200, 201, 202, 204, 299} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			e := newEndpoint(t, status(code))
			res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
			if res.Verdict != Delivered || res.Status != code || res.Err != "" || res.Latency <= 0 {
				t.Fatalf("result %+v, want delivered %d", res, code)
			}
		})
	}
	for _, code := range []int{400, 401, 404, 409, 413, 500, 502} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(code)
				io.WriteString(w, "no thanks")
			})
			res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
			if res.Verdict != Retry || res.Status != code || res.Err != "status "+strconv.Itoa(code) || res.Body != "no thanks" {
				t.Fatalf("result %+v, want retry with status %d", res, code)
			}
		})
	}
}

func TestSend_A410MeansTheEndpointIsGone(t *testing.T) {
	e := newEndpoint(t, status(http.StatusGone))
	res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Gone || res.Status != 410 {
		t.Fatalf("result %+v, want gone 410", res)
	}
}

func TestSend_RetryAfterOn429And503IsHonoured(t *testing.T) {
	inTwoHours := time.Now().Add(2 * time.Hour).UTC().Format(http.TimeFormat)
	cases := []struct {
		name     string
		code     int
		value    string
		min, max time.Duration
	}{
		{"429 seconds", 429, "120", 120 * time.Second, 120 * time.Second},
		{"503 seconds", 503, "120", 120 * time.Second, 120 * time.Second},
		{"429 date", 429, inTwoHours, 2*time.Hour - time.Minute, 2 * time.Hour},
		{"503 date", 503, inTwoHours, 2*time.Hour - time.Minute, 2 * time.Hour},
		{"a date past", 503, "Sun, 06 Nov 1994 08:49:37 GMT", 0, 0},
		{"more than a day", 429, "999999999999999999999999", 24 * time.Hour, 24 * time.Hour},
		{"not a wait", 429, "soon", 0, 0},
		{"negative", 429, "-5", 0, 0},
		{"absent", 429, "", 0, 0},
		{"on a 500", 500, "120", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request) {
				if c.value != "" {
					w.Header().Set("Retry-After", c.value)
				}
				w.WriteHeader(c.code)
			})
			res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
			if res.Verdict != Retry || res.Status != c.code {
				t.Fatalf("result %+v, want retry %d", res, c.code)
			}
			if res.RetryAfter < c.min || res.RetryAfter > c.max {
				t.Fatalf("RetryAfter %v, want %v..%v", res.RetryAfter, c.min, c.max)
			}
		})
	}
}

func TestSend_ARedirectIsNotFollowed(t *testing.T) {
	for _, code := range []int{301, 302, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			elsewhere := newEndpoint(t, status(http.StatusOK))
			e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.srv.URL+"/stolen", code)
			})
			res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
			if res.Verdict != Retry || res.Status != code || res.Err != fmt.Sprintf("redirect not followed (%d)", code) {
				t.Fatalf("result %+v, want retry, redirect not followed", res)
			}
			if n := len(elsewhere.requests()); n != 0 {
				t.Fatalf("the redirect's target got %d requests", n)
			}
			if n := len(e.requests()); n != 1 {
				t.Fatalf("the endpoint got %d requests, want 1", n)
			}
		})
	}
}

func TestSend_AnEndpointSlowerThanTheTimeoutIsRetried(t *testing.T) {
	release := make(chan struct{})
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	s := NewSender(SenderOptions{AllowPrivate: true, Timeout: 50 * time.Millisecond})
	res := s.Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || res.Status != 0 || res.Err != "timeout" {
		t.Fatalf("result %+v, want retry, timeout", res)
	}
}

func TestSend_ACanceledContextIsNotATimeout(t *testing.T) {
	e := newEndpoint(t, status(http.StatusOK))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := loopbackSender().Send(ctx, Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || res.Err != "canceled" {
		t.Fatalf("result %+v, want retry, canceled", res)
	}
}

// countingBody counts the bytes read from a response's body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, c.n}
	}
	return resp, err
}

func TestSend_OnlyTheBoundOfALargeResponseIsRead(t *testing.T) {
	big := strings.Repeat("é", 1<<19) // 1 MiB, a character every 2 bytes
	e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		io.WriteString(w, big)
	})
	s := loopbackSender()
	var read atomic.Int64
	s.client.Transport = countingTransport{base: s.client.Transport, n: &read}
	res := s.Send(t.Context(), Target{URL: e.srv.URL, Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Delivered {
		t.Fatalf("result %+v, want delivered", res)
	}
	if n := read.Load(); n > MaxResponseRead {
		t.Fatalf("%d bytes of the body read, want at most %d", n, MaxResponseRead)
	}
	if len(res.Body) != MaxResponseShown || !utf8.ValidString(res.Body) {
		t.Fatalf("Body is %d bytes (valid UTF-8: %v), want %d", len(res.Body), utf8.ValidString(res.Body), MaxResponseShown)
	}
}

func TestShown_IsBoundedValidUTF8(t *testing.T) {
	cases := [][]byte{
		[]byte(strings.Repeat("a", 1023) + "é"),         // the cut splits a character
		append([]byte("ok "), 0xff, 0xfe, 'x'),          // invalid bytes
		[]byte(strings.Repeat("\xff", MaxResponseRead)), // nothing valid
		[]byte(strings.Repeat("日本", 1000)),
	}
	for _, b := range cases {
		s := shown(b)
		if len(s) > MaxResponseShown || !utf8.ValidString(s) {
			t.Errorf("shown(%.20q…) is %d bytes, valid %v", b, len(s), utf8.ValidString(s))
		}
	}
	if s := shown([]byte(strings.Repeat("a", 1023) + "é")); s != strings.Repeat("a", 1023) {
		t.Errorf("a split character is kept in part: %q", s[1020:])
	}
}

// guarded listens on loopback and counts the connections it accepts, to
// prove none was made.
type guarded struct {
	ln       net.Listener
	accepted chan string // the remote address of each connection
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &guarded{ln: ln, accepted: make(chan string, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			g.accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return g
}

func (g *guarded) port() string {
	_, p, _ := net.SplitHostPort(g.ln.Addr().String())
	return p
}

// connectionsBefore makes one connection of its own and returns how many
// the listener accepted before it: connections are accepted in order, so
// any the sender made are counted.
func (g *guarded) connectionsBefore(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", g.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	own := c.LocalAddr().String()
	n := 0
	for {
		select {
		case remote := <-g.accepted:
			if remote == own {
				return n
			}
			n++
		case <-t.Context().Done():
			t.Fatal("the listener never accepted the test's own connection")
		}
	}
}

func TestSend_APrivateAddressIsRefusedWhereItIsDialled(t *testing.T) {
	cases := []struct {
		resolved string
		err      string
	}{
		{"10.0.0.1", "refused: 10.0.0.1 is a private address"},
		{"169.254.169.254", "refused: 169.254.169.254 is a link-local address"},
		{"::ffff:127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
		{"127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
	}
	for _, c := range cases {
		t.Run(c.resolved, func(t *testing.T) {
			g := newGuarded(t)
			var asked atomic.Value
			s := NewSender(SenderOptions{Timeout: 2 * time.Second, LookupIP: func(_ context.Context, host string) ([]net.IP, error) {
				asked.Store(host)
				return []net.IP{net.ParseIP(c.resolved)}, nil
			}})
			target := Target{URL: "http://hooks.example.com:" + g.port() + "/in", Secrets: []string{mustSecret(t)}}
			if err := CheckURL(target.URL, false); err != nil {
				t.Fatalf("CheckURL refuses a name: %v", err)
			}
			res := s.Send(t.Context(), target, message())
			if res.Verdict != Retry || res.Status != 0 || res.Err != c.err {
				t.Fatalf("result %+v, want retry, %q", res, c.err)
			}
			if asked.Load() != "hooks.example.com" {
				t.Fatalf("LookupIP asked for %v", asked.Load())
			}
			if n := g.connectionsBefore(t); n != 0 {
				t.Fatalf("%d connections made to a refused address", n)
			}
		})
	}
}

func TestSend_AnIPLiteralIsJudgedByTheDialerToo(t *testing.T) {
	g := newGuarded(t)
	s := NewSender(SenderOptions{Timeout: 2 * time.Second})
	// CheckURL refuses such a URL before Send dials; the dialer's guard
	// holds without it.
	_, err := s.dialVia(t.Context(), s.dialer, "tcp", g.ln.Addr().String())
	var refused *refusedError
	if !errors.As(err, &refused) {
		t.Fatalf("dial of %s: %v, want a refusal", g.ln.Addr(), err)
	}
	res := s.Send(t.Context(), Target{URL: "http://" + g.ln.Addr().String() + "/", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || !strings.Contains(res.Err, "127.0.0.1 is a loopback address") {
		t.Fatalf("result %+v, want a refusal", res)
	}
	if n := g.connectionsBefore(t); n != 0 {
		t.Fatalf("%d connections made to a refused address", n)
	}
}

func TestSend_EveryAddressOfANameIsJudged(t *testing.T) {
	g := newGuarded(t)
	s := NewSender(SenderOptions{Timeout: 2 * time.Second, LookupIP: func(context.Context, string) ([]net.IP, error) {
		return []net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("::1"), net.ParseIP("127.0.0.1")}, nil
	}})
	res := s.Send(t.Context(), Target{URL: "http://hooks.example.com:" + g.port() + "/", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || !strings.HasPrefix(res.Err, "refused: ") {
		t.Fatalf("result %+v, want a refusal", res)
	}
	if n := g.connectionsBefore(t); n != 0 {
		t.Fatalf("%d connections made to a refused address", n)
	}
}

func TestSend_AllowPrivateReachesLoopbackThroughAName(t *testing.T) {
	e := newEndpoint(t, status(http.StatusNoContent))
	u, _ := url.Parse(e.srv.URL)
	s := NewSender(SenderOptions{AllowPrivate: true, Timeout: 10 * time.Second, LookupIP: func(context.Context, string) ([]net.IP, error) {
		return []net.IP{net.ParseIP("127.0.0.1")}, nil
	}})
	res := s.Send(t.Context(), Target{URL: "http://hooks.internal:" + u.Port() + "/", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Delivered || res.Status != 204 {
		t.Fatalf("result %+v, want delivered 204", res)
	}
}

func TestSend_AHostThatDoesNotResolveIsRetried(t *testing.T) {
	s := NewSender(SenderOptions{Timeout: 2 * time.Second, LookupIP: func(_ context.Context, host string) ([]net.IP, error) {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}})
	res := s.Send(t.Context(), Target{URL: "https://nowhere.example.com/", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || res.Err != "host not found" {
		t.Fatalf("result %+v, want retry, host not found", res)
	}
	s = NewSender(SenderOptions{Timeout: 2 * time.Second, LookupIP: func(context.Context, string) ([]net.IP, error) { return nil, nil }})
	res = s.Send(t.Context(), Target{URL: "https://nowhere.example.com/", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || res.Err != "host has no address" {
		t.Fatalf("result %+v, want retry, host has no address", res)
	}
}

func TestSend_ARefusedConnectionIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	res := loopbackSender().Send(t.Context(), Target{URL: "http://" + addr + "/?token=sekrit", Secrets: []string{mustSecret(t)}}, message())
	if res.Verdict != Retry || res.Status != 0 || res.Err != "connection refused" {
		t.Fatalf("result %+v, want retry, connection refused", res)
	}
}

func TestSend_AnInvalidSecretIsNeverSentNorShown(t *testing.T) {
	e := newEndpoint(t, status(http.StatusOK))
	for _, secrets := range [][]string{nil, {"whsec_not*base64*sekrit"}, {mustSecret(t), "sekrit"}, {mustSecret(t), mustSecret(t), mustSecret(t), mustSecret(t), mustSecret(t)}} {
		res := loopbackSender().Send(t.Context(), Target{URL: e.srv.URL, Secrets: secrets}, message())
		if res.Verdict != Retry || res.Err == "" || strings.Contains(res.Err, "sekrit") {
			t.Fatalf("result %+v, want retry with a reason that holds no secret", res)
		}
	}
	if n := len(e.requests()); n != 0 {
		t.Fatalf("%d requests sent without valid secrets", n)
	}
}

func TestSend_AnInvalidTargetOrMessageIsNotSent(t *testing.T) {
	e := newEndpoint(t, status(http.StatusOK))
	s, secret := loopbackSender(), mustSecret(t)
	for _, c := range []struct {
		url string
		id  string
	}{
		{"ftp://" + strings.TrimPrefix(e.srv.URL, "http://"), "msg_1"},
		{e.srv.URL + "/#x", "msg_1"},
		{e.srv.URL, ""},
		{e.srv.URL, "msg 1"},
		{e.srv.URL, "msg_1\r\nx-evil: 1"},
		{e.srv.URL, strings.Repeat("m", MaxMessageIDBytes+1)},
	} {
		m := message()
		m.ID = c.id
		res := s.Send(t.Context(), Target{URL: c.url, Secrets: []string{secret}}, m)
		if res.Verdict != Retry || res.Err == "" || len(res.Err) > MaxErrBytes {
			t.Fatalf("%q %q: result %+v, want retry with a reason", c.url, c.id, res)
		}
	}
	if n := len(e.requests()); n != 0 {
		t.Fatalf("%d invalid requests sent", n)
	}
}

func TestNewSender_UsesNoProxyFromTheEnvironment(t *testing.T) {
	s := NewSender(SenderOptions{})
	if s.transport.Proxy != nil {
		t.Fatal("the transport takes a proxy")
	}
	if s.opts.Timeout != DefaultTimeout || s.opts.UserAgent != DefaultUserAgent || s.opts.LookupIP == nil {
		t.Fatalf("defaults not applied: %+v", s.opts)
	}
	if s.dialer.Control == nil {
		t.Fatal("the dialer has no guard")
	}
}

// TestSend_PlainHTTPToAPublicAddressIsRefusedWhereItIsDialled: a name on
// http:// is judged on the address it resolves to, before connecting: a
// public address is refused (plain http would cross networks in the
// clear), with or without USERSYNC_ENDPOINTS_ALLOW_PRIVATE.
func TestSend_PlainHTTPToAPublicAddressIsRefusedWhereItIsDialled(t *testing.T) {
	for _, allowPrivate := range []bool{false, true} {
		s := NewSender(SenderOptions{AllowPrivate: allowPrivate, Timeout: 2 * time.Second,
			LookupIP: func(context.Context, string) ([]net.IP, error) { return []net.IP{net.ParseIP("93.184.216.34")}, nil }})
		target := Target{URL: "http://hooks.example.com/in", Secrets: []string{mustSecret(t)}}
		if err := CheckPlainHTTP(target.URL); err != nil {
			t.Fatalf("CheckPlainHTTP refuses a name: %v", err)
		}
		res := s.Send(t.Context(), target, message())
		want := "refused: 93.184.216.34 is a public address, over plain http (use https, or set USERSYNC_ENDPOINTS_ALLOW_HTTP)"
		if res.Verdict != Retry || res.Status != 0 || res.Err != want {
			t.Errorf("allowPrivate %v: result %+v, want retry, %q", allowPrivate, res, want)
		}
	}
}

// TestSend_PlainHTTPToANonPublicAddressIsItsGuardsAlone: over plain http
// a loopback address is refused as loopback, and reached when
// USERSYNC_ENDPOINTS_ALLOW_PRIVATE lets it through: it is not public.
func TestSend_PlainHTTPToANonPublicAddressIsItsGuardsAlone(t *testing.T) {
	e := newEndpoint(t, status(204))
	port := strings.TrimPrefix(e.srv.URL, "http://127.0.0.1:")
	lookup := func(context.Context, string) ([]net.IP, error) { return []net.IP{net.ParseIP("127.0.0.1")}, nil }
	target := Target{URL: "http://hooks.example.com:" + port + "/", Secrets: []string{mustSecret(t)}}
	if res := NewSender(SenderOptions{LookupIP: lookup}).Send(t.Context(), target, message()); res.Err != "refused: 127.0.0.1 is a loopback address" {
		t.Errorf("without AllowPrivate: %+v, want refused as loopback", res)
	}
	if res := NewSender(SenderOptions{AllowPrivate: true, LookupIP: lookup}).Send(t.Context(), target, message()); res.Verdict != Delivered {
		t.Errorf("with AllowPrivate: %+v, want delivered", res)
	}
}

// TestSender_PlainHTTPIsJudgedOnlyForATargetThatDoesNotKeepIt: the client
// that refuses public addresses sends a target's http:// URL, unless the
// target keeps plain http (an endpoint of the file, or whose URL was set
// before) or every target may (AllowHTTP); https never.
func TestSender_PlainHTTPIsJudgedOnlyForATargetThatDoesNotKeepIt(t *testing.T) {
	s, open := NewSender(SenderOptions{}), NewSender(SenderOptions{AllowHTTP: true})
	for _, tc := range []struct {
		s     *Sender
		t     Target
		plain bool
	}{
		{s, Target{URL: "http://hooks.example.com/"}, true},
		{s, Target{URL: "HTTP://hooks.example.com/"}, true},
		{s, Target{URL: "http://hooks.example.com/", PlainHTTP: true}, false},
		{s, Target{URL: "https://hooks.example.com/"}, false},
		{open, Target{URL: "http://hooks.example.com/"}, false},
	} {
		if got := tc.s.clientFor(tc.t) == tc.s.plain; got != tc.plain {
			t.Errorf("AllowHTTP %v, %+v: the plain client %v, want %v", tc.s.opts.AllowHTTP, tc.t, got, tc.plain)
		}
	}
	e := models.Endpoint{URL: "http://a.example.com/", Secret: "whsec_x"}
	for _, tc := range []struct {
		e    models.Endpoint
		keep bool
	}{{e, false}, {models.Endpoint{URL: e.URL, LegacyURL: true}, true}, {models.Endpoint{URL: e.URL, FromConfig: true}, true}} {
		if got := TargetOf(tc.e, time.Now()).PlainHTTP; got != tc.keep {
			t.Errorf("TargetOf(%+v).PlainHTTP = %v, want %v", tc.e, got, tc.keep)
		}
	}
}
