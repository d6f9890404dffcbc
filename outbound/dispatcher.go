package outbound

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The dispatcher moves changes from the outbox to the endpoints. One
// instance at a time dispatches: the one holding the lease LeaseName, as
// the sweep's. Its parts, a file each:
//   - the relay (relay.go) moves the outbox's entries, a batch a write, to
//     the deliveries of every endpoint that wants their type, each in the
//     endpoint's delivery of its object (models.Delivery.Queue keeps the
//     newest change not yet received), with the changes each made to
//     other objects that have no entry of their own (derive.go);
//   - the sender pool (pool.go) takes the deliveries due up to its free
//     slots, shared out round-robin across the endpoints, at most one per
//     endpoint and object at a time, and sends each (attempt.go):
//     rendering the object's state as it is now (so an app never receives
//     an older state after a newer one), naming the fields changed since
//     the state it last received, and skipping a state whose fields did
//     not change;
//   - the settler (settle.go) records what became of the sends, a batch
//     a write, after their slots are free again;
//   - resyncs (resync.go) queue every object an endpoint wants.
//
// Nothing senses load: the store shares its capacity out (the embedded
// store's writer takes Clerk's deliveries first and the dispatcher's
// writes within their share of each transaction), and the pool's slots
// bound the sends.
//
// Several instances never send one delivery at once: a send starts only
// while the lease has longer to run than a send may take (the request's
// timeout and the settles before its own), so a holder that lost the
// lease (and cannot tell) has finished its sends before another can take
// it.

// LeaseName is the lease of the instance that dispatches.
const LeaseName = "outbound"

// Renderer renders an object as the REST API shows it to an admin (a
// tombstone too), and says whether it is deleted. An object usersync no
// longer has (erased) is models.ErrNotFound.
type Renderer func(ctx context.Context, k models.Kind, objectID string) (data json.RawMessage, deleted bool, err error)

// WaitError is a Renderer's answer for an object that must not be sent
// yet (a payer's plan pending between a plan change's two events): its
// delivery is tried again at Until, with no attempt counted.
type WaitError struct{ Until time.Time }

func (e *WaitError) Error() string {
	return "not settled before " + e.Until.UTC().Format(time.RFC3339Nano)
}

// Observer is told of each attempt, each endpoint usersync disables, and,
// every BacklogEvery while Run runs, the endpoints and their backlogs,
// and when the oldest change of the outbox (not fanned out yet) applied
// (nil: none): the metrics, which a scrape never reads from the store.
type Observer interface {
	Attempted(endpointID string, v Verdict, latency time.Duration)
	Disabled(endpointID, reason string)
	Backlog(endpoints []models.Endpoint, backlog map[string]models.Backlog, outbox *time.Time, now time.Time)
}

// BacklogEvery is how often Run reads the backlogs for the Observer.
const BacklogEvery = 15 * time.Second

// Options configure a Dispatcher. Store, Render and Sender are required.
type Options struct {
	Store  repository.Store
	Render Renderer
	Sender *Sender
	// SendTimeout is the Sender's time limit of a request (DefaultTimeout).
	SendTimeout time.Duration
	Owner       string // names this instance in the lease
	// Now is the dispatcher's clock, and After its timer (time.After):
	// every time it reads and every wait of Run.
	Now         func() time.Time
	After       func(time.Duration) <-chan time.Time
	Jitter      func() float64 // in [0, 1): the retry schedule's jitter
	Log         *slog.Logger
	Observer    Observer
	MaxInFlight int           // sends at once, in all (64)
	PerEndpoint int           // sends at once to one endpoint (32)
	Lease       time.Duration // the lease's length (60 s)
	Poll        time.Duration // Run's round when nothing wakes it (500 ms at most)
}

