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
		"svix-id: msg_slow\r\nsvix-timestamp: %d\r\nsvix-signature: v1,AAAA\r\nContent-Length: %d\r\n\r\n",
		u.Host, time.Now().Unix(), announce)
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
	const senders, sent = 16, 64 << 10
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{
			BodyBytes:     senders * sent,
			PeerBodyBytes: senders * sent, // all from one address here; see the next test
			BodyWait:      time.Minute,    // they stall for the whole test
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
	const sent = 64 << 10
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{BodyBytes: 16 * sent, PeerBodyBytes: 4 * sent, BodyWait: time.Minute}
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
