// Command flood attacks a usersync server from many loopback addresses at
// once, as hostile clients would, while it sends genuine signed webhook
// deliveries and another key's reads, and prints what became of those.
//
//	go run ./scripts/flood [-hostile 32] [-duration 30s] [-deliveries 300]
//
// Run it from the repository's root. By default it builds usersync, starts
// it with the embedded store in a temporary directory and stops it at the
// end; -url targets a server already running (with -secret, -hog-key and
// -key). Every hostile address, 127.0.0.2 and up, at once:
//
//   - holds connections that never finish a request (half a request line,
//     opened again before the 10 s header timeout), more than its share;
//   - sends webhook bodies it never finishes (8 KiB of an announced 64 KiB
//     at once, then -trickle bytes a second, 9 KiB by default, just above
//     the rate a body must keep to), opened again when answered;
//
// and a few of them read GET /v1/users?limit=200 with one key (-hog-key)
// on connections that never read the answers. Genuine deliveries come
// from 127.0.0.1, each on a new connection, never retried; the other key's
// reads too. It talks to loopback addresses only, and stops by itself
// after -duration. It exits 1 when fewer than -want (95 %) of the genuine
// deliveries, or of the other key's reads, are answered 2xx.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

const (
	defaultSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	defaultHogKey = "usk_flood_hog_0123456789abcdef"
	defaultKey    = "usk_flood_app_0123456789abcdef"
)

type options struct {
	url, secret, hogKey, key, bin string
	hostile                       int
	connsPerAddr, bodiesPerAddr   int
	readHogs, trickle             int
	duration                      time.Duration
	deliveries, reads             int
	seedUsers                     int
	want                          float64
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "a running usersync on a loopback address (default: build and start one)")
	flag.StringVar(&o.secret, "secret", defaultSecret, "the webhook secret of the server at -url")
	flag.StringVar(&o.hogKey, "hog-key", defaultHogKey, "the API key whose reads are never read")
	flag.StringVar(&o.key, "key", defaultKey, "another API key, whose reads must be served")
	flag.StringVar(&o.bin, "bin", "", "a usersync binary to start (default: go build ./cmd/usersync)")
	flag.IntVar(&o.hostile, "hostile", 32, "hostile source addresses, 127.0.0.2 and up (1-200)")
	flag.IntVar(&o.connsPerAddr, "conns", 40, "connections without headers per hostile address (0-200)")
	flag.IntVar(&o.bodiesPerAddr, "bodies", 16, "unfinished webhook bodies per hostile address (0-64)")
	flag.IntVar(&o.trickle, "trickle", 9<<10, "bytes a second each unfinished body sends after its first 8 KiB (10-65536)")
	flag.IntVar(&o.readHogs, "read-hogs", 16, "unread GET /v1/users?limit=200 of -hog-key at once (0-64)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long the attack lasts (5s-5m)")
	flag.IntVar(&o.deliveries, "deliveries", 300, "genuine signed deliveries, spread over the attack (1-10000)")
	flag.IntVar(&o.reads, "reads", 100, "reads of -key, spread over the attack (0-10000)")
	flag.IntVar(&o.seedUsers, "seed", 300, "users of 30 KB stored before the attack, so that pages are large (0-2000; own server only)")
	flag.Float64Var(&o.want, "want", 0.95, "the share of 2xx below which flood exits 1")
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(2)
	}
	ok, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func (o *options) check() error {
	for _, c := range []struct {
		name    string
		v, l, h int
	}{
		{"-hostile", o.hostile, 1, 200}, {"-conns", o.connsPerAddr, 0, 200}, {"-bodies", o.bodiesPerAddr, 0, 64},
		{"-read-hogs", o.readHogs, 0, 64}, {"-deliveries", o.deliveries, 1, 10000}, {"-reads", o.reads, 0, 10000},
		{"-seed", o.seedUsers, 0, 2000}, {"-trickle", o.trickle, 10, 64 << 10},
	} {
		if c.v < c.l || c.v > c.h {
			return fmt.Errorf("%s %d: from %d to %d", c.name, c.v, c.l, c.h)
		}
	}
	if o.duration < 5*time.Second || o.duration > 5*time.Minute {
		return fmt.Errorf("-duration %s: from 5s to 5m", o.duration)
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil {
			return fmt.Errorf("-url: %w", err)
		}
		if !loopback(u.Hostname()) {
			return fmt.Errorf("-url %s: flood targets loopback addresses only", o.url)
		}
		o.url = strings.TrimSuffix(o.url, "/")
	}
	return nil
}

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostileAddr is the n-th hostile source address, from 0: 127.0.0.2 and up.
func hostileAddr(n int) net.IP { return net.IPv4(127, 0, byte((n+2)>>8), byte((n+2)&0xff)) }

