package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The dispatcher moves changes from the outbox to the endpoints. One
// instance at a time dispatches: the one holding the lease LeaseName, as
// the sweep's. A round (Step):
//  1. fans the outbox out: each change that applied is queued for every
//     enabled endpoint that wants its type, in each endpoint's delivery of
//     its object (models.Delivery.Queue keeps the newest change not yet
//     received), with the changes it made to other objects that have no
//     entry of their own (derivations): the deletion of each child a
//     cascade deleted, the states its event nested that applied, the
//     payer's plan;
//  2. sends the deliveries due, at most one per endpoint and object at a
//     time, rendering the object's state as it is now (so an app never
//     receives an older state after a newer one), naming the fields
//     changed since the state it last received, and skipping a state whose
//     fields did not change;
//  3. records each attempt, the retry schedule, and the endpoint's health.
//
// Several instances never send one delivery at once: a send starts only
// while the lease has longer to run than a send may take (the request's
// timeout and the settle's), so a holder that lost the lease (and cannot
// tell) has finished its sends before another can take it.

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
	Now         func() time.Time
	Jitter      func() float64 // in [0, 1): the retry schedule's jitter
	Log         *slog.Logger
	Observer    Observer
	MaxInFlight int // sends at once, in all (32)
	PerEndpoint int // sends at once to one endpoint (8)
	// Busy, if set, says that changes are being ingested now (a burst):
	// the dispatcher then gives way to them. For BusyHold it neither fans
	// out nor sends; past it, it fans out busyFanoutBatch entries a second
	// and sends one at a time per endpoint; rounds woken by changes are
	// BusyRound apart. Outbound webhooks are asynchronous; Clerk's
	// deliveries wait for their answer.
	Busy  func() bool
	Lease time.Duration // the lease's length (60 s)
	Tick  time.Duration // Run's round when nothing wakes it (1 s)
}

// Dispatcher sends outbound webhooks.
type Dispatcher struct {
	o    Options
	wake chan struct{}
	wg   sync.WaitGroup
	// turnedOn counts RecordNow's calls (see Refresh).
	turnedOn atomic.Int64

	mu          sync.Mutex
	endpoints   map[string]models.Endpoint
	inflight    map[string]bool
	perEndpoint map[string]int
	// silent: the endpoints whose last send got no answer (a timeout, a
	// refused connection); each has one send at a time until it answers.
	silent map[string]bool
	turn   int // where the next round's hand-out of slots starts
	// released counts the sends ended; ended has, per delivery, the count
	// when its last send ended, so that a round does not start again a
	// delivery it read as due before that send settled it.
	released   int64
	ended      map[string]int64
	leaseUntil time.Time
	prunedAt   time.Time
	fannedOut  time.Time // the last fan-out's start
	busySince  time.Time // when the burst under way began (Busy); zero: none
	busyAt     time.Time // when a round last saw Busy
}

// NewDispatcher returns a dispatcher with o's defaults filled in.
func NewDispatcher(o Options) *Dispatcher {
	if o.Now == nil {
		o.Now = time.Now
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
		o.MaxInFlight = 32
	}
	if o.PerEndpoint <= 0 {
		o.PerEndpoint = 8
	}
	if o.Lease <= 0 {
		o.Lease = 60 * time.Second
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	return &Dispatcher{o: o, wake: make(chan struct{}, 1), endpoints: map[string]models.Endpoint{},
		inflight: map[string]bool{}, perEndpoint: map[string]int{}, silent: map[string]bool{}, ended: map[string]int64{}}
}

// Notify wakes Run for a round now: a change applied.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run dispatches until ctx ends, then waits for the sends under way.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(d.o.Tick)
	defer t.Stop()
	var lastErr string
	var observed, refreshed time.Time
	for {
		if now := d.o.Now(); now.Sub(observed) >= BacklogEvery {
			observed = now
			d.observeBacklog(ctx, now)
		}
		// The endpoints are read once a Tick, not at every wake-up: a
		// burst of changes wakes the loop at each.
		var err error
		if time.Since(refreshed) >= d.o.Tick {
			refreshed = time.Now()
			err = d.Refresh(ctx)
		}
		round := time.Now()
		if err == nil {
			err = d.round(ctx)
		}
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
		case <-t.C:
		case <-d.wake:
			// Rounds woken by changes are MinRound apart at least (one
			// round takes every change applied meanwhile), BusyRound
			// while changes are being ingested.
			gap := MinRound
			if d.o.Busy != nil && d.o.Busy() {
				gap = BusyRound
			}
			if rest := gap - time.Since(round); rest > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(rest):
				}
			}
		}
	}
}

