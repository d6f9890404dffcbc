package outbound

import (
	"context"
	"log/slog"
	"time"
)

// sendBudget is the longest a send may take: the request, then the write
// of settlements under way and the one of its own (settle.go).
func (d *Dispatcher) sendBudget() time.Duration { return d.o.SendTimeout + 2*settleTimeout }

// releaseLease gives the lease up, once the sends under way have settled, so
// that another instance (or this one restarted) dispatches at once rather
// than when the lease runs out.
func (d *Dispatcher) releaseLease(ctx context.Context) {
	d.mu.Lock()
	held := !d.leaseUntil.IsZero()
	d.leaseUntil = time.Time{}
	d.mu.Unlock()
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := d.o.Store.Leases().Release(ctx, LeaseName, d.o.Owner); err != nil {
		d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: the lease was not released; it runs out by itself",
			slog.String("err", err.Error()))
	}
}

// lead takes or extends the lease; false when another instance holds it.
func (d *Dispatcher) lead(ctx context.Context) (bool, error) {
	now := d.o.Now()
	d.mu.Lock()
	held := d.leaseUntil
	d.mu.Unlock()
	if now.Before(held.Add(-d.o.Lease * 2 / 3)) {
		return true, nil
	}
	until := now.Add(d.o.Lease)
	l := d.o.Store.Leases()
	ok, err := false, error(nil)
	if now.Before(held) {
		ok, err = l.Extend(ctx, LeaseName, d.o.Owner, until)
	}
	if err == nil && !ok {
		ok, err = l.Acquire(ctx, LeaseName, d.o.Owner, now, until)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil:
		return false, err // the lease runs out as it is
	case ok:
		d.leaseUntil = until
	default:
		d.leaseUntil = time.Time{}
	}
	return ok, nil
}
