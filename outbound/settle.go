package outbound

import (
	"context"
	"log/slog"
	"time"

	"github.com/usersync/usersync/models"
)

// The settler records what became of the sends: each send queues its
// settlement and frees its slot, then the first send to end while no
// settle is being written writes every settlement queued, settleBatch a
// write, until none is left. A delivery is not taken again until its
// settle is written (or failed: it is due still, and sent again with its
// webhook-id, which at least once allows).

// settler is the settlements queued; the Dispatcher's mu guards it.
type settler struct {
	queue    []models.Settlement
	flushing bool // a send is writing the queue
}

// settleBatch bounds the settlements of one write; the pool takes no
// delivery while MaxInFlight + settleBatch are unsettled, so that a send
// waits for at most one write before its own.
const settleBatch = 64

// settleTimeout bounds one write of settlements.
const settleTimeout = 5 * time.Second

// settle queues st, the outcome of a send.
func (d *Dispatcher) settle(st models.Settlement) {
	d.mu.Lock()
	d.settles.queue = append(d.settles.queue, st)
	d.mu.Unlock()
}

// flushSettles writes the settlements queued, a batch at a time, unless
// another send is writing them, even when ctx has ended.
func (d *Dispatcher) flushSettles(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.settles.flushing {
		return
	}
	d.settles.flushing = true
	for len(d.settles.queue) > 0 {
		n := min(len(d.settles.queue), settleBatch)
		batch := d.settles.queue[:n:n]
		d.settles.queue = d.settles.queue[n:]
		d.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, settleTimeout)
		err := d.o.Store.Outbound().Settle(wctx, batch...)
		cancel()
		if err != nil {
			d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: deliveries' outcomes not recorded; they are sent again",
				slog.Int("deliveries", len(batch)), slog.String("err", err.Error()))
		}
		d.mu.Lock()
		for _, st := range batch {
			d.pool.settled(st.Sent)
		}
		d.Notify() // a change queued meanwhile is due now
	}
	d.settles.flushing = false
}
