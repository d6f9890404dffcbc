package outbound

import (
	"context"

	"github.com/usersync/usersync/models"
)

// relayBatch is how many outbox entries one write of the relay moves;
// relayBatches bounds the batches of one round (a round with more left
// wakes the next). relayFlush bounds the changes one write queues (a
// cascade may queue many); cascadePage is a cascade's page.
const (
	relayBatch   = 256
	relayBatches = 4
	cascadePage  = 500
	relayFlush   = 512
)

// relay moves the outbox's changes to the deliveries of the endpoints that
// want them, as they are now, with the changes each made to other objects
// (derivations), a batch a write: the endpoints are read again first (an
// endpoint created since the last read must not miss a change recorded for
// it). Each write is the store's background work: it shares the store with
// Clerk's deliveries, never ahead of them.
func (d *Dispatcher) relay(ctx context.Context) (more bool, err error) {
	ob := d.o.Store.Outbound()
	for i := range relayBatches {
		entries, err := ob.Outbox(ctx, relayBatch)
		if err != nil || len(entries) == 0 {
			return false, err
		}
		if i == 0 {
			if err := d.Refresh(ctx); err != nil {
				return false, err
			}
		}
		now := d.o.Now()
		fs := make([]models.Fanout, 0, len(entries))
		done := make([]string, 0, len(entries))
		queue := func(ps ...models.Pending) error {
			for _, p := range ps {
				if eps := d.wanting(p); len(eps) > 0 {
					fs = append(fs, models.Fanout{Pending: p, Endpoints: eps})
				}
			}
			if len(fs) < relayFlush {
				return nil
			}
			// Written before the entries are taken out of the outbox:
			// doing it again (after a crash) changes nothing.
			err := ob.Fanout(ctx, fs, nil, now)
			fs = nil
			return err
		}
		for _, e := range entries {
			if e.Change != models.EventNested { // its own object did not change
				if err := queue(e.Pending); err != nil {
					return false, err
				}
			}
			if err := d.derive(ctx, e.Pending, queue); err != nil {
				return false, err
			}
			done = append(done, e.Key)
		}
		if err := ob.Fanout(ctx, fs, done, now); err != nil {
			return false, err
		}
		if len(entries) < relayBatch {
			return false, nil
		}
	}
	d.Notify() // more wait: the next round moves them
	return true, nil
}

// wanting returns the endpoints that keep p's type (models.Endpoint.Keeps:
// the enabled ones, and the disabled ones that keep changes until they are
// enabled again).
func (d *Dispatcher) wanting(p models.Pending) []string {
	typ := models.OutboundType(p.Kind, p.Change)
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id, e := range d.endpoints {
		if e.Keeps(typ) {
			ids = append(ids, id)
		}
	}
	return ids
}

// wantsKind reports whether an endpoint keeps some type of kind k: what
// a derivation reads for.
func (d *Dispatcher) wantsKind(k models.Kind) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.endpoints {
		for _, c := range []models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted} {
			if e.Keeps(models.OutboundType(k, c)) {
				return true
			}
		}
	}
	return false
}