// MinRound is the least time between two rounds of Run that changes woke,
// and BusyRound while changes are being ingested (Options.Busy).
const (
	MinRound  = 20 * time.Millisecond
	BusyRound = 250 * time.Millisecond
)

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

// Step reads the endpoints, runs one round and waits for the sends it
// started.
func (d *Dispatcher) Step(ctx context.Context) error {
	err := d.Refresh(ctx)
	if err == nil {
		err = d.round(ctx)
	}
	d.wg.Wait()
	return err
}

// round takes or keeps the lease, fans the outbox out and starts the
// sends due, at the pace a burst of ingestion leaves.
func (d *Dispatcher) round(ctx context.Context) error {
	lead, err := d.lead(ctx)
	if err != nil || !lead {
		return err
	}
	p := d.pace(d.o.Now())
	if p == held {
		return nil
	}
	// The endpoints as they are now: a send never starts to an endpoint
	// deleted or disabled before the round, nor signs with a secret
	// rotated before it.
	if err := d.Refresh(ctx); err != nil {
		return err
	}
	if err := d.fanout(ctx, p); err != nil {
		return err
	}
	if err := d.resync(ctx); err != nil {
		return err
	}
	d.prune(ctx)
	return d.sendDue(ctx, p)
}

// BusyHold is how long a burst of ingestion (Options.Busy) holds the
// dispatcher off: for that long after it began, nothing is fanned out or
// sent, so a burst pays for recording its changes only; a longer burst
// shares the store with the dispatcher's slow pace. A burst is over once
// no round has seen Busy for BusyLinger: a moment with fewer deliveries in
// flight inside a burst does not end it (a round at full speed then would
// fan out thousands of its changes while it goes on).
const (
	BusyHold   = 30 * time.Second
	BusyLinger = 2 * time.Second
)

// A pace is how a round runs: at full speed, given way to a burst, or
// held off by one.
type pace int

const (
	full pace = iota
	givingWay
	held
)

// pace is the pace of a round at now.
func (d *Dispatcher) pace(now time.Time) pace {
	if d.o.Busy != nil && d.o.Busy() {
		d.busyAt = now
		if d.busySince.IsZero() {
			d.busySince = now
		}
	} else if d.busySince.IsZero() || now.Sub(d.busyAt) >= BusyLinger {
		d.busySince = time.Time{}
		return full
	}
	if now.Sub(d.busySince) < BusyHold {
		return held
	}
	return givingWay
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
	for id := range d.silent {
		if _, ok := m[id]; !ok {
			delete(d.silent, id) // deleted
		}
	}
	d.mu.Unlock()
	return nil
}

// RecordNow turns the outbox's recording on at once (an endpoint was just
// enabled), whatever a read of the endpoints under way finds.
func (d *Dispatcher) RecordNow() {
	d.turnedOn.Add(1)
	d.o.Store.Outbound().SetRecording(true)
}

// sendBudget is the longest a send may take: the request, then its
// settle.
func (d *Dispatcher) sendBudget() time.Duration { return d.o.SendTimeout + settleTimeout }

// settleTimeout bounds the write that records an attempt.
const settleTimeout = 5 * time.Second

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

// fanoutBatch is how many outbox entries one fan-out reads; fanoutRounds
// bounds the reads of one round. fanoutFlush bounds the changes one write
// queues (a cascade may queue many).
const (
	fanoutBatch     = 256
	fanoutRounds    = 8
	busyFanoutBatch = 64
	busyFanoutEvery = time.Second
	cascadePage     = 500
	fanoutFlush     = 512
)

