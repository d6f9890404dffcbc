package outbound

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// pool is the sender pool's state; the Dispatcher's mu guards it. A
// delivery is unsettled from the moment a round takes it until its settle
// is written; its send holds a slot only while it is being sent.
type pool struct {
	unsettled map[string]bool // by delivery key
	held      map[string]int  // unsettled deliveries per endpoint
	sending   int             // sends under way: at most MaxInFlight
	sends     map[string]int  // sends under way per endpoint
	// silent: the endpoints whose last send got no answer (a timeout, a
	// refused connection); each has one send at a time until it answers.
	silent map[string]bool
	turn   int // where the next round's hand-out of slots starts
	// settledN counts the settles written; ended has, per delivery, the
	// count when its last settle was written, so that a round does not
	// start again a delivery it read as due before that settle.
	settledN int64
	ended    map[string]int64
}

func newPool() pool {
	return pool{unsettled: map[string]bool{}, held: map[string]int{}, sends: map[string]int{}, silent: map[string]bool{},
		ended: map[string]int64{}}
}

// forget drops what the pool knows of endpoints gone (eps: those there
// are).
func (p *pool) forget(eps map[string]models.Endpoint) {
	for id := range p.silent {
		if _, ok := eps[id]; !ok {
			delete(p.silent, id)
		}
	}
}

// sendDue starts the sends of the deliveries due, within the bounds. The
// free slots are handed out round-robin, one per endpoint with work at a
// turn, from an endpoint one further each round, and an endpoint holds at
// most its share (share): no endpoint, nor a group of endpoints that do
// not answer, takes the slots of another. The deliveries of a disabled
// endpoint wait, and are sent once it is enabled again.
func (d *Dispatcher) sendDue(ctx context.Context) error {
	d.mu.Lock()
	eps := make([]models.Endpoint, 0, len(d.endpoints))
	for _, e := range d.endpoints {
		if e.Enabled {
			eps = append(eps, e)
		}
	}
	d.mu.Unlock()
	if len(eps) == 0 {
		return nil
	}
	slices.SortFunc(eps, func(a, b models.Endpoint) int { return strings.Compare(a.ID, b.ID) })
	d.mu.Lock()
	first := d.pool.turn % len(eps)
	d.pool.turn++
	read := d.pool.settledN // the settles written before the deliveries due are read
	for k, n := range d.pool.ended {
		if n <= read {
			delete(d.pool.ended, k)
		}
	}
	d.mu.Unlock()
	eps = append(eps[first:], eps[:first]...)

	now := d.o.Now()
	queues := make([][]models.Delivery, len(eps))
	for i, ep := range eps {
		d.mu.Lock()
		held := d.pool.held[ep.ID]
		free := min(d.share(ep.ID, len(eps))-d.pool.sends[ep.ID], d.o.MaxInFlight-d.pool.sending)
		d.mu.Unlock()
		if free <= 0 {
			continue
		}
		due, err := d.o.Store.Outbound().Due(ctx, ep.ID, now, free+held) // the unsettled are due still
		if err != nil {
			return err
		}
		queues[i] = due
	}
	for started := true; started; {
		started = false
		for i, ep := range eps {
			for len(queues[i]) > 0 {
				dl := queues[i][0]
				queues[i] = queues[i][1:]
				if ok, full := d.take(dl, len(eps), now, read); full {
					return nil
				} else if ok {
					d.start(ctx, ep, dl)
					started = true
					break // one a turn
				}
			}
		}
	}
	return nil
}

// share is how many sends endpoint id may have under way, of n enabled:
// PerEndpoint, at most an even part of MaxInFlight (one at least), and
// one while its last send got no answer. The caller holds d.mu.
func (d *Dispatcher) share(id string, n int) int {
	if d.pool.silent[id] {
		return 1
	}
	return min(d.o.PerEndpoint, max(1, d.o.MaxInFlight/n))
}

// take claims a slot for dl if it is not unsettled already, no settle of
// it was written since the deliveries due were read (read: settledN
// then), and its endpoint is within its share; full when no slot is left at all, too many settles wait,
// or the lease has too little left to run for a send.
func (d *Dispatcher) take(dl models.Delivery, n int, now time.Time, read int64) (ok, full bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := &d.pool
	if p.sending >= d.o.MaxInFlight || len(p.unsettled) >= d.o.MaxInFlight+settleBatch ||
		!now.Add(d.sendBudget()).Before(d.leaseUntil) {
		return false, true
	}
	key := dl.Key()
	if p.unsettled[key] || p.ended[key] > read || p.sends[dl.EndpointID] >= d.share(dl.EndpointID, n) {
		return false, false
	}
	p.unsettled[key] = true
	p.held[dl.EndpointID]++
	p.sending++
	p.sends[dl.EndpointID]++
	return true, false
}

// start sends dl to ep in the background: the send queues its settlement,
// frees its slot, wakes a round for it, then writes the settlements queued
// unless another send is writing them.
func (d *Dispatcher) start(ctx context.Context, ep models.Endpoint, dl models.Delivery) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.send(ctx, ep, dl)
		d.mu.Lock()
		d.pool.sent(dl)
		d.mu.Unlock()
		d.Notify()
		d.flushSettles(ctx)
	}()
}

// sent frees the slot of dl's send.
func (p *pool) sent(dl models.Delivery) {
	p.sending--
	if p.sends[dl.EndpointID]--; p.sends[dl.EndpointID] <= 0 {
		delete(p.sends, dl.EndpointID)
	}
}

// settled ends dl's turn: its settle was written (or failed).
func (p *pool) settled(dl models.Delivery) {
	p.settledN++
	key := dl.Key()
	p.ended[key] = p.settledN
	delete(p.unsettled, key)
	if p.held[dl.EndpointID]--; p.held[dl.EndpointID] <= 0 {
		delete(p.held, dl.EndpointID)
	}
}
