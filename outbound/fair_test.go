package outbound_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
)

// hanging is an endpoint that never answers until the test ends: it
// counts the requests it holds, and the most it held at once since reset.
type hanging struct {
	srv            *httptest.Server
	mu             sync.Mutex
	now, most, all int
}

func newHanging(t *testing.T) *hanging {
	h := &hanging{}
	stop := make(chan struct{})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client leave
		h.mu.Lock()
		h.now++
		h.all++
		h.most = max(h.most, h.now)
		h.mu.Unlock()
		select {
		case <-stop:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}))
	t.Cleanup(func() { close(stop); h.srv.Close() })
	return h
}

func (h *hanging) counts() (now, most, all int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now, h.most, h.all
}

func (h *hanging) reset() {
	h.mu.Lock()
	h.most = h.now
	h.mu.Unlock()
}

// runDispatcher runs d until the test ends.
func runDispatcher(t *testing.T, d *outbound.Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// waitFor polls cond until it holds, for at most 20 s: what it waits for
// happens at once when the dispatcher is right, never when it is wrong.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestDispatch_HangingEndpointsTakeNoSlotOfAHealthyOne: four endpoints
// that never answer (ids before the healthy one's, whose sends were
// started first) each take at most their share of the send slots, and the
// healthy fifth receives every change while they hang.
func TestDispatch_HangingEndpointsTakeNoSlotOfAHealthyOne(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var hangs []*hanging
	for i := range 4 {
		h := newHanging(t)
		hangs = append(hangs, h)
		if err := f.store.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: fmt.Sprintf("ep_hang%d", i), URL: h.srv.URL,
			Enabled: true, Secret: f.ep.Secret, CreatedAt: t0, UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	f.change(t, func(e *models.Endpoint) { e.URL = f.rcv.srv.URL + "/hook" }) // ep_test: after ep_hang…
	f.d = outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true, Timeout: time.Hour}), SendTimeout: time.Hour,
		Now: f.clock.Now, Lease: 24 * time.Hour, Poll: 20 * time.Millisecond, MaxInFlight: 32, PerEndpoint: 8})
	f.store.Outbound().SetRecording(true)
	const users = 40
	for i := range users {
		f.deliver(t, user(fmt.Sprintf("user_%02d", i), fmt.Sprintf("msg_%02d", i), time.Second, ""), models.TypeUserCreated)
	}
	runDispatcher(t, f.d)
	waitFor(t, "the healthy endpoint received every change", func() bool { return len(f.rcv.messages()) >= users })
	// Once each: a round never starts again a delivery it read as due
	// before a send of it ended.
	if n := len(f.rcv.messages()); n != users {
		t.Errorf("the healthy endpoint received %d messages for %d changes", n, users)
	}
	for i, h := range hangs {
		if now, _, _ := h.counts(); now > 32/5 {
			t.Errorf("hanging endpoint %d holds %d sends, more than its share of %d", i, now, 32/5)
		}
	}
}

// TestDispatch_AnEndpointThatDoesNotAnswerGetsOneSendAtATime: once a send
// to an endpoint timed out, it gets one send at a time until it answers.
func TestDispatch_AnEndpointThatDoesNotAnswerGetsOneSendAtATime(t *testing.T) {
	f := newFixture(t)
	h := newHanging(t)
	f.change(t, func(e *models.Endpoint) { e.URL = h.srv.URL })
	f.d = outbound.NewDispatcher(outbound.Options{Store: f.store, Render: render(f.store), Owner: "test",
		Sender:      outbound.NewSender(outbound.SenderOptions{AllowPrivate: true, Timeout: 200 * time.Millisecond}),
		SendTimeout: 200 * time.Millisecond, Now: f.clock.Now, Jitter: func() float64 { return 0.5 }, Lease: 24 * time.Hour,
		Poll: 20 * time.Millisecond, MaxInFlight: 32, PerEndpoint: 8})
	f.store.Outbound().SetRecording(true)
	for i := range 20 {
		f.deliver(t, user(fmt.Sprintf("user_%02d", i), fmt.Sprintf("msg_%02d", i), time.Second, ""), models.TypeUserCreated)
	}
	runDispatcher(t, f.d)
	// The first wave takes the endpoint's share (8); the next send starts
	// once they timed out.
	waitFor(t, "a first wave of sends, then one after their timeouts", func() bool { _, _, all := h.counts(); return all >= 9 })
	if _, most, _ := h.counts(); most < 8 {
		t.Fatalf("the first wave held %d sends at once, want the endpoint's share, 8", most)
	}
	h.reset()
	waitFor(t, "more sends after the timeouts", func() bool { _, _, all := h.counts(); return all >= 13 })
	// One at a time; the server sees a send the client gave up on end a
	// moment after the client does, so it may count two.
	if _, most, _ := h.counts(); most > 2 {
		t.Errorf("after its sends timed out, the endpoint had %d sends at once, want 1", most)
	}
}