// fanout queues the outbox's changes for the endpoints that want them,
// as they are now, with the changes each made to other objects
// (derivations): the endpoints are read again first (an endpoint created
// since the last read must not miss a change recorded for it).
func (d *Dispatcher) fanout(ctx context.Context, pc pace) error {
	ob := d.o.Store.Outbound()
	rounds, batch := fanoutRounds, fanoutBatch
	if pc == givingWay {
		// One small fan-out a second, between the changes being ingested.
		if d.o.Now().Sub(d.fannedOut) < busyFanoutEvery {
			return nil
		}
		rounds, batch = 1, busyFanoutBatch
	}
	d.fannedOut = d.o.Now()
	for i := range rounds {
		entries, err := ob.Outbox(ctx, batch)
		if err != nil || len(entries) == 0 {
			return err
		}
		if i == 0 {
			if err := d.Refresh(ctx); err != nil {
				return err
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
			if len(fs) < fanoutFlush {
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
					return err
				}
			}
			if err := d.derive(ctx, e.Pending, queue); err != nil {
				return err
			}
			done = append(done, e.Key)
		}
		if err := ob.Fanout(ctx, fs, done, now); err != nil {
			return err
		}
		if len(entries) < batch {
			return nil
		}
	}
	return nil
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

// A derivation is one rule of the fan-out: the changes an outbox entry's
// change of kind From made to objects of kind To, which are sent in
// their own right but have no entry of their own (a store records one
// entry per event, the change of the event's own object). The relations
// between kinds are the kinds table's (models.KindSpec's Parents and
// Nests; a payer's plan is no kind of it); the reads are here.
type derivation struct {
	From, To models.Kind
	Read     deriveFunc
}

// deriveFunc walks the changes the change p made to objects of one kind,
// giving them to queue a batch at a time. An object usersync no longer has
// (erased) has no change to give.
type deriveFunc func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error

// derivations are every rule of the fan-out, one row per (From, To): a
// kind whose change changes objects of another kind adds a row.
var derivations = []derivation{
	// A deletion's cascade: the memberships deleted with their user or
	// organization (models.KindSpec.Parents).
	{From: models.KindUser, To: models.KindMembership,
		Read: cascaded(func(id string) models.MembershipFilter { return models.MembershipFilter{UserID: id} })},
	{From: models.KindOrganization, To: models.KindMembership,
		Read: cascaded(func(id string) models.MembershipFilter { return models.MembershipFilter{OrgID: id} })},
	{From: models.KindOrganization, To: models.KindInvitation, Read: cascadedInvitations},
	// Nested states (models.KindSpec.Nests): the organization a
	// membership's event carries, the items a subscription's event lists.
	{From: models.KindMembership, To: models.KindOrganization, Read: nestedOrganization},
	{From: models.KindSubscription, To: models.KindSubscriptionItem, Read: nestedItems},
	// The payer's plan, of a subscription's or an item's change.
	{From: models.KindSubscription, To: models.KindPlan, Read: payerPlan(func(ctx context.Context, s repository.Store, id string) (models.Payer, error) {
		sub, err := s.Billing().Subscription(ctx, id)
		return sub.Payer, err
	})},
	{From: models.KindSubscriptionItem, To: models.KindPlan, Read: payerPlan(func(ctx context.Context, s repository.Store, id string) (models.Payer, error) {
		it, err := s.Billing().Item(ctx, id)
		return it.Payer, err
	})},
}

// derive queues the changes p's change made to other objects
// (derivations), of the kinds some endpoint wants.
func (d *Dispatcher) derive(ctx context.Context, p models.Pending, queue func(...models.Pending) error) error {
	for _, r := range derivations {
		if r.From != p.Kind || !d.wantsKind(r.To) {
			continue
		}
		if err := r.Read(ctx, d.o.Store, p, queue); err != nil {
			return err
		}
	}
	return nil
}

// gone is nil for an error that says the object is not there (erased):
// it has nothing to send.
func gone(err error) error {
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	return err
}

// payerPlan walks the plan of the payer of p's object (payerOf), which
// p's change may have changed. Its version is the time the change applied
// (a plan has no Clerk time of its own), and it is queued even when not
// newer (models.Delivery.Queue): whether the plan changed is for its
// render to say.
func payerPlan(payerOf func(ctx context.Context, s repository.Store, id string) (models.Payer, error)) deriveFunc {
	return func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
		payer, err := payerOf(ctx, s, p.ObjectID)
		if err != nil || payer.ID == "" {
			return gone(err)
		}
		plan := models.Pending{Kind: models.KindPlan, ObjectID: payer.ID, UserID: payer.UserID(), Change: models.EventUpdated,
			Origin: p.Origin, At: p.At, Version: models.Version{SourceTime: p.At, EventID: p.Version.EventID}}
		return queue(plan)
	}
}

