// Package outbound sends usersync's outbound webhooks: one HTTP POST of a
// message to one endpoint, signed per Standard Webhooks, and the verdict
// on it.
//
// The contract:
//   - A message is POSTed with content-type application/json and the
//     headers webhook-id (the same on every attempt of a message),
//     webhook-timestamp (unix seconds) and webhook-signature: one "v1,"
//     signature per secret of the endpoint (two during a rotation), made
//     as svix makes them, so any Standard Webhooks or svix library
//     verifies it.
//   - Only a 2xx is Delivered; a 410 is Gone (the endpoint must be
//     disabled); anything else (a redirect, another 4xx, a 5xx, no
//     response, a timeout) is Retry, at the times NextAttempt gives.
//     Redirects are never followed.
//   - Everything is bounded: the time of a request, the bytes of a
//     response read (MaxResponseRead) and shown (MaxResponseShown), the
//     reason given (MaxErrBytes, never a secret or a header's value).
//   - Unless SenderOptions.AllowPrivate, the sender refuses to connect to
//     loopback, private, link-local and other non-public addresses (an
//     IPv6 address that carries an IPv4 one is judged as that one; 6to4
//     and Teredo are refused whatever they carry), and to the addresses
//     of this machine's own interfaces. It
//     judges the address it is about to connect to, after resolution, so
//     a name that resolves to a public address when the endpoint is
//     registered and to a private one later still cannot reach it.
//   - Unless SenderOptions.AllowHTTP, a plain http:// request to a public
//     address is refused, judged on the address dialled as above, for a
//     target whose URL was set since usersync judges plain http
//     (Target.PlainHTTP false).
//
// The package keeps no state beyond idle connections and this machine's
// addresses, and logs nothing.
package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
)

// Message is one delivery: its Standard Webhooks id (stable across
// retries), time, and body (JSON).
type Message struct {
	ID        string
	Timestamp time.Time
	Body      []byte
}

// Target is where and how to sign: the endpoint's URL and its secrets
// ("whsec_…"); during a rotation's overlap there are two and both
// signatures are sent.
type Target struct {
	URL     string
	Secrets []string
	// PlainHTTP: the endpoint may be sent to over plain http on a public
	// address: its URL was set before usersync judged plain http, or
	// comes from the endpoints file (TargetOf).
	PlainHTTP bool
}

// TargetOf is where and how a message to e is sent at now: its URL, the
// secrets that sign at now, and whether it keeps plain http (an endpoint
// of the file, or whose URL was set before usersync judged plain http).
func TargetOf(e models.Endpoint, now time.Time) Target {
	return Target{URL: e.URL, Secrets: e.Secrets(now), PlainHTTP: e.FromConfig || e.LegacyURL}
}

// Verdict is what a delivery attempt came to.
type Verdict int