func run(o options) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+2*time.Minute) // everything ends by then
	defer cancel()
	if o.url == "" {
		url, stop, err := startServer(ctx, o)
		if err != nil {
			return false, err
		}
		defer stop()
		o.url = url
		if err := seed(ctx, o); err != nil {
			return false, err
		}
	}
	host := strings.TrimPrefix(strings.TrimPrefix(o.url, "http://"), "https://")
	fmt.Printf("flood: %s, %d cores, %s; %d hostile addresses (127.0.0.2-%s) for %s: %d connections without headers and %d unfinished bodies each, %d unread list reads of one key\n",
		o.url, runtime.NumCPU(), runtime.Version(), o.hostile, hostileAddr(o.hostile-1), o.duration, o.connsPerAddr, o.bodiesPerAddr, o.readHogs)

	attack, stopAttack := context.WithTimeout(ctx, o.duration)
	defer stopAttack()
	var st hostileStats
	var wg sync.WaitGroup
	for a := range o.hostile {
		src := hostileAddr(a)
		for range o.connsPerAddr {
			wg.Go(func() { holdHalfRequests(attack, src, host, &st) })
		}
		for range o.bodiesPerAddr {
			wg.Go(func() { holdBodies(attack, src, host, o.trickle, &st) })
		}
	}
	for i := range o.readHogs {
		src := hostileAddr(i % o.hostile)
		wg.Go(func() { holdReads(attack, src, host, o.hogKey, &st) })
	}

	// The genuine traffic starts once the attack is under way, and is
	// spread over the rest of it.
	select {
	case <-time.After(3 * time.Second):
	case <-attack.Done():
	}
	span := o.duration - 4*time.Second
	genuine := newOutcomes()
	reads := newOutcomes()
	var gwg sync.WaitGroup
	const senders = 4
	for s := range senders {
		gwg.Go(func() {
			n := o.deliveries / senders
			if s < o.deliveries%senders {
				n++
			}
			for i := range n {
				pace(attack, span, n)
				genuine.add(deliver(o, fmt.Sprintf("user_flood%dx%d", s, i)))
			}
		})
	}
	gwg.Go(func() {
		for range o.reads {
			pace(attack, span, o.reads)
			reads.add(get(o, "/v1/users?limit=50", o.key))
		}
	})
	gwg.Wait()
	stopAttack()
	wg.Wait()

	fmt.Printf("hostile: %d connections opened without headers, %d unfinished bodies sent (%s), %d unread list reads\n",
		st.halfConns.Load(), st.bodies.Load(), st.bodyAnswers(), st.reads.Load())
	okDeliveries := genuine.report("genuine signed deliveries", o.want)
	okReads := true
	if o.reads > 0 {
		okReads = reads.report("reads of another key", o.want)
	}
	return okDeliveries && okReads, nil
}

// pace waits for the next of n events spread over span.
func pace(ctx context.Context, span time.Duration, n int) {
	select {
	case <-time.After(span / time.Duration(n)):
	case <-ctx.Done():
	}
}

// startServer builds (unless -bin) and starts usersync with the embedded
// store in a temporary directory, and returns its URL.
func startServer(ctx context.Context, o options) (string, func(), error) {
	dir, err := os.MkdirTemp("", "usersync-flood-")
	if err != nil {
		return "", nil, err
	}
	bin := o.bin
	if bin == "" {
		bin = filepath.Join(dir, "usersync")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/usersync")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("go build ./cmd/usersync (run flood from the repository's root): %w", err)
		}
	}
	// A free port, taken now: the server logs at error level only (a
	// flood of refusals would be a flood of lines), so not its address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"USERSYNC_ADDR="+addr, "USERSYNC_DATA_DIR="+filepath.Join(dir, "data"), "USERSYNC_LOG_LEVEL=error",
		"CLERK_WEBHOOK_SECRET="+o.secret, "USERSYNC_API_KEYS="+o.hogKey+","+o.key, "MONGODB_URI=")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			os.RemoveAll(dir)
			return "", nil, errors.New("usersync exited at start-up")
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := client.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop, nil
			}
		}
	}
	stop()
	return "", nil, errors.New("usersync was not ready within 60 s")
}