// cascaded walks the memberships of a deleted parent that its deletion
// deleted: tombstones whose last event is the parent's deletion.
func cascaded(filter func(parentID string) models.MembershipFilter) deriveFunc {
	return func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
		if p.Change != models.EventDeleted {
			return nil
		}
		f := filter(p.ObjectID)
		f.IncludeDeleted, f.Limit = true, cascadePage
		for {
			page, err := s.Memberships().List(ctx, f)
			if err != nil {
				return err
			}
			var ps []models.Pending
			for _, m := range page.Memberships {
				if m.DeletedAt == nil || m.LastEventID != p.Version.EventID {
					continue
				}
				ps = append(ps, models.Pending{Kind: models.KindMembership, ObjectID: m.MembershipID, UserID: m.UserID,
					Version: models.Version{SourceTime: m.SourceUpdatedAt, EventID: m.LastEventID, Deleted: true},
					Change:  models.EventDeleted, Origin: models.OriginCascade, At: p.At})
			}
			if err := queue(ps...); err != nil {
				return err
			}
			if f.After = page.NextCursor; f.After == "" {
				return nil
			}
		}
	}
}

// cascadedInvitations walks the invitations of a deleted organization
// that its deletion deleted: tombstones whose last event is the
// organization's deletion.
func cascadedInvitations(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	if p.Change != models.EventDeleted {
		return nil
	}
	f := models.InvitationFilter{OrgID: p.ObjectID, IncludeDeleted: true, Limit: cascadePage}
	for {
		page, err := s.Invitations().List(ctx, f)
		if err != nil {
			return err
		}
		var ps []models.Pending
		for _, inv := range page.Invitations {
			if inv.DeletedAt == nil || inv.LastEventID != p.Version.EventID {
				continue
			}
			ps = append(ps, models.Pending{Kind: models.KindInvitation, ObjectID: inv.InvitationID, UserID: inv.UserID,
				Version: inv.Version(), Change: models.EventDeleted, Origin: models.OriginCascade, At: p.At})
		}
		if err := queue(ps...); err != nil {
			return err
		}
		if f.After = page.NextCursor; f.After == "" {
			return nil
		}
	}
}

// nestedOrganization walks the organization state a membership's event
// carried (models.MembershipChange.Organization) when it is what applied
// and is still the organization's newest: the organization's last event
// is the membership's. When a later change overwrote it, that change has
// an entry of its own, which sends the newer state in its place; when it
// was older than the organization's, nothing changed.
func nestedOrganization(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	m, err := s.Memberships().Get(ctx, p.ObjectID)
	if err != nil || m.OrgID == "" {
		return gone(err)
	}
	o, err := s.Organizations().Get(ctx, m.OrgID)
	if err != nil || o.LastEventID != p.Version.EventID {
		return gone(err)
	}
	return queue(nested(p, models.KindOrganization, o.OrgID, "", o.Version(), o.CreatedAt, o.UpdatedAt))
}

