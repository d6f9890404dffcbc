package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/internal/peer"
)

// slowSender is a client that sends a webhook's headers announcing
// announce bytes, then sent bytes of body, and then nothing.
type slowSender struct {
	conn net.Conn
	r    *bufio.Reader
}

// startSlowSender connects from local (an address of 127/8; "" for any)
// and sends the headers and the first sent bytes of a body.
func startSlowSender(t *testing.T, h *harness, local string, announce, sent int) *slowSender {
	t.Helper()
	return startSlowSenderWith(t, h, local, "", announce, sent)
}

// startSlowSenderWith is startSlowSender with more header lines, each
// ending in \r\n.
func startSlowSenderWith(t *testing.T, h *harness, local, header string, announce, sent int) *slowSender {
	t.Helper()
	u, err := url.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dial from %q: %v", local, err)
	}
	t.Cleanup(func() { conn.Close() }) // before the server closes: it waits for active requests
	fmt.Fprintf(conn, "POST /webhooks/clerk HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"svix-id: msg_slow\r\nsvix-timestamp: %d\r\nsvix-signature: v1,AAAA\r\nContent-Length: %d\r\n%s\r\n",
		u.Host, time.Now().Unix(), announce, header)
	if _, err := conn.Write(bytes.Repeat([]byte("x"), sent)); err != nil {
		t.Fatal(err)
	}
	return &slowSender{conn: conn, r: bufio.NewReader(conn)}
}

// answer reads the status of the answer the sender got, waiting at most
// 30 s; 0 when the connection was closed without one.
func (s *slowSender) answer(t *testing.T) int {
	t.Helper()
	_ = s.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(s.r, nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("no answer within 30 s")
		}
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitForMetric waits until the series in /metrics has the value want (an
// absent series counts as 0).
func waitForMetric(t *testing.T, h *harness, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got float64
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(string(h.get("/metrics", "").Body), "\n") {
			if rest, ok := strings.CutPrefix(line, series+" "); ok {
				got, _ = strconv.ParseFloat(rest, 64)
			}
		}
		if got == want {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s = %v after 30 s, want %v", series, got, want)
}

func TestWebhook_SlowLargeBodiesLeaveRoomForGenuineDeliveries(t *testing.T) {
	t.Parallel()
	const senders, sent = 16, 64 << 10
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{
			BodyBytes:     senders * sent,
			PeerBodyBytes: senders * sent, // all from one address here; see the next test
			BodyWait:      time.Minute,    // they stall for the whole test
			BodyGrace:     time.Minute,
		}
	})
	for range senders {
		startSlowSender(t, h, "", api.MaxWebhookBody, sent)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="large"}`, senders*sent)
	// The large budget is full: one more large body is refused...
	if code := startSlowSender(t, h, "", api.MaxWebhookBody, sent).answer(t); code != http.StatusServiceUnavailable {
		t.Errorf("a large body beyond the budget = %d, want 503", code)
	}
	// ...and a genuine delivery, a few KB, is served from its own budget.
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_genuine", UpdatedAt: t0}))
	if h.user("user_genuine") == nil {
		t.Error("the genuine delivery's user is missing")
	}
}

func TestWebhook_OneAddressHoldsOnlyItsShareOfTheBodyBudget(t *testing.T) {
	t.Parallel()
	const sent = 64 << 10
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{BodyBytes: 16 * sent, PeerBodyBytes: 4 * sent, BodyWait: time.Minute, BodyGrace: time.Minute}
	})
	for range 4 {
		startSlowSender(t, h, "127.0.0.2", api.MaxWebhookBody, sent)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="large"}`, 4*sent)
	if code := startSlowSender(t, h, "127.0.0.2", api.MaxWebhookBody, sent).answer(t); code != http.StatusServiceUnavailable {
		t.Errorf("a fifth large body from one address = %d, want 503", code)
	}
	// Another address still has room for large bodies.
	big := userBody(t, "user.created", clerkUser{ID: "user_large", UpdatedAt: t0,
		Meta: map[string]any{"pad": strings.Repeat("x", 60_000)}, Private: strings.Repeat("y", 20_000)})
	if len(big) <= api.SmallBody {
		t.Fatalf("the body is %d bytes, want a large one", len(big))
	}
	h.mustDeliver(newID(), big)
}