// Dispatcher sends outbound webhooks.
type Dispatcher struct {
	o    Options
	wake chan struct{}
	wg   sync.WaitGroup
	// turnedOn counts RecordNow's calls (see Refresh).
	turnedOn atomic.Int64

	mu        sync.Mutex
	endpoints map[string]models.Endpoint
	pool      pool
	settles   settler
	// leaseUntil is when the lease held runs out (zero: not held).
	leaseUntil  time.Time
	prunedAt    time.Time
	refreshedAt time.Time // the last Refresh of a round
	triedAt     time.Time // when a round last took or tried to take the lease
	relayedAt   time.Time // when a round last relayed the outbox
	relayMore   bool      // the last relay left entries to move
	// endpointsChanged: this instance's API changed an endpoint since the
	// last round read them (EndpointsChanged).
	endpointsChanged atomic.Bool
}

// NewDispatcher returns a dispatcher with o's defaults filled in.
func NewDispatcher(o Options) *Dispatcher {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultTimeout
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.PerEndpoint <= 0 {
		o.PerEndpoint = 32
	}
	if o.Lease <= 0 {
		o.Lease = 60 * time.Second
	}
	if o.Poll <= 0 || o.Poll > MaxPoll {
		o.Poll = MaxPoll
	}
	return &Dispatcher{o: o, wake: make(chan struct{}, 1), endpoints: map[string]models.Endpoint{}, pool: newPool()}
}

// MaxPoll is the longest Run waits for a round when nothing wakes it: a
// change applied on another instance, or a retry come due.
const MaxPoll = 500 * time.Millisecond

// Notify wakes Run for a round now: a change applied, a send ended.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for the sends under way and
// their settles. Its rounds are woken by Notify (at most one every
// MinRound: a round takes every change applied meanwhile) with a poll of
// Options.Poll behind it; it reads the backlogs for the Observer every
// BacklogEvery.
func (d *Dispatcher) Run(ctx context.Context) {
	var lastErr string
	var observed time.Time
	for {
		round := d.o.Now()
		if round.Sub(observed) >= BacklogEvery {
			observed = round
			d.observeBacklog(ctx, round)
		}
		err := d.round(ctx, false)
		if err != nil && ctx.Err() == nil && err.Error() != lastErr {
			lastErr = err.Error()
			d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: a round failed", slog.String("err", lastErr))
		} else if err == nil {
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			d.wg.Wait()
			d.releaseLease(ctx)
			return
		case <-d.o.After(d.o.Poll):
		case <-d.wake:
			if rest := MinRound - d.o.Now().Sub(round); rest > 0 {
				select {
				case <-ctx.Done():
				case <-d.o.After(rest):
				}
			}
		}
	}
}

// MinRound is the least time between two rounds of Run that Notify woke.
const MinRound = 10 * time.Millisecond

// observeBacklog reads the endpoints and their backlogs: it marks a
// disabled endpoint that keeps too many changes as needing a resync, and
// tells the Observer.
func (d *Dispatcher) observeBacklog(ctx context.Context, now time.Time) {
	ob := d.o.Store.Outbound()
	eps, err := ob.Endpoints(ctx)
	var (
		b      map[string]models.Backlog
		oldest time.Time
		some   bool
	)
	if err == nil {
		b, err = ob.Backlog(ctx)
	}
	if err == nil {
		oldest, some, err = ob.OutboxOldest(ctx)
	}
	if err != nil {
		return // the gauges keep their last values; the round's error is logged
	}
	for _, e := range eps {
		// A disabled endpoint keeps changes up to a bound: past it, it
		// keeps no more, and needs a resync.
		if !e.Enabled && !e.NeedsResync && b[e.ID].Pending >= models.MaxKeptWhileDisabled {
			if err := d.o.Store.Outbound().MarkNeedsResync(ctx, e.ID); err == nil {
				d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: a disabled endpoint keeps no more changes; resync it once it is enabled",
					slog.String("endpoint", e.ID), slog.Int("kept", models.MaxKeptWhileDisabled))
			}
		}
	}
	var outbox *time.Time
	if some {
		outbox = &oldest
	}
	if d.o.Observer != nil {
		d.o.Observer.Backlog(eps, b, outbox, now)
	}
}

// Step runs one round, the endpoints read and the outbox relayed whatever
// the last round did, and waits for the sends it started and their
// settles.
func (d *Dispatcher) Step(ctx context.Context) error {
	err := d.round(ctx, true)
	d.wg.Wait()
	return err
}