// nestedItems walks the items a subscription's event listed whose state
// from it applied and is still the item's newest (as nestedOrganization),
// among the items of the subscription's payer (Billing.Items: its newest
// models.MaxPayerItems; a payer has a few).
func nestedItems(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	sub, err := s.Billing().Subscription(ctx, p.ObjectID)
	if err != nil {
		return gone(err)
	}
	items, err := s.Billing().Items(ctx, sub.Payer)
	if err != nil {
		return err
	}
	var ps []models.Pending
	for _, it := range items {
		if it.LastEventID == p.Version.EventID && it.SubscriptionID == p.ObjectID {
			ps = append(ps, nested(p, models.KindSubscriptionItem, it.ItemID, it.Payer.UserID(), it.Version(), it.CreatedAt, it.UpdatedAt))
		}
	}
	return queue(ps...)
}

// nested is the change of an object (kind k, id, its user) whose state
// the event of p carried and which applied, at the object's version v,
// with p's origin: created when it created usersync's copy of the object
// (the copy's first write, created, is its last, updated: every write of
// a state moves updated), deleted for a tombstone, updated otherwise.
func nested(p models.Pending, k models.Kind, id, userID string, v models.Version, created, updated time.Time) models.Pending {
	c := models.EventUpdated
	switch {
	case v.Deleted:
		c = models.EventDeleted
	case created.Equal(updated):
		c = models.EventCreated
	}
	return models.Pending{Kind: k, ObjectID: id, UserID: userID, Version: v, Change: c, Origin: p.Origin, At: p.At}
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

// sendDue starts the sends of the deliveries due, within the bounds. The
// free slots are handed out round-robin, one per endpoint with work at a
// turn, from an endpoint one further each round, and an endpoint holds at
// most its share (share): no endpoint, nor a group of endpoints that do
// not answer, takes the slots of another. The deliveries of a disabled
// endpoint wait, and are sent once it is enabled again.
func (d *Dispatcher) sendDue(ctx context.Context, p pace) error {
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
	first := d.turn % len(eps)
	d.turn++
	eps = append(eps[first:], eps[:first]...)

	now := d.o.Now()
	d.mu.Lock()
	read := d.released // the sends that ended before the deliveries due are read
	for k, n := range d.ended {
		if n <= read {
			delete(d.ended, k)
		}
	}
	d.mu.Unlock()
	queues := make([][]models.Delivery, len(eps))
	for i, ep := range eps {
		d.mu.Lock()
		busy := d.perEndpoint[ep.ID]
		free := min(d.share(ep.ID, p, len(eps))-busy, d.o.MaxInFlight-len(d.inflight))
		d.mu.Unlock()
		if free <= 0 {
			continue
		}
		due, err := d.o.Store.Outbound().Due(ctx, ep.ID, now, free+busy) // the ones in flight are due still
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
				if ok, full := d.take(dl, p, len(eps), now, read); full {
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

// share is how many sends endpoint id may have in flight, of n enabled:
// PerEndpoint, at most an even part of MaxInFlight (one at least), and
// one while its last send got no answer or a burst is being ingested.
// The caller holds d.mu.
func (d *Dispatcher) share(id string, p pace, n int) int {
	if d.silent[id] || p == givingWay {
		return 1
	}
	return min(d.o.PerEndpoint, max(1, d.o.MaxInFlight/n))
}

// take claims a slot for dl if it is not in flight already, no send of
// it ended since the deliveries due were read (read: released then), and
// its endpoint is within its share; full when no slot is left at all, or
// the lease has too little left to run for a send.
func (d *Dispatcher) take(dl models.Delivery, p pace, n int, now time.Time, read int64) (ok, full bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.inflight) >= d.o.MaxInFlight || !now.Add(d.sendBudget()).Before(d.leaseUntil) {
		return false, true
	}
	if d.inflight[dl.Key()] || d.ended[dl.Key()] > read || d.perEndpoint[dl.EndpointID] >= d.share(dl.EndpointID, p, n) {
		return false, false
	}
	d.inflight[dl.Key()] = true
	d.perEndpoint[dl.EndpointID]++
	return true, false
}

// start sends dl to ep in the background, and frees its slot after.
func (d *Dispatcher) start(ctx context.Context, ep models.Endpoint, dl models.Delivery) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.release(dl)
		d.send(ctx, ep, dl)
	}()
}

func (d *Dispatcher) release(dl models.Delivery) {
	d.mu.Lock()
	d.released++
	d.ended[dl.Key()] = d.released
	delete(d.inflight, dl.Key())
	d.perEndpoint[dl.EndpointID]--
	d.mu.Unlock()
}

// drop ends a delivery of an object usersync no longer has (erased):
// dropped.
func (d *Dispatcher) drop(ctx context.Context, dl models.Delivery) {
	r := dl
	r.Status = models.DeliveryDropped
	d.settle(ctx, dl, r, models.Attempt{})
}

// payload is a delivery's body: Standard Webhooks' type, timestamp and
// data, and what changed and where the change came from.
type payload struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
	Changed   []string        `json:"changed"`
	Origin    string          `json:"origin"`
}