func TestWebhook_ABodyThatDoesNotArriveInTimeIsCutOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{BodyWait: 200 * time.Millisecond}
	})
	s := startSlowSender(t, h, "", 4<<10, 1<<10)
	// Without a bound the server would wait for the rest for ever.
	if code := s.answer(t); code != http.StatusRequestTimeout {
		t.Errorf("a body stalled after 1 KiB = %d, want 408", code)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, 0)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_after", UpdatedAt: t0}))
}

func TestWebhook_ABodySlowerThanTheRateAfterItsFirstSecondIsDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{BodyWait: time.Minute} // only the rate can end it in time
	})
	// 1 KiB at once, then nothing: within the first second that is fine,
	// after it the body must keep arriving at 8 KiB/s.
	s := startSlowSender(t, h, "127.0.0.2", 4<<10, 1<<10)
	if code := s.answer(t); code != http.StatusRequestTimeout {
		t.Errorf("a body stalled after its first second = %d, want 408", code)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, 0)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_after", UpdatedAt: t0}))
}

func TestWebhook_ClientsAboveTheirShareOfAFullBudgetMakeRoomForAGenuineDelivery(t *testing.T) {
	t.Parallel()
	const sent = 32 << 10
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{
			SmallBodyBytes: 8 * sent, PeerBodyBytes: 2 * sent,
			BodyWait: time.Minute, BodyGrace: time.Minute, // the hogs stall for the whole test
		}
	})
	// Four addresses, each holding its whole 64 KiB, fill the 256 KiB.
	var hogs []*slowSender
	for i := range 8 {
		hogs = append(hogs, startSlowSender(t, h, fmt.Sprintf("127.0.0.%d", 2+i/2), 60<<10, sent))
		waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, float64((i+1)*sent))
	}
	// A genuine delivery from another address holds less than its share
	// (256 KiB ÷ 5): one of the hogs' bodies is dropped to make room.
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_genuine", UpdatedAt: t0}))
	dropped := 0
	for _, s := range hogs {
		_ = s.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := s.r.Peek(1); err == nil {
			if code := s.answer(t); code != http.StatusServiceUnavailable {
				t.Errorf("a dropped hog's answer = %d, want 503", code)
			}
			dropped++
		}
	}
	if dropped != 1 {
		t.Errorf("%d hogs' bodies were dropped, want 1 (the room one delivery needs)", dropped)
	}
}

func TestWebhook_BehindATrustedProxyBodiesCountUnderTheForwardedAddress(t *testing.T) {
	t.Parallel()
	const sent = 32 << 10
	proxies, err := peer.ParseProxies("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{PeerBodyBytes: 2 * sent, BodyWait: time.Minute, BodyGrace: time.Minute}
		o.proxies = proxies
	})
	for range 2 {
		startSlowSenderWith(t, h, "127.0.0.2", "X-Forwarded-For: 198.51.100.1\r\n", 60<<10, sent)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, 2*sent)
	// That client holds its share; another one behind the same proxy does not.
	if code := startSlowSenderWith(t, h, "127.0.0.2", "X-Forwarded-For: 198.51.100.1\r\n", 60<<10, sent).answer(t); code != http.StatusServiceUnavailable {
		t.Errorf("a third body of one client behind the proxy = %d, want 503", code)
	}
	startSlowSenderWith(t, h, "127.0.0.2", "X-Forwarded-For: 6.6.6.6, 198.51.100.2\r\n", 60<<10, sent)
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, 3*sent)
	// An address that is not a trusted proxy is its own client, whatever it forwards.
	for range 2 {
		startSlowSenderWith(t, h, "127.0.0.3", "X-Forwarded-For: 198.51.100.3\r\n", 60<<10, sent)
	}
	waitForMetric(t, h, `usersync_webhook_body_bytes{budget="small"}`, 5*sent)
	if code := startSlowSenderWith(t, h, "127.0.0.3", "X-Forwarded-For: 198.51.100.4\r\n", 60<<10, sent).answer(t); code != http.StatusServiceUnavailable {
		t.Errorf("a third body from an untrusted address = %d, want 503", code)
	}
}