// EndpointsChanged wakes Run for a round that reads the endpoints first:
// this instance's API changed one.
func (d *Dispatcher) EndpointsChanged() {
	d.endpointsChanged.Store(true)
	d.Notify()
}

// relayEvery is how often a round woken by changes relays the outbox
// while some endpoint keeps changes (a round with more left to move
// relays at once); with none, every Poll: the rounds a burst of changes
// wakes read little beyond the deliveries due.
const relayEvery = 25 * time.Millisecond

// round takes or keeps the lease, reads the endpoints (when this
// instance's API changed one, else every Poll), relays the outbox, takes
// the resyncs under way a page further, and starts the sends due. With
// all, every part runs.
func (d *Dispatcher) round(ctx context.Context, all bool) error {
	now := d.o.Now()
	d.mu.Lock()
	follower := d.leaseUntil.IsZero()
	d.mu.Unlock()
	if !all && follower && now.Sub(d.triedAt) < d.o.Poll {
		return nil // another instance leads: try again a Poll later
	}
	d.triedAt = now
	lead, err := d.lead(ctx)
	if err != nil || !lead {
		if err == nil && now.Sub(d.refreshedAt) >= d.o.Poll {
			// It records the changes it applies still.
			d.refreshedAt = now
			err = d.Refresh(ctx)
		}
		return err
	}
	// The endpoints as they are now: a send never starts to an endpoint
	// deleted or disabled through this instance's API before the round,
	// nor signs with a secret rotated through it before it; through
	// another instance's, within a Poll.
	if all || d.endpointsChanged.Swap(false) || now.Sub(d.refreshedAt) >= d.o.Poll {
		d.refreshedAt = now
		if err := d.Refresh(ctx); err != nil {
			return err
		}
	}
	every := relayEvery
	if !d.keeping() {
		every = d.o.Poll
	}
	if all || d.relayMore || now.Sub(d.relayedAt) >= every {
		d.relayedAt = now
		more, err := d.relay(ctx)
		d.relayMore = more
		if err != nil {
			return err
		}
	}
	if err := d.resync(ctx); err != nil {
		return err
	}
	d.prune(ctx)
	return d.sendDue(ctx)
}

// keeping reports whether some endpoint keeps changes (enabled, or
// disabled and keeping them until it is enabled).
func (d *Dispatcher) keeping() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	eps := make([]models.Endpoint, 0, len(d.endpoints))
	for _, e := range d.endpoints {
		eps = append(eps, e)
	}
	return models.Recording(eps)
}

// Refresh reads the endpoints, and turns the outbox's recording on while
// one is enabled. Every instance refreshes, leading or not: each records
// the changes it applies.
func (d *Dispatcher) Refresh(ctx context.Context) error {
	turnedOn := d.turnedOn.Load()
	eps, err := d.o.Store.Outbound().Endpoints(ctx)
	if err != nil {
		return err
	}
	m := make(map[string]models.Endpoint, len(eps))
	for _, e := range eps {
		m[e.ID] = e
	}
	// A read that began before RecordNow turned recording on may not see
	// the endpoint it was turned on for: it does not turn it off.
	if on := models.Recording(eps); on || d.turnedOn.Load() == turnedOn {
		d.o.Store.Outbound().SetRecording(on)
	}
	d.mu.Lock()
	d.endpoints = m
	d.pool.forget(m)
	d.mu.Unlock()
	return nil
}

// RecordNow turns the outbox's recording on at once (an endpoint was just
// enabled), whatever a read of the endpoints under way finds.
func (d *Dispatcher) RecordNow() {
	d.turnedOn.Add(1)
	d.o.Store.Outbound().SetRecording(true)
}

// prune deletes the attempts older than models.AttemptsKept, once an hour.
func (d *Dispatcher) prune(ctx context.Context) {
	now := d.o.Now()
	if now.Sub(d.prunedAt) < time.Hour {
		return
	}
	d.prunedAt = now
	if _, err := d.o.Store.Outbound().DeleteAttemptsBefore(ctx, now.Add(-models.AttemptsKept), 10000); err != nil {
		d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: old attempts not deleted", slog.String("err", err.Error()))
	}
}