// send sends one delivery and records what became of it.
func (d *Dispatcher) send(ctx context.Context, ep models.Endpoint, dl models.Delivery) {
	now := d.o.Now().UTC()
	data, deleted, err := d.o.Render(ctx, dl.Kind, dl.ObjectID)
	var wait *WaitError
	switch {
	case errors.Is(err, models.ErrNotFound):
		d.drop(ctx, dl) // erased meanwhile
		return
	case errors.As(err, &wait):
		r := dl
		r.NextAt = wait.Until
		d.settle(ctx, dl, r, models.Attempt{})
		return
	}
	var fields map[string]string
	if err == nil {
		fields, err = Fingerprint(dl.Key(), data)
	}
	if err != nil {
		d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, "", now)
		return
	}
	change := dl.Change
	switch {
	case deleted:
		change = models.EventDeleted
	case change == models.EventDeleted:
		change = models.EventUpdated
	case change == models.EventCreated && dl.Fields != nil:
		change = models.EventUpdated
	}
	typ := models.OutboundType(dl.Kind, change)
	changed := Changed(dl.Fields, fields)
	if (dl.Fields != nil && len(changed) == 0) || !models.MatchesType(ep.EventTypes, typ) {
		// Nothing the app has not seen, or a state it does not want: done.
		// The state it has keeps the webhook-id it came with (a replay
		// sends it again under that id).
		r := dl
		r.Status, r.Attempts = models.DeliveryDelivered, 0
		if dl.DeliveredMsg != "" {
			r.MessageID = dl.DeliveredMsg
		} else {
			r.DeliveredMsg = dl.MessageID
		}
		d.settle(ctx, dl, r, models.Attempt{})
		return
	}
	sent := data
	if dl.Kind == models.KindPlan {
		if data, err = withPrevious(data, dl.Sent); err != nil {
			d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, typ, now)
			return
		}
	}
	body, err := json.Marshal(payload{Type: typ, Timestamp: now, Data: data, Changed: changed, Origin: dl.Origin})
	if err != nil {
		d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, typ, now)
		return
	}
	res := d.o.Sender.Send(ctx, TargetOf(ep, now), Message{ID: dl.MessageID, Timestamp: now, Body: body})
	if d.o.Observer != nil {
		d.o.Observer.Attempted(ep.ID, res.Verdict, res.Latency)
	}
	d.mu.Lock()
	if res.Status == 0 {
		d.silent[ep.ID] = true
	} else {
		delete(d.silent, ep.ID)
	}
	d.mu.Unlock()
	if res.Verdict != Delivered {
		d.failed(ctx, ep, dl, res, typ, now)
		return
	}
	r := dl
	r.Status, r.Attempts, r.Fields = models.DeliveryDelivered, dl.Attempts+1, fields // the attempts it took
	if dl.Kind == models.KindPlan {
		r.Sent = sent
	}
	r.LastStatus, r.LastError, r.LastAt, r.DeliveredAt, r.DeliveredMsg = res.Status, "", &now, &now, dl.MessageID
	d.settle(ctx, dl, r, attemptOf(dl, typ, now, res))
	if ep.FailingSince != nil {
		d.health(ctx, ep.ID, func(ctx context.Context, o repository.Outbound) error { return o.EndpointAnswered(ctx, ep.ID) })
	}
	d.Notify() // a change queued meanwhile is due now
}