// fixture is Clerk's user.created example, as a map.
func fixture() (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join("models", "testdata", "user.created.json"))
	if err != nil {
		return nil, fmt.Errorf("%w (run flood from the repository's root)", err)
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// userEvent is a user.created event of id, with pad bytes of metadata.
func userEvent(id string, pad int) ([]byte, error) {
	env, err := fixture()
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixMilli()
	env["timestamp"] = now
	d := env["data"].(map[string]any)
	d["id"] = id
	d["updated_at"] = now
	d["email_addresses"] = []any{map[string]any{"id": "idn_" + id, "object": "email_address", "email_address": strings.ToLower(id) + "@example.org"}}
	d["primary_email_address_id"] = "idn_" + id
	if pad > 0 {
		d["public_metadata"] = map[string]any{"pad": strings.Repeat("p", pad)}
	}
	return json.Marshal(env)
}

// client makes one request per connection, from 127.0.0.1.
var client = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext,
	},
}

// seed stores users with 30 KB of metadata each, so that a page of 200
// is about 6 MB: more than the kernel holds for a client that does not
// read.
func seed(ctx context.Context, o options) error {
	for i := range o.seedUsers {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if res := deliverBody(o, fmt.Sprintf("user_seed%d", i), 30_000); res != "2xx" {
			return fmt.Errorf("seeding user %d: %s", i, res)
		}
	}
	return nil
}

// deliver sends one genuine signed delivery, and names its outcome.
func deliver(o options, userID string) result {
	start := time.Now()
	return result{what: deliverBody(o, userID, 0), took: time.Since(start)}
}

var msgSeq atomic.Int64

func deliverBody(o options, userID string, pad int) string {
	body, err := userEvent(userID, pad)
	if err != nil {
		return "error: " + err.Error()
	}
	wh, err := svix.NewWebhook(o.secret)
	if err != nil {
		return "error: " + err.Error()
	}
	id := fmt.Sprintf("msg_flood_%d_%d", time.Now().UnixNano(), msgSeq.Add(1))
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		return "error: " + err.Error()
	}
	req, _ := http.NewRequest(http.MethodPost, o.url+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	return do(req)
}

// get reads path with key, and names the outcome.
func get(o options, path, key string) result {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodGet, o.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	return result{what: do(req), took: time.Since(start)}
}

func do(req *http.Request) string {
	resp, err := client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "timeout"
		}
		return "connection error"
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 == 2 {
		return "2xx"
	}
	return strconv.Itoa(resp.StatusCode)
}

// result is one request's outcome and time.
type result struct {
	what string
	took time.Duration
}

// outcomes counts results.
type outcomes struct {
	mu     sync.Mutex
	counts map[string]int
	took   []time.Duration
}

func newOutcomes() *outcomes { return &outcomes{counts: map[string]int{}} }

func (o *outcomes) add(r result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[r.what]++
	o.took = append(o.took, r.took)
}

// report prints the outcomes and reports whether the share of 2xx is at
// least want.
func (o *outcomes) report(what string, want float64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	total := len(o.took)
	ok := o.counts["2xx"]
	share := float64(ok) / float64(max(total, 1))
	var others []string
	for k, n := range o.counts {
		if k != "2xx" {
			others = append(others, fmt.Sprintf("%d %s", n, k))
		}
	}
	slices.Sort(others)
	if len(others) == 0 {
		others = []string{"none other"}
	}
	slices.Sort(o.took)
	pct := func(p float64) time.Duration {
		if total == 0 {
			return 0
		}
		return o.took[min(total-1, int(p*float64(total)))].Round(100 * time.Microsecond)
	}
	verdict := "ok"
	if share < want {
		verdict = fmt.Sprintf("FAIL: below %.0f %%", want*100)
	}
	fmt.Printf("%s: %d sent, %d answered 2xx (%.1f %%), %s; p50 %s, p99 %s: %s\n",
		what, total, ok, share*100, strings.Join(others, ", "), pct(0.5), pct(0.99), verdict)
	return share >= want
}