const (
	// Delivered: the endpoint answered 2xx.
	Delivered Verdict = iota + 1
	// Retry: anything but a 2xx or a 410; the message is tried again
	// later (NextAttempt).
	Retry
	// Gone: the endpoint answered HTTP 410; it must be disabled.
	Gone
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Gone:
		return "gone"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Result is the outcome of one attempt.
type Result struct {
	Verdict Verdict
	// Status is the HTTP status; 0 when there was no response.
	Status  int
	Latency time.Duration
	// Err is a short reason (at most MaxErrBytes bytes), never a secret
	// or a header's value: "timeout", "refused: 10.0.0.1 is a private
	// address", "redirect not followed (302)", "connection refused",
	// "status 500"...
	Err string
	// Body is at most MaxResponseShown bytes of the response's body,
	// valid UTF-8 (for the console).
	Body string
	// RetryAfter is the wait a 429 or 503 asked for with Retry-After
	// (delta-seconds or HTTP-date), clamped to [0, MaxRetryAfter]; 0 when
	// absent or invalid.
	RetryAfter time.Duration
}

// Bounds of a delivery.
const (
	// MaxResponseRead is how much of a response's body is read; the
	// rest is never read (the connection is closed).
	MaxResponseRead = 4 << 10
	// MaxResponseShown is how much of it a Result keeps.
	MaxResponseShown = 1024
	// MaxErrBytes bounds Result.Err.
	MaxErrBytes = 200
	// MaxSecrets is how many secrets a target may sign with (two during
	// a rotation's overlap).
	MaxSecrets = 4
	// MaxMessageIDBytes bounds a message's id.
	MaxMessageIDBytes = 255
	// DefaultTimeout is a request's time when SenderOptions has none.
	DefaultTimeout = 15 * time.Second
	// DefaultUserAgent is the user-agent when SenderOptions has none.
	DefaultUserAgent = "usersync"

	// maxAddrs is how many of a name's addresses one connection tries.
	maxAddrs = 8
)

// SenderOptions configure a Sender.
type SenderOptions struct {
	// AllowPrivate (USERSYNC_ENDPOINTS_ALLOW_PRIVATE): loopback, private
	// and the other addresses the guard refuses are allowed.
	AllowPrivate bool
	// AllowHTTP (USERSYNC_ENDPOINTS_ALLOW_HTTP): plain http to a public
	// address is allowed for every target.
	AllowHTTP bool
	// Timeout is a request's time, from connecting to the end of the
	// response read; DefaultTimeout when 0.
	Timeout time.Duration
	// UserAgent is sent as user-agent; DefaultUserAgent when empty.
	UserAgent string
	// LookupIP resolves a host (tests stub it); default
	// net.DefaultResolver.LookupIP(ctx, "ip", host).
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
}

// Sender sends messages. It is safe for concurrent use; it keeps a few
// idle connections for reuse.
type Sender struct {
	opts      SenderOptions
	transport *http.Transport
	client    *http.Client
	dialer    *net.Dialer
	// plain sends the plain http requests that may not reach a public
	// address, through a dialer of its own (plainControl).
	plain       *http.Client
	plainDialer *net.Dialer
}

// NewSender returns a Sender with o's options.
func NewSender(o SenderOptions) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.LookupIP == nil {
		o.LookupIP = func(ctx context.Context, host string) ([]net.IP, error) {
			return net.DefaultResolver.LookupIP(ctx, "ip", host)
		}
	}
	s := &Sender{opts: o}
	s.dialer = &net.Dialer{KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		s.dialer.Control = control
	}
	s.plainDialer = &net.Dialer{KeepAlive: 30 * time.Second, Control: plainControl(o.AllowPrivate)}
	s.transport = newTransport(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return s.dialVia(ctx, s.dialer, network, addr)
	})
	s.client = newClient(s.transport)
	s.plain = newClient(newTransport(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return s.dialVia(ctx, s.plainDialer, network, addr)
	}))
	return s
}

// newTransport is a sender's transport, dialling with dial.
func newTransport(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // never a proxy from the environment
		DialContext:         dial,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		// As many idle connections to a host as sends to it at once (an
		// endpoint's share): fewer closed most connections after one
		// request, and the next send dialled again.
		MaxIdleConns:           128,
		MaxIdleConnsPerHost:    32,
		MaxConnsPerHost:        32,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true,
	}
}