func attemptOf(dl models.Delivery, typ string, at time.Time, res Result) models.Attempt {
	return models.Attempt{EndpointID: dl.EndpointID, MessageID: dl.MessageID, Type: typ, ObjectID: dl.ObjectID, At: at,
		Status: res.Status, Latency: res.Latency, Error: res.Err, Delivered: res.Verdict == Delivered}
}

// failed records a failed attempt: the next on the schedule (or none:
// failed), and the endpoint's health: 410 disables it, and so does
// failing every delivery for models.MaxFailingFor.
func (d *Dispatcher) failed(ctx context.Context, ep models.Endpoint, dl models.Delivery, res Result, typ string, now time.Time) {
	r := dl
	r.LastStatus, r.LastError, r.LastAt = res.Status, res.Err, &now
	r.Attempts++
	if at, ok := NextAttempt(r.Attempts, now, res.RetryAfter, d.o.Jitter()); ok {
		r.NextAt = at
	} else {
		r.Status = models.DeliveryFailed
	}
	if res.Verdict == Gone {
		r.Status = models.DeliveryDropped
	}
	d.settle(ctx, dl, r, attemptOf(dl, typ, now, res))
	switch {
	case res.Verdict == Gone:
		d.disable(ctx, ep.ID, models.DisabledGone, time.Time{}, now)
	case ep.FailingSince == nil:
		d.health(ctx, ep.ID, func(ctx context.Context, o repository.Outbound) error { return o.EndpointFailing(ctx, ep.ID, now) })
	case now.Sub(*ep.FailingSince) >= models.MaxFailingFor:
		d.disable(ctx, ep.ID, models.DisabledFailing, now.Add(-models.MaxFailingFor), now)
	}
}

// disable disables an endpoint for reason; failingBefore as the store's
// DisableEndpoint (an admin who enabled it again meanwhile wins).
func (d *Dispatcher) disable(ctx context.Context, id, reason string, failingBefore, now time.Time) {
	var done bool
	d.health(ctx, id, func(ctx context.Context, o repository.Outbound) (err error) {
		done, err = o.DisableEndpoint(ctx, id, reason, failingBefore, now)
		return err
	})
	if done {
		d.o.Log.LogAttrs(ctx, slog.LevelError, "outbound webhooks: endpoint disabled",
			slog.String("endpoint", id), slog.String("reason", reason))
		if d.o.Observer != nil {
			d.o.Observer.Disabled(id, reason)
		}
	}
}

// health records the health of endpoint id with write, one conditional
// write of the store's that changes only the fields of its health (never
// an admin's settings, never an endpoint that is gone), even when ctx has
// ended. The next refresh of the endpoints reads it.
func (d *Dispatcher) health(ctx context.Context, id string, write func(context.Context, repository.Outbound) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := write(ctx, d.o.Store.Outbound()); err != nil {
		d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: endpoint's health not recorded",
			slog.String("endpoint", id), slog.String("err", err.Error()))
	}
}

// settle records what became of a send, even when ctx has ended.
func (d *Dispatcher) settle(ctx context.Context, sent, result models.Delivery, a models.Attempt) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := d.o.Store.Outbound().Settle(ctx, sent, result, a); err != nil {
		// The delivery stays as it was, due: it is sent again (with its
		// webhook-id), which at least once allows.
		d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: a delivery's outcome not recorded",
			slog.String("endpoint", sent.EndpointID), slog.String("webhook_id", sent.MessageID), slog.String("err", err.Error()))
	}
}

// withPrevious is a plan's data with "previous": the plan of the data the
// endpoint last received (sent), null when it received none.
func withPrevious(data, sent json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	m["previous"] = json.RawMessage("null")
	if sent != nil {
		var before map[string]json.RawMessage
		if err := json.Unmarshal(sent, &before); err == nil && before["plan"] != nil {
			m["previous"] = before["plan"]
		}
	}
	return json.Marshal(m)
}