// hostileStats counts what the hostile clients did.
type hostileStats struct {
	halfConns, bodies, reads atomic.Int64
	mu                       sync.Mutex
	answers                  map[string]int // the answers bodies got
}

func (s *hostileStats) bodyAnswer(a string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.answers == nil {
		s.answers = map[string]int{}
	}
	s.answers[a]++
}

func (s *hostileStats) bodyAnswers() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for a, n := range s.answers {
		parts = append(parts, fmt.Sprintf("%d %s", n, a))
	}
	slices.Sort(parts)
	return "answered: " + strings.Join(parts, ", ")
}

// dialFrom connects to host from the source address src.
func dialFrom(ctx context.Context, src net.IP, host string, rcvbuf int) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	return d.DialContext(ctx, "tcp", host)
}

// backoff waits a moment after a failed dial.
func backoff(ctx context.Context) {
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
	}
}

// holdHalfRequests keeps one connection from src open with half a request
// line, opening it again when the server closes it or before its header
// timeout.
func holdHalfRequests(ctx context.Context, src net.IP, host string, st *hostileStats) {
	buf := make([]byte, 512)
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, src, host, 0)
		if err != nil {
			backoff(ctx)
			continue
		}
		st.halfConns.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		if _, err := c.Write([]byte("POST /webhooks/cl")); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(8 * time.Second))
			_, _ = c.Read(buf) // until closed, or 8 s
		}
		stop()
		c.Close()
	}
}

// holdBodies keeps one webhook body from src arriving and never
// finished: 8 KiB of an announced 64 KiB at once, then trickle bytes a
// second (in tenths, just above the 8 KiB/s a body must keep to after its
// first second), never the last byte; opened again when the server
// answers or closes.
func holdBodies(ctx context.Context, src net.IP, host string, trickle int, st *hostileStats) {
	const announced = 64 << 10
	head := fmt.Sprintf("POST /webhooks/clerk HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"svix-id: msg_hog\r\nsvix-timestamp: %%d\r\nsvix-signature: v1,AAAA\r\nContent-Length: %d\r\n\r\n", host, announced)
	first := bytes.Repeat([]byte("x"), 8<<10)
	piece := bytes.Repeat([]byte("x"), max(trickle/10, 1))
	buf := make([]byte, 64)
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, src, host, 0)
		if err != nil {
			backoff(ctx)
			continue
		}
		st.bodies.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		answer := "closed"
		if _, err := fmt.Fprintf(c, head, time.Now().Unix()); err == nil {
			if _, err := c.Write(first); err == nil {
				sent := len(first)
				for ctx.Err() == nil {
					_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
					n, err := c.Read(buf)
					if n > 0 {
						if f := strings.Fields(string(buf[:n])); len(f) > 1 {
							answer = f[1]
						}
						break
					}
					var ne net.Error
					if !errors.As(err, &ne) || !ne.Timeout() {
						break
					}
					if sent+len(piece) < announced {
						if _, err := c.Write(piece); err != nil {
							break
						}
						sent += len(piece)
					}
				}
			}
		}
		if ctx.Err() == nil {
			st.bodyAnswer(answer)
		}
		stop()
		c.Close()
	}
}

// holdReads keeps one GET /v1/users?limit=200 of key from src in flight
// on a connection that never reads its answer, opening it again after the
// server's 30 s write timeout.
func holdReads(ctx context.Context, src net.IP, host, key string, st *hostileStats) {
	for ctx.Err() == nil {
		c, err := dialFrom(ctx, src, host, 4096)
		if err != nil {
			backoff(ctx)
			continue
		}
		st.reads.Add(1)
		if _, err := fmt.Fprintf(c, "GET /v1/users?limit=200 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", host, key); err == nil {
			select {
			case <-time.After(31 * time.Second):
			case <-ctx.Done():
			}
		}
		c.Close()
	}
}
