package outbound_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
)

// heldSettles is a store whose settles wait until released, counting the
// writes and the settlements in them.
type heldSettles struct {
	repository.Store
	ob *heldSettlesOutbound
}

func (h heldSettles) Outbound() repository.Outbound { return h.ob }

type heldSettlesOutbound struct {
	repository.Outbound
	release chan struct{}
	mu      sync.Mutex
	writes  int
	settled int
}

func (h *heldSettlesOutbound) Settle(ctx context.Context, ss ...models.Settlement) error {
	<-h.release
	h.mu.Lock()
	h.writes++
	h.settled += len(ss)
	h.mu.Unlock()
	return h.Outbound.Settle(ctx, ss...)
}

func (h *heldSettlesOutbound) counts() (writes, settled int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes, h.settled
}

// TestDispatch_ASendFreesItsSlotBeforeItsSettleIsWritten: while no settle
// can be written, the pool goes on sending beyond its slots (2 here) up to
// its bound of unsettled deliveries, each object once; the settles are
// then written a batch at a time, and nothing is sent twice.
func TestDispatch_ASendFreesItsSlotBeforeItsSettleIsWritten(t *testing.T) {
	f := newFixture(t)
	ob := &heldSettlesOutbound{Outbound: f.store.Outbound(), release: make(chan struct{})}
	f.d = outbound.NewDispatcher(outbound.Options{Store: heldSettles{Store: f.store, ob: ob}, Render: render(f.store), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true}), Now: f.clock.Now,
		Poll: 20 * time.Millisecond, MaxInFlight: 2, PerEndpoint: 2})
	f.store.Outbound().SetRecording(true)
	const users = 12
	for i := range users {
		f.deliver(t, user(fmt.Sprintf("user_%02d", i), fmt.Sprintf("msg_%02d", i), time.Second, ""), models.TypeUserCreated)
	}
	runDispatcher(t, f.d)
	waitFor(t, "every change sent while no settle was written", func() bool { return len(f.rcv.messages()) >= users })
	if w, _ := ob.counts(); w != 0 {
		t.Fatalf("%d settles written before the release", w)
	}
	close(ob.release)
	waitFor(t, "every send settled", func() bool { _, n := ob.counts(); return n >= users })
	if w, _ := ob.counts(); w >= users {
		t.Errorf("%d writes for %d settles, want batches", w, users)
	}
	time.Sleep(100 * time.Millisecond) // rounds after the settles: none sends again
	if n := len(f.rcv.messages()); n != users {
		t.Errorf("the endpoint received %d messages for %d changes", n, users)
	}
	for i := range users {
		d, err := f.store.Outbound().Delivery(context.Background(), f.ep.ID, models.KindUser, fmt.Sprintf("user_%02d", i))
		if err != nil || d.Status != models.DeliveryDelivered {
			t.Errorf("user_%02d's delivery = %+v, %v; want delivered", i, d, err)
		}
	}
}