// newClient is a sender's client over t: redirects are never followed.
func newClient(t *http.Transport) *http.Client {
	return &http.Client{
		Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// clientFor is the client that sends to t: the plain one, which refuses
// public addresses, for an http:// URL unless plain http is allowed (to
// every target, or to t).
func (s *Sender) clientFor(t Target) *http.Client {
	if s.opts.AllowHTTP || t.PlainHTTP || !strings.HasPrefix(strings.ToLower(t.URL), "http://") {
		return s.client
	}
	return s.plain
}

// dialVia resolves addr's host with LookupIP and dials its addresses in
// turn through dialer, whose Control hook judges each address as it is
// connected to.
func (s *Sender) dialVia(ctx context.Context, dialer *net.Dialer, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return dialer.DialContext(ctx, network, addr)
	}
	ips, err := s.opts.LookupIP(ctx, host)
	if err != nil {
		return nil, &lookupError{err: err}
	}
	if len(ips) == 0 {
		return nil, &lookupError{err: errNoAddress}
	}
	var first error
	for i, ip := range ips {
		if i == maxAddrs {
			break
		}
		c, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// lookupError is a failure to resolve an endpoint's host.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return "lookup: " + e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

var errNoAddress = errors.New("no address")

// Send POSTs m to t once and says what came of it. It never returns
// before the response is read (at most MaxResponseRead bytes) or the
// request failed, and never takes longer than the sender's Timeout.
func (s *Sender) Send(ctx context.Context, t Target, m Message) Result {
	start := time.Now()
	res := s.send(ctx, t, m)
	res.Latency = time.Since(start)
	res.Err = clip(res.Err, MaxErrBytes)
	return res
}

func (s *Sender) send(ctx context.Context, t Target, m Message) Result {
	if err := CheckURL(t.URL, s.opts.AllowPrivate); err != nil {
		return Result{Verdict: Retry, Err: "invalid url: " + publicMsg(err)}
	}
	client := s.clientFor(t)
	if client == s.plain {
		if err := CheckPlainHTTP(t.URL); err != nil {
			return Result{Verdict: Retry, Err: "invalid url: " + publicMsg(err)}
		}
	}
	if !validID(m.ID) {
		return Result{Verdict: Retry, Err: "invalid message id"}
	}
	sig, reason := sign(t.Secrets, m)
	if reason != "" {
		return Result{Verdict: Retry, Err: reason}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(m.Body))
	if err != nil {
		return Result{Verdict: Retry, Err: "invalid url"}
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("user-agent", s.opts.UserAgent)
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(m.Timestamp.Unix(), 10))
	req.Header.Set("webhook-signature", sig)

	resp, err := client.Do(req)
	if err != nil {
		return Result{Verdict: Retry, Err: failure(ctx, err)}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseRead))
	resp.Body.Close()

	res := Result{Status: resp.StatusCode, Body: shown(body)}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		res.Verdict = Delivered
	case code == http.StatusGone:
		res.Verdict = Gone
		res.Err = "status 410 (gone)"
	case code >= 300 && code <= 399:
		res.Verdict = Retry
		res.Err = "redirect not followed (" + strconv.Itoa(code) + ")"
	default:
		res.Verdict = Retry
		res.Err = "status " + strconv.Itoa(code)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = retryAfter(resp.Header.Get("retry-after"), time.Now())
	}
	return res
}

// publicMsg is err's message when it is one of CheckURL's (written in
// this package's words), else a fixed text.
func publicMsg(err error) string {
	var pe *models.PublicError
	if errors.As(err, &pe) {
		return pe.Msg
	}
	return "not a valid URL"
}

// sign returns the webhook-signature header of m: one "v1,<base64>" per
// secret, space-separated, made by svix's own Sign; or why it cannot.
func sign(secrets []string, m Message) (header, reason string) {
	if len(secrets) == 0 {
		return "", "no signing secret"
	}
	if len(secrets) > MaxSecrets {
		return "", "too many signing secrets"
	}
	sigs := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		if CheckSecret(secret) != nil {
			return "", "a signing secret is not valid"
		}
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			return "", "a signing secret is not valid"
		}
		sig, err := wh.Sign(m.ID, m.Timestamp, m.Body)
		if err != nil {
			return "", "signing failed"
		}
		sigs = append(sigs, sig)
	}
	return strings.Join(sigs, " "), ""
}

// validID: a message id is 1..MaxMessageIDBytes visible ASCII characters
// (it is a header's value and part of what is signed).
func validID(id string) bool {
	if id == "" || len(id) > MaxMessageIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= 0x7f {
			return false
		}
	}
	return true
}

// failure names why a request got no response, in a few words of this
// package's own: never the error's text, which holds the URL.
func failure(ctx context.Context, err error) string {
	var refused *refusedError
	var lookup *lookupError
	var dns *net.DNSError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.As(err, &refused):
		return refused.Error()
	case errors.Is(err, errNotAnAddress):
		return errNotAnAddress.Error()
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded:
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &lookup):
		if errors.Is(err, errNoAddress) {
			return "host has no address"
		}
		if errors.As(err, &dns) {
			switch {
			case dns.IsNotFound:
				return "host not found"
			case dns.IsTimeout:
				return "timeout resolving host"
			}
		}
		return "host lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return "tls: certificate not accepted"
	case errors.As(err, &record):
		return "tls: the server did not answer TLS"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed without a response"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "request failed"
}

// retryAfter reads a Retry-After value: delta-seconds or an HTTP-date,
// clamped to [0, MaxRetryAfter]; 0 when absent or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return MaxRetryAfter
			}
			return 0
		}
		if n >= uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(at.Sub(now), 0), MaxRetryAfter)
}

// shown is the part of a response's body a Result keeps: at most
// MaxResponseShown bytes of valid UTF-8 (each invalid run becomes "?"),
// cut on a character's boundary.
func shown(b []byte) string {
	return clip(strings.ToValidUTF8(string(b), "?"), MaxResponseShown)
}

// clip cuts valid UTF-8 s to at most n bytes, on a character's boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
