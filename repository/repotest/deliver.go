package repotest

import (
	"context"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Deliverer is what the sync service applies events through (a store's
// Deliver and Reapply).
type Deliverer interface {
	Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)
	Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error)
}

// Hooked is a store's Deliver and Reapply with a hook run before each
// change is applied, once its event is stored: for tests that fail, hold
// or stop an apply on the path production takes.
type Hooked struct {
	store  repository.Store
	before func(ctx context.Context, ch models.Change) error
}

// Hook returns s's deliveries with before run before each change is
// applied. An error from before is the change's failure, as a store's
// apply error is: the event stays stored, the change unapplied, and the
// error goes to the sync service; nil lets s apply it.
func Hook(s repository.Store, before func(ctx context.Context, ch models.Change) error) *Hooked {
	return &Hooked{store: s, before: before}
}

// Deliver stores ev, runs the hook, and lets the store apply ch.
func (h *Hooked) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	stored, created, err := h.store.Events().Record(ctx, ev)
	if err != nil {
		return models.Delivered{}, err
	}
	if stored.Status.Finished() {
		return models.Delivered{Event: stored, Created: created}, nil
	}
	if err := h.before(ctx, ch); err != nil {
		return models.Delivered{Event: stored, Created: created}, err
	}
	d, err := h.store.Deliver(ctx, ev, ch, now)
	d.Created = created
	return d, err
}

// Reapply runs the hook and lets the store apply ch.
func (h *Hooked) Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if err := h.before(ctx, ch); err != nil {
		return models.Delivered{Event: ev}, err
	}
	return h.store.Reapply(ctx, ev, ch, now)
}

// Deliver is Store.Deliver, unless the database is down.
func (o *Outage) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if err := o.err(); err != nil {
		return models.Delivered{}, err
	}
	return o.Store.Deliver(ctx, ev, ch, now)
}

// Reapply is Store.Reapply, unless the database is down.
func (o *Outage) Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if err := o.err(); err != nil {
		return models.Delivered{Event: ev}, err
	}
	return o.Store.Reapply(ctx, ev, ch, now)
}
