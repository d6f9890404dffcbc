package mongo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Outbound webhooks (repository.Outbound). The outbox is no collection of
// its own: the write that marks an event processed with a change that
// applied sets the event's outbox entry (outbox, and outboxSeq, its place
// in the outbox), so the entry is written with the change's mark, in one
// conditional write, and a crash before the mark is healed by the re-apply
// that marks it (see Store.Reapply). The fan-out unsets both.
//
// The deliveries are one document per endpoint and object, _id
// "<endpoint>/<kind>/<object>" (models.Delivery.Key), written by
// compare-and-set on a revision (rev): a fan-out and a settle of one
// object may run at once, in two instances. Fields that exist only while
// a delivery is pending (dueAt, pendingSince) keep the sparse indexes of
// the due and backlog reads as small as the backlog.

// Collection names of outbound webhooks, before Options.CollectionPrefix.
const (
	EndpointsCollection        = "endpoints"
	DeliveriesCollection       = "deliveries"
	DeliveryAttemptsCollection = "delivery_attempts"
)

// outboundCollections are the base names of the outbound collections.
var outboundCollections = []string{EndpointsCollection, DeliveriesCollection, DeliveryAttemptsCollection}

// Outbound is the collections of outbound webhooks.
type Outbound struct {
	events     *mongo.Collection // user_events, from the primary: the outbox
	endpoints  *mongo.Collection // from the primary: a change is written over the revision read
	slots      *mongo.Collection // leases: the endpoints' slots (claimSlot)
	deliveries *mongo.Collection // from the primary: every read decides a write, or follows one
	attempts   *mongo.Collection
	// recording: the marks of changes that applied write their outbox
	// entry.
	recording atomic.Bool
	// beforeWrite, if set, runs between the read of deliveries and their
	// compare-and-set write (tests make a concurrent write happen there).
	beforeWrite func()
	// share paces the relay's and the settles' writes by the engine's
	// answer time (share.go).
	share *share
}

var _ repository.Outbound = (*Outbound)(nil)

// Outbound returns the collections of outbound webhooks.
func (s *Store) Outbound() repository.Outbound { return s.outbound }

// SetRecording says whether the changes that apply are recorded in the
// outbox.
func (o *Outbound) SetRecording(on bool) { o.recording.Store(on) }

// outboxDoc is an event's outbox entry (models.Pending).
type outboxDoc struct {
	Kind       string    `bson:"kind"`
	ObjectID   string    `bson:"objectId"`
	UserID     string    `bson:"userId"`
	SourceTime time.Time `bson:"sourceTime"`
	EventID    string    `bson:"eventId"`
	Deleted    bool      `bson:"deleted"`
	Change     string    `bson:"change"`
	Origin     string    `bson:"origin"`
	At         time.Time `bson:"at"`
}

func newOutboxDoc(p models.Pending) *outboxDoc {
	return &outboxDoc{Kind: string(p.Kind), ObjectID: p.ObjectID, UserID: p.UserID, SourceTime: p.Version.SourceTime,
		EventID: p.Version.EventID, Deleted: p.Version.Deleted, Change: string(p.Change), Origin: p.Origin, At: p.At}
}

func (d outboxDoc) model() models.Pending {
	return models.Pending{Kind: models.Kind(d.Kind), ObjectID: d.ObjectID, UserID: d.UserID,
		Version: models.Version{SourceTime: d.SourceTime.UTC(), EventID: d.EventID, Deleted: d.Deleted},
		Change:  models.EventType(d.Change), Origin: d.Origin, At: d.At.UTC()}
}

// outboxEntry is the outbox entry of ch, the change of ev that had
// outcome at now (models.OutboxOf), when recording is on; nil when none.
func (o *Outbound) outboxEntry(ev models.Event, ch models.Change, outcome models.Outcome, now time.Time) *outboxDoc {
	if !o.recording.Load() {
		return nil
	}
	p, ok := models.OutboxOf(ev, ch, outcome, now)
	if !ok {
		return nil
	}
	return newOutboxDoc(p)
}

// outboxSet is what the mark of an event adds to record its outbox entry
// e: the entry, and its place in the outbox, a new ObjectID (ordered by
// the second it was made, and within one process by when).
func outboxSet(e *outboxDoc) bson.D {
	return bson.D{{Key: "outbox", Value: e}, {Key: "outboxSeq", Value: bson.NewObjectID()}}
}

// outboxFilter selects the events that hold an outbox entry, through the
// sparse outboxSeq_1 index.
var outboxFilter = bson.D{{Key: "outboxSeq", Value: bson.D{{Key: "$exists", Value: true}}}}

// outboxOrder is the order of the outbox, that of its index outboxIndex.
var outboxOrder = bson.D{{Key: "outboxSeq", Value: 1}}

const outboxIndex = "outboxSeq_1"

// findByIndexScan finds up to a limit of the documents of filter by a
// scan of the index named index, hinted and not sorted, for a read that
// wants some of them, in no particular order: a DocumentDB engine sorts
// every match of a sorted query, and the outbox and an endpoint's
// deliveries due are ranges that a burst or an endpoint that is down grows
// to tens of thousands (the outbox read sorted: 60 ms at 36,000 entries on
// the engine, against 11 ms hinted, and growing with them). MongoDB gives
// them in the index's order (order); a DocumentDB engine, whose indexes
// are not ordered, as it stores them. A query the engine refuses with the
// hint (the index being built) is sent sorted by order instead. opts sets
// the limit and the projection.
func findByIndexScan[T any](ctx context.Context, coll *mongo.Collection, filter bson.D, index string, order bson.D,
	opts func() *options.FindOptionsBuilder) ([]T, error) {
	docs, err := findDocs[T](ctx, coll, filter, opts().SetHint(index))
	if err != nil && !errors.Is(err, models.ErrUnavailable) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		docs, err = findDocs[T](ctx, coll, filter, opts().SetSort(order))
	}
	return docs, err
}

// OutboxOldest returns when the first entry of the outbox (the lowest
// outboxSeq) applied: sorted, as the oldest is wanted (a DocumentDB engine
// sorts the outbox to find it; the metrics read it every BacklogEvery).
func (o *Outbound) OutboxOldest(ctx context.Context) (time.Time, bool, error) {
	var d struct {
		Outbox outboxDoc `bson:"outbox"`
	}
	err := translate(o.events.FindOne(ctx, outboxFilter, options.FindOne().SetSort(outboxOrder).
		SetProjection(bson.D{{Key: "outbox.at", Value: 1}})).Decode(&d))
	if errors.Is(err, models.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the outbox's oldest entry: %w", err)
	}
	return d.Outbox.At.UTC(), true, nil
}

// Outbox returns up to limit entries of the outbox (findByIndexScan:
// oldest first on MongoDB); an entry's key is its event's _id. The
// fan-out does not rely on the order: models.Delivery.Queue keeps the
// newest change of an object whatever the order it comes in, and every
// entry it takes leaves the outbox.
func (o *Outbound) Outbox(ctx context.Context, limit int) ([]models.Outboxed, error) {
	docs, err := findByIndexScan[struct {
		ID     bson.ObjectID `bson:"_id"`
		Outbox outboxDoc     `bson:"outbox"`
	}](ctx, o.events, outboxFilter, outboxIndex, outboxOrder, func() *options.FindOptionsBuilder {
		return options.Find().SetLimit(int64(limit)).SetProjection(bson.D{{Key: "outbox", Value: 1}})
	})
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	out := make([]models.Outboxed, len(docs))
	for i, d := range docs {
		out[i] = models.Outboxed{Key: d.ID.Hex(), Pending: d.Outbox.model()}
	}
	return out, nil
}

// liveEndpoint selects endpoint id unless a delete of it has begun
// (deleting, which deleteEndpoint sets first: from then on no write
// changes it, and every read finds it gone), with more conditions.
func liveEndpoint(id string, more ...bson.E) bson.D {
	return append(bson.D{{Key: "_id", Value: id}, notDeleting}, more...)
}

// notDeleting is the condition of an endpoint no delete has begun of.
var notDeleting = bson.E{Key: "deleting", Value: bson.D{{Key: "$exists", Value: false}}}

// idDoc is a document's string _id alone.
type idDoc struct {
	ID string `bson:"_id"`
}

// endpointDoc is an endpoint.
type endpointDoc struct {
	ID             string     `bson:"_id"`
	URL            string     `bson:"url"`
	Description    string     `bson:"description"`
	EventTypes     []string   `bson:"eventTypes"`
	Enabled        bool       `bson:"enabled"`
	Disabled       string     `bson:"disabled"`
	Secret         string     `bson:"secret"`
	PreviousSecret string     `bson:"previousSecret"`
	PreviousUntil  *time.Time `bson:"previousUntil,omitempty"`
	FromConfig     bool       `bson:"fromConfig"`
	FailingSince   *time.Time `bson:"failingSince,omitempty"`
	CreatedAt      time.Time  `bson:"createdAt"`
	UpdatedAt      time.Time  `bson:"updatedAt"`
	// Rev moves on with every write; 0 (absent) for an endpoint written
	// by a version before revisions.
	Rev         int64      `bson:"rev,omitempty"`
	NeedsResync bool       `bson:"needsResync,omitempty"`
	Resync      *resyncDoc `bson:"resync,omitempty"`
	// URLJudged: the URL was set by a usersync that refuses plain http to
	// public addresses; absent on an endpoint written before
	// (models.Endpoint.LegacyURL).
	URLJudged bool `bson:"urlJudged,omitempty"`
}

// resyncDoc is an endpoint's resync (models.Resync); each write of its
// progress is conditional on startedAt.
type resyncDoc struct {
	StartedAt      time.Time  `bson:"startedAt"`
	IncludeDeleted bool       `bson:"includeDeleted"`
	Kind           string     `bson:"kind"`
	After          string     `bson:"after"`
	Queued         int64      `bson:"queued"`
	DoneAt         *time.Time `bson:"doneAt,omitempty"`
}

func newResyncDoc(r models.Resync) resyncDoc {
	return resyncDoc{StartedAt: r.StartedAt.UTC(), IncludeDeleted: r.IncludeDeleted, Kind: string(r.Kind), After: r.After,
		Queued: r.Queued, DoneAt: r.DoneAt}
}

func (d *resyncDoc) model() *models.Resync {
	if d == nil {
		return nil
	}
	return &models.Resync{StartedAt: d.StartedAt.UTC(), IncludeDeleted: d.IncludeDeleted, Kind: models.Kind(d.Kind), After: d.After,
		Queued: d.Queued, DoneAt: utcPtr(d.DoneAt)}
}

func (d endpointDoc) model() models.Endpoint {
	types := d.EventTypes
	if types == nil {
		types = []string{}
	}
	return models.Endpoint{ID: d.ID, URL: d.URL, Description: d.Description, EventTypes: types, Enabled: d.Enabled,
		Disabled: d.Disabled, Secret: d.Secret, PreviousSecret: d.PreviousSecret, PreviousUntil: utcPtr(d.PreviousUntil),
		FromConfig: d.FromConfig, FailingSince: utcPtr(d.FailingSince), CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		Revision: d.Rev, NeedsResync: d.NeedsResync, Resync: d.Resync.model(), LegacyURL: !d.URLJudged}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Endpoints returns every endpoint, by id (at most models.MaxEndpoints).
func (o *Outbound) Endpoints(ctx context.Context) ([]models.Endpoint, error) {
	docs, err := findDocs[endpointDoc](ctx, o.endpoints, bson.D{notDeleting}, options.Find().SetSort(idOrder))
	if err != nil {
		return nil, fmt.Errorf("read endpoints: %w", err)
	}
	out := make([]models.Endpoint, len(docs))
	for i, d := range docs {
		out[i] = d.model()
	}
	return out, nil
}

// Endpoint returns one endpoint.
func (o *Outbound) Endpoint(ctx context.Context, id string) (models.Endpoint, error) {
	var d endpointDoc
	if err := o.endpoints.FindOne(ctx, liveEndpoint(id)).Decode(&d); err != nil {
		return models.Endpoint{}, fmt.Errorf("read endpoint %s: %w", models.Quote(id), translate(err))
	}
	return d.model(), nil
}

// CreateEndpoint inserts e at revision 1; one from the API once it holds
// a slot (claimSlot).
func (o *Outbound) CreateEndpoint(ctx context.Context, e models.Endpoint) error {
	if !e.FromConfig {
		if err := o.claimSlot(ctx, e.ID, time.Now()); err != nil {
			return fmt.Errorf("create endpoint %s: %w", models.Quote(e.ID), err)
		}
	}
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	_, err := o.endpoints.InsertOne(ctx, endpointDoc{ID: e.ID, URL: e.URL, Description: e.Description, EventTypes: types,
		Enabled: e.Enabled, Disabled: e.Disabled, Secret: e.Secret, PreviousSecret: e.PreviousSecret, PreviousUntil: e.PreviousUntil,
		FromConfig: e.FromConfig, FailingSince: e.FailingSince, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, Rev: 1,
		URLJudged: !e.LegacyURL})
	if err = translate(err); err != nil {
		if !e.FromConfig {
			o.releaseSlot(context.WithoutCancel(ctx), e.ID)
		}
		if errors.Is(err, errDuplicate) {
			err = fmt.Errorf("%w: the id is taken", models.ErrConflict)
		}
		return fmt.Errorf("create endpoint %s: %w", models.Quote(e.ID), err)
	}
	return nil
}

// The endpoints' slots bound the endpoints the API creates without a
// transaction, however many creates race: each holds one of
// models.MaxEndpoints slots, a lease document "endpoint-slot:NN" whose
// owner is the endpoint, claimed by an insert that the unique _id lets
// through once. A slot is held while its endpoint exists, or for
// slotClaim after its claim (a create between its claim and its insert);
// after that, the slot of an endpoint that does not exist is free (a
// create that stopped before its insert, a delete before it released the
// slot). Endpoints that hold none (from the configuration, or written by a
// version before slots) each take one slot away from the limit, and a
// create claims only a number below a top that leaves room for the slots
// held above it (claimSlot): creates that race claim distinct numbers of
// one range, and never hold more than the limit.
const (
	slotPrefix = "endpoint-slot:"
	slotClaim  = 5 * time.Minute
	slotTries  = 5
)

func slotName(n int) string { return fmt.Sprintf("%s%02d", slotPrefix, n) }

// slotsFilter selects every slot document: a range of the leases' _id.
var slotsFilter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: slotPrefix}, {Key: "$lt", Value: slotPrefix + "~"}}}}

// claimSlot claims a free slot for the new endpoint id, or refuses
// (models.EndpointsFull) when none is free.
func (o *Outbound) claimSlot(ctx context.Context, id string, now time.Time) error {
	for try := 0; try < slotTries; try++ {
		// The endpoints are read before the slots: an endpoint created
		// since holds a slot claimed within slotClaim, which counts.
		eps, err := findDocs[idDoc](ctx, o.endpoints, bson.D{notDeleting}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return err
		}
		slots, err := findDocs[leaseDoc](ctx, o.slots, slotsFilter, nil)
		if err != nil {
			return err
		}
		exists, holds := map[string]bool{}, map[string]bool{}
		for _, e := range eps {
			exists[e.ID] = true
		}
		held := map[string]leaseDoc{}
		for _, s := range slots {
			if exists[s.Owner] || now.Before(s.ExpiresAt) {
				held[s.Name] = s
				holds[s.Owner] = true
			}
		}
		limit := models.MaxEndpoints
		for _, e := range eps {
			if !holds[e.ID] {
				limit-- // an endpoint without a slot
			}
		}
		// Claims are made below top, where top and the slots held from
		// top up add up to the limit: at most limit slots are held then,
		// whatever claims race.
		top := max(limit, 0)
		for top > 0 {
			above := 0
			for n := top; n < models.MaxEndpoints; n++ {
				if _, ok := held[slotName(n)]; ok {
					above++
				}
			}
			if top+above <= limit {
				break
			}
			top = max(limit-above, 0)
		}
		free := false
		for n := range top {
			if _, ok := held[slotName(n)]; ok {
				continue
			}
			free = true
			claimed, err := o.claim(ctx, slotName(n), id, slots, now)
			if err != nil || claimed {
				return err
			}
		}
		if !free {
			return models.EndpointsFull(len(eps))
		}
		// Another create claimed the free ones first: read again.
	}
	return fmt.Errorf("the endpoints' slots kept changing: %w", models.ErrRetryLater)
}

// claim claims the slot name, free when slots were read, for endpoint id:
// an insert where there was no document, else a compare-and-set of the one
// read. It reports whether id holds it.
func (o *Outbound) claim(ctx context.Context, name, id string, slots []leaseDoc, now time.Time) (bool, error) {
	doc := leaseDoc{Name: name, Owner: id, ExpiresAt: now.Add(slotClaim).UTC()}
	i := slices.IndexFunc(slots, func(s leaseDoc) bool { return s.Name == name })
	if i < 0 {
		_, err := o.slots.InsertOne(ctx, doc)
		if err = translate(err); errors.Is(err, errDuplicate) {
			return false, nil // another create claimed it first
		}
		return err == nil, err
	}
	res, err := updateOne(ctx, o.slots, bson.D{{Key: "_id", Value: name}, {Key: "owner", Value: slots[i].Owner},
		{Key: "expiresAt", Value: slots[i].ExpiresAt}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "owner", Value: id}, {Key: "expiresAt", Value: doc.ExpiresAt}}}})
	if err != nil {
		return false, translate(err)
	}
	return res.MatchedCount == 1, nil
}

// releaseSlot frees the slot endpoint id holds, if any.
func (o *Outbound) releaseSlot(ctx context.Context, id string) {
	_, _ = o.slots.DeleteMany(ctx, append(slices.Clone(slotsFilter), bson.E{Key: "owner", Value: id}))
}

// revFilter selects an endpoint at revision rev: 0 is an endpoint that
// has none yet (written by a version before revisions).
func revFilter(id string, rev int64) bson.D {
	if rev == 0 {
		return liveEndpoint(id, bson.E{Key: "rev", Value: bson.D{{Key: "$exists", Value: false}}})
	}
	return liveEndpoint(id, bson.E{Key: "rev", Value: rev})
}

// setOrUnset is the update of field to t: $set, or $unset for nil.
func setOrUnset(set, unset bson.D, field string, t *time.Time) (bson.D, bson.D) {
	if t == nil {
		return set, append(unset, bson.E{Key: field, Value: ""})
	}
	return append(set, bson.E{Key: field, Value: t.UTC()}), unset
}

// UpdateEndpoint writes e's settings if the endpoint is still at
// e.Revision: one conditional update.
func (o *Outbound) UpdateEndpoint(ctx context.Context, e models.Endpoint) error {
	types := e.EventTypes
	if types == nil {
		types = []string{}
	}
	set := bson.D{{Key: "url", Value: e.URL}, {Key: "description", Value: e.Description}, {Key: "eventTypes", Value: types},
		{Key: "enabled", Value: e.Enabled}, {Key: "disabled", Value: e.Disabled}, {Key: "secret", Value: e.Secret},
		{Key: "previousSecret", Value: e.PreviousSecret}, {Key: "fromConfig", Value: e.FromConfig}, {Key: "urlJudged", Value: !e.LegacyURL},
		{Key: "updatedAt", Value: e.UpdatedAt.UTC()}}
	var unset bson.D
	set, unset = setOrUnset(set, unset, "previousUntil", e.PreviousUntil)
	update := bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	res, err := updateOne(ctx, o.endpoints, revFilter(e.ID, e.Revision), update)
	if err == nil && res.MatchedCount == 0 {
		err = o.endpointMissed(ctx, e.ID)
	}
	if err != nil {
		return fmt.Errorf("write endpoint %s: %w", models.Quote(e.ID), translate(err))
	}
	return nil
}

// endpointMissed says why a conditional write of endpoint id matched
// nothing: it is gone (models.ErrNotFound), or it moved on.
func (o *Outbound) endpointMissed(ctx context.Context, id string) error {
	n, err := o.endpoints.CountDocuments(ctx, liveEndpoint(id))
	switch {
	case err != nil:
		return err
	case n == 0:
		return models.ErrNotFound
	}
	return models.ErrEndpointChanged
}

// EndpointFailing sets failingSince, unless it is set.
func (o *Outbound) EndpointFailing(ctx context.Context, id string, at time.Time) error {
	return o.endpointHealth(ctx, id, liveEndpoint(id, bson.E{Key: "failingSince", Value: nil}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "failingSince", Value: at.UTC()}}}})
}

// EndpointAnswered unsets failingSince, if it is set.
func (o *Outbound) EndpointAnswered(ctx context.Context, id string) error {
	return o.endpointHealth(ctx, id, liveEndpoint(id, bson.E{Key: "failingSince", Value: bson.D{{Key: "$ne", Value: nil}}}),
		bson.D{{Key: "$unset", Value: bson.D{{Key: "failingSince", Value: ""}}}})
}

// endpointHealth runs one conditional update of an endpoint's health
// (failingSince alone: no admin's write sets it, so the revision stays).
func (o *Outbound) endpointHealth(ctx context.Context, id string, filter, update bson.D) error {
	if _, err := updateOne(ctx, o.endpoints, filter, update); err != nil {
		return fmt.Errorf("record the health of endpoint %s: %w", models.Quote(id), translate(err))
	}
	return nil
}

// StartResync starts the resync r of endpoint id, in place of one under
// way.
func (o *Outbound) StartResync(ctx context.Context, id string, r models.Resync) error {
	res, err := updateOne(ctx, o.endpoints, liveEndpoint(id),
		bson.D{{Key: "$set", Value: bson.D{{Key: "resync", Value: newResyncDoc(r)}}}})
	if err == nil && res.MatchedCount == 0 {
		err = models.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("start a resync of endpoint %s: %w", models.Quote(id), translate(err))
	}
	return nil
}

// SaveResync records r, the progress of the resync of endpoint id that
// started at r.StartedAt; false when another started since, or the
// endpoint is gone. A resync done clears needsResync.
func (o *Outbound) SaveResync(ctx context.Context, id string, r models.Resync) (bool, error) {
	set := bson.D{{Key: "resync", Value: newResyncDoc(r)}}
	if r.DoneAt != nil {
		set = append(set, bson.E{Key: "needsResync", Value: false})
	}
	res, err := updateOne(ctx, o.endpoints, liveEndpoint(id, bson.E{Key: "resync.startedAt", Value: r.StartedAt.UTC()}),
		bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return false, fmt.Errorf("record the resync of endpoint %s: %w", models.Quote(id), translate(err))
	}
	return res.MatchedCount == 1, nil
}

// MarkNeedsResync marks a disabled endpoint as needing a resync.
func (o *Outbound) MarkNeedsResync(ctx context.Context, id string) error {
	return o.endpointHealth(ctx, id, liveEndpoint(id, bson.E{Key: "enabled", Value: false}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "needsResync", Value: true}}}})
}

// DisableEndpoint disables an enabled endpoint for reason, and when
// failingBefore is set only one failing since before it.
func (o *Outbound) DisableEndpoint(ctx context.Context, id, reason string, failingBefore, now time.Time) (bool, error) {
	filter := liveEndpoint(id, bson.E{Key: "enabled", Value: true})
	if !failingBefore.IsZero() {
		filter = append(filter, bson.E{Key: "failingSince", Value: bson.D{{Key: "$lte", Value: failingBefore.UTC()}}})
	}
	res, err := updateOne(ctx, o.endpoints, filter, bson.D{
		{Key: "$set", Value: bson.D{{Key: "enabled", Value: false}, {Key: "disabled", Value: reason}, {Key: "updatedAt", Value: now.UTC()}}},
		{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
	if err != nil {
		return false, fmt.Errorf("disable endpoint %s: %w", models.Quote(id), translate(err))
	}
	return res.ModifiedCount == 1, nil
}

// DeleteEndpoint deletes an endpoint, then its deliveries (the range of
// _id its id begins) and its slot; its attempts stay until they are old.
// A crash between the two leaves deliveries of no endpoint, which Due
// returns and the sender drops; deleting it again is not found, and
// leaves them. A fan-out that wrote a delivery of it after the delete
// finds the endpoint gone and deletes that delivery (Fanout).
func (o *Outbound) DeleteEndpoint(ctx context.Context, id string) error {
	if err := o.deleteEndpoint(ctx, id); err != nil {
		return fmt.Errorf("delete endpoint %s: %w", models.Quote(id), err)
	}
	if _, err := o.deliveries.DeleteMany(ctx, endpointDeliveriesFilter(id, "")); err != nil {
		return fmt.Errorf("delete the deliveries of endpoint %s: %w", models.Quote(id), translate(err))
	}
	o.releaseSlot(ctx, id)
	return nil
}

// deleteEndpoint deletes the endpoint document id: models.ErrNotFound
// when there is none, or a delete of it has begun. It first marks the
// endpoint deleting: no write matches it after that (liveEndpoint). A
// DocumentDB engine may leave a document that an update changes while it
// is deleted, or updated while another update commits: each step is
// tried again until the document is as it wants it.
func (o *Outbound) deleteEndpoint(ctx context.Context, id string) error {
	for try := 1; ; try++ {
		res, err := updateOne(ctx, o.endpoints, liveEndpoint(id), bson.D{{Key: "$set", Value: bson.D{{Key: "deleting", Value: true}}}})
		if err != nil {
			return translate(err)
		}
		if res.MatchedCount == 1 {
			break
		}
		live, err := o.endpoints.CountDocuments(ctx, liveEndpoint(id))
		switch {
		case err != nil:
			return translate(err)
		case live == 0:
			// Gone, or another delete began (or one stopped half-way):
			// what is left of it is deleted, and it was not found.
			if err := o.deleteDeleting(ctx, id); err != nil {
				return err
			}
			return models.ErrNotFound
		case try == maxConflictTries:
			return fmt.Errorf("concurrent writes of the endpoint kept the delete from it: %w", models.ErrRetryLater)
		}
	}
	return o.deleteDeleting(ctx, id)
}

// deleteDeleting deletes endpoint id, marked deleting (no write changes
// it any more), again while the engine leaves it.
func (o *Outbound) deleteDeleting(ctx context.Context, id string) error {
	for try := 1; ; try++ {
		if _, err := o.endpoints.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "deleting", Value: true}}); err != nil {
			return translate(err)
		}
		n, err := o.endpoints.CountDocuments(ctx, bson.D{{Key: "_id", Value: id}, {Key: "deleting", Value: true}})
		switch {
		case err != nil:
			return translate(err)
		case n == 0:
			return nil
		case try == maxConflictTries:
			return fmt.Errorf("the endpoint marked deleting could not be deleted: %w", models.ErrRetryLater)
		}
	}
}

// endpointDeliveriesFilter selects the deliveries of endpoint id whose
// key comes after "<id>/<after>": a range of _id_ bounded by the prefix.
func endpointDeliveriesFilter(id, after string) bson.D {
	return bson.D{
		{Key: "_id", Value: bson.D{{Key: "$gt", Value: id + "/" + after}, {Key: "$lt", Value: id + "0"}}}, // '0' follows '/'
		{Key: "endpointId", Value: id},
	}
}

// deliveryDoc is one endpoint's delivery of one object.
type deliveryDoc struct {
	ID         string    `bson:"_id"` // models.Delivery.Key
	Rev        int64     `bson:"rev"` // the compare-and-set of every write
	EndpointID string    `bson:"endpointId"`
	Kind       string    `bson:"kind"`
	ObjectID   string    `bson:"objectId"`
	UserID     string    `bson:"userId,omitempty"` // userId_1 (sparse): erasure
	MessageID  string    `bson:"messageId"`
	SourceTime time.Time `bson:"sourceTime"`
	EventID    string    `bson:"eventId"`
	Deleted    bool      `bson:"deleted"`
	Change     string    `bson:"change"`
	Origin     string    `bson:"origin"`
	Status     string    `bson:"status"`
	Attempts   int       `bson:"attempts"`
	NextAt     time.Time `bson:"nextAt"`
	Since      time.Time `bson:"since"`
	// Only while pending: dueKey (the endpoint, then nextAt) and
	// pendingKey (the endpoint, then since), of the sparse indexes of Due
	// and Backlog: one endpoint's pending deliveries are a range of keys,
	// and those indexes hold the pending deliveries only. (A compound
	// sparse index would hold every delivery: each has an endpointId.)
	DueKey       string            `bson:"dueKey,omitempty"`
	PendingKey   string            `bson:"pendingKey,omitempty"`
	Fields       map[string]string `bson:"fields"`         // null: nothing received
	Sent         string            `bson:"sent,omitempty"` // a plan's data last received
	LastStatus   int               `bson:"lastStatus"`
	LastError    string            `bson:"lastError"`
	LastAt       *time.Time        `bson:"lastAt,omitempty"`
	DeliveredAt  *time.Time        `bson:"deliveredAt,omitempty"`
	DeliveredMsg string            `bson:"deliveredMsg"`
}

func newDeliveryDoc(d models.Delivery, rev int64) deliveryDoc {
	doc := deliveryDoc{ID: d.Key(), Rev: rev, EndpointID: d.EndpointID, Kind: string(d.Kind), ObjectID: d.ObjectID,
		UserID: d.UserID, MessageID: d.MessageID, SourceTime: d.Version.SourceTime, EventID: d.Version.EventID,
		Deleted: d.Version.Deleted, Change: string(d.Change), Origin: d.Origin, Status: d.Status, Attempts: d.Attempts,
		NextAt: d.NextAt, Since: d.Since, Fields: d.Fields, Sent: string(d.Sent), LastStatus: d.LastStatus, LastError: d.LastError,
		LastAt: d.LastAt, DeliveredAt: d.DeliveredAt, DeliveredMsg: d.DeliveredMsg}
	if d.Status == models.DeliveryPending {
		doc.DueKey, doc.PendingKey = pendingKey(d.EndpointID, d.NextAt), pendingKey(d.EndpointID, d.Since)
	}
	return doc
}

// pendingKey is a key of a pending delivery: its endpoint, then a time,
// in an order strings keep (UTC, every digit of the nanoseconds).
func pendingKey(endpointID string, t time.Time) string {
	return endpointID + "|" + t.UTC().Format(pendingKeyTime)
}

const pendingKeyTime = "2006-01-02T15:04:05.000000000Z"

// endpointKeys bounds the pending keys of an endpoint: from its id and
// "|" to its id and "}", the byte after "|".
func endpointKeys(endpointID string) (from, to string) { return endpointID + "|", endpointID + "}" }

func (d deliveryDoc) model() models.Delivery {
	return models.Delivery{EndpointID: d.EndpointID, Kind: models.Kind(d.Kind), ObjectID: d.ObjectID, UserID: d.UserID,
		MessageID: d.MessageID, Version: models.Version{SourceTime: d.SourceTime.UTC(), EventID: d.EventID, Deleted: d.Deleted},
		Change: models.EventType(d.Change), Origin: d.Origin, Status: d.Status, Attempts: d.Attempts, NextAt: d.NextAt.UTC(),
		Since: d.Since.UTC(), Fields: d.Fields, Sent: sentJSON(d.Sent), LastStatus: d.LastStatus, LastError: d.LastError, LastAt: utcPtr(d.LastAt),
		DeliveredAt: utcPtr(d.DeliveredAt), DeliveredMsg: d.DeliveredMsg}
}

// sentJSON is a stored delivery's sent data: nil when none.
func sentJSON(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// deliveryTries bounds the compare-and-set of a delivery: each refusal is
// a concurrent write of the same object, which is rare.
const deliveryTries = 5

// readDeliveries reads the deliveries of keys, by key.
func (o *Outbound) readDeliveries(ctx context.Context, keys []string) (map[string]deliveryDoc, error) {
	docs, err := findDocs[deliveryDoc](ctx, o.deliveries, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]deliveryDoc, len(docs))
	for _, d := range docs {
		out[d.ID] = d
	}
	return out, nil
}

// Fanout queues each change for its endpoints, then unsets the outbox
// entries done.
//
// The deliveries it touches are read in one find and written in one
// unordered bulkWrite: an insert for a new one, a replace of the revision
// read for the others. A write refused (an insert by a duplicate key, a
// replace whose revision moved: a concurrent fan-out or settle) sends the
// fan-out of those keys round again, from a new read, where the changes
// already written change nothing (models.Delivery.Queue); after
// deliveryTries rounds the error wraps models.ErrRetryLater, and the
// outbox keeps its entries.
func (o *Outbound) Fanout(ctx context.Context, fs []models.Fanout, done []string, now time.Time) error {
	return o.share.do(ctx, max(len(fs), len(done)), func() error { return o.fanout(ctx, fs, done, now) })
}

func (o *Outbound) fanout(ctx context.Context, fs []models.Fanout, done []string, now time.Time) error {
	var keys []string
	seen := map[string]bool{}
	for _, f := range fs {
		for _, ep := range f.Endpoints {
			key := models.Delivery{EndpointID: ep, Kind: f.Pending.Kind, ObjectID: f.Pending.ObjectID}.Key()
			if !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	for try := 1; len(keys) > 0; try++ {
		if try > deliveryTries {
			return fmt.Errorf("fan out the outbox: concurrent writes of the same deliveries kept winning: %w", models.ErrRetryLater)
		}
		var err error
		if keys, err = o.fanoutOnce(ctx, fs, keys, now); err != nil {
			return fmt.Errorf("fan out the outbox: %w", err)
		}
	}
	if err := o.dropDeliveriesOfGone(ctx, fs); err != nil {
		return fmt.Errorf("fan out the outbox: %w", err)
	}
	var ids bson.A
	for _, key := range done {
		if id, err := bson.ObjectIDFromHex(key); err == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	_, err := updateMany(ctx, o.events, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "outbox", Value: ""}, {Key: "outboxSeq", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("take the entries fanned out from the outbox: %w", translate(err))
	}
	return nil
}

// dropDeliveriesOfGone deletes the deliveries of the endpoints of fs
// that do not exist, once they are written: an endpoint deleted while the
// fan-out ran. Either the delete took the deliveries written before it,
// or this read, which follows them, finds the endpoint gone.
func (o *Outbound) dropDeliveriesOfGone(ctx context.Context, fs []models.Fanout) error {
	var ids []string
	for _, f := range fs {
		for _, ep := range f.Endpoints {
			if !slices.Contains(ids, ep) {
				ids = append(ids, ep)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	eps, err := findDocs[idDoc](ctx, o.endpoints, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, notDeleting},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if slices.Contains(eps, idDoc{ID: id}) {
			continue
		}
		if _, err := o.deliveries.DeleteMany(ctx, endpointDeliveriesFilter(id, "")); err != nil {
			return translate(err)
		}
	}
	return nil
}

// fanoutOnce is one round of Fanout over keys: it returns the keys whose
// writes were refused, or all it wrote when it cannot tell which.
func (o *Outbound) fanoutOnce(ctx context.Context, fs []models.Fanout, keys []string, now time.Time) ([]string, error) {
	stored, err := o.readDeliveries(ctx, keys)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	next := map[string]models.Delivery{}
	var order []string
	for _, f := range fs {
		for _, ep := range f.Endpoints {
			key := models.Delivery{EndpointID: ep, Kind: f.Pending.Kind, ObjectID: f.Pending.ObjectID}.Key()
			if !want[key] {
				continue
			}
			cur, ok := next[key]
			if !ok {
				if d, found := stored[key]; found {
					cur = d.model()
				}
			}
			if d, changed := f.Queue(cur, ep, now); changed {
				if !ok {
					order = append(order, key)
				}
				next[key] = d
			}
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	if o.beforeWrite != nil {
		o.beforeWrite()
	}
	writes := make([]mongo.WriteModel, len(order))
	inserts := 0
	for i, key := range order {
		cur, found := stored[key]
		if !found {
			writes[i] = mongo.NewInsertOneModel().SetDocument(newDeliveryDoc(next[key], 1))
			inserts++
			continue
		}
		writes[i] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: key}, {Key: "rev", Value: cur.Rev}}).
			SetReplacement(newDeliveryDoc(next[key], cur.Rev+1))
	}
	res, err := retryConflicts(ctx, func() (*mongo.BulkWriteResult, error) {
		return o.deliveries.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
	})
	failed, ok := writeErrors(err)
	if !ok {
		return nil, translate(err)
	}
	for _, code := range failed {
		if !isDuplicateKeyCode(code) {
			return nil, translate(err)
		}
	}
	if len(failed) == 0 && res != nil && res.InsertedCount == int64(inserts) && res.MatchedCount == int64(len(order)-inserts) {
		return nil, nil
	}
	return order, nil
}

// Due returns up to limit pending deliveries of an endpoint due by now,
// through the sparse dueKey_1 index (pending deliveries only):
// findByIndexScan, soonest first on MongoDB. Every one of them is due;
// the order only shares the sends out.
func (o *Outbound) Due(ctx context.Context, endpointID string, now time.Time, limit int) ([]models.Delivery, error) {
	docs, err := findByIndexScan[deliveryDoc](ctx, o.deliveries, dueFilter(endpointID, now), dueIndex, dueOrder,
		func() *options.FindOptionsBuilder { return options.Find().SetLimit(int64(limit)) })
	if err != nil {
		return nil, fmt.Errorf("read the deliveries due: %w", err)
	}
	return deliveryModels(docs), nil
}

func dueFilter(endpointID string, now time.Time) bson.D {
	from, _ := endpointKeys(endpointID)
	return bson.D{{Key: "dueKey", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lte", Value: pendingKey(endpointID, now)}}}}
}

var dueOrder = bson.D{{Key: "dueKey", Value: 1}}

const dueIndex = "dueKey_1"

func (o *Outbound) findDeliveries(ctx context.Context, what string, filter bson.D, opts *options.FindOptionsBuilder) ([]models.Delivery, error) {
	docs, err := findDocs[deliveryDoc](ctx, o.deliveries, filter, opts)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return deliveryModels(docs), nil
}

func deliveryModels(docs []deliveryDoc) []models.Delivery {
	out := make([]models.Delivery, len(docs))
	for i, d := range docs {
		out[i] = d.model()
	}
	return out
}

// Settle records what became of each attempt (models.Settled) and the
// attempts. The common case, a delivery still waiting for the message
// sent, is one bulk write for the whole batch: each becomes its result,
// conditionally on that message id (its revision moved on, so that a
// compare-and-set under way refuses). When some did not match (a newer
// change was queued meanwhile, or the delivery is gone), the batch's
// deliveries are read once and each that is not its result is settled
// alone (settleOne). The attempts are one insert.
func (o *Outbound) Settle(ctx context.Context, ss ...models.Settlement) error {
	if len(ss) == 0 {
		return nil
	}
	return o.share.do(ctx, len(ss), func() error { return o.settle(ctx, ss) })
}

func (o *Outbound) settle(ctx context.Context, ss []models.Settlement) error {
	if o.beforeWrite != nil {
		o.beforeWrite()
	}
	writes := make([]mongo.WriteModel, len(ss))
	keys := make([]string, len(ss))
	for i, st := range ss {
		keys[i] = st.Sent.Key()
		set, unset, err := settledFields(st.Result)
		if err != nil {
			return err
		}
		update := bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}}
		if len(unset) > 0 {
			update = append(update, bson.E{Key: "$unset", Value: unset})
		}
		writes[i] = mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: keys[i]}, {Key: "messageId", Value: st.Sent.MessageID}}).SetUpdate(update)
	}
	res, err := retryConflicts(ctx, func() (*mongo.BulkWriteResult, error) {
		return o.deliveries.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
	})
	if err != nil {
		return fmt.Errorf("record %d deliveries: %w", len(ss), translate(err))
	}
	if res.MatchedCount < int64(len(ss)) {
		if err := o.settleRest(ctx, ss, keys); err != nil {
			return err
		}
	}
	var attempts []any
	for _, st := range ss {
		if st.Attempt.MessageID != "" { // else nothing was sent
			attempts = append(attempts, newSendAttemptDoc(st.Attempt))
		}
	}
	if len(attempts) == 0 {
		return nil
	}
	if _, err := retryConflicts(ctx, func() (*mongo.InsertManyResult, error) {
		return o.attempts.InsertMany(ctx, attempts, options.InsertMany().SetOrdered(false))
	}); err != nil {
		return fmt.Errorf("record %d attempts: %w", len(attempts), translate(err))
	}
	return nil
}

// settleRest settles alone each delivery of ss that the bulk write did not
// make its result: read again, one that holds its result's message id took
// it (a settle of a delivery that waited with nothing to send gives it the
// id of the state received).
func (o *Outbound) settleRest(ctx context.Context, ss []models.Settlement, keys []string) error {
	docs, err := findDocs[deliveryDoc](ctx, o.deliveries, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}},
		options.Find().SetProjection(bson.D{{Key: "messageId", Value: 1}}))
	if err != nil {
		return fmt.Errorf("read %d deliveries: %w", len(keys), err)
	}
	now := make(map[string]string, len(docs))
	for _, d := range docs {
		now[d.ID] = d.MessageID
	}
	for i, st := range ss {
		if id, ok := now[keys[i]]; !ok || id == st.Result.MessageID {
			continue // gone, or settled by the bulk write
		}
		if err := o.settleOne(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// settledFields are the fields of a delivery that a settle writes, as a
// $set and an $unset (those its result leaves out): every field but the
// key's and the revision.
func settledFields(result models.Delivery) (set, unset bson.D, err error) {
	raw, err := bson.Marshal(newDeliveryDoc(result, 0))
	if err != nil {
		return nil, nil, err
	}
	var doc bson.D
	if err := bson.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	present := map[string]bool{}
	for _, e := range doc {
		if e.Key == "_id" || e.Key == "rev" {
			continue
		}
		present[e.Key] = true
		set = append(set, e)
	}
	for _, k := range settleOptional {
		if !present[k] {
			unset = append(unset, bson.E{Key: k, Value: ""})
		}
	}
	return set, unset, nil
}

// settleOptional are the fields of deliveryDoc a settle may leave out
// (omitempty).
var settleOptional = []string{"userId", "dueKey", "pendingKey", "sent", "lastAt", "deliveredAt"}

// settleOne records what became of one attempt on the delivery as it is
// now (models.Settled, by compare-and-set on the delivery's revision,
// read again after a concurrent write). A delivery gone meanwhile (its
// endpoint deleted, its user erased) has nothing to record.
func (o *Outbound) settleOne(ctx context.Context, st models.Settlement) error {
	sent, result := st.Sent, st.Result
	key := sent.Key()
	for try := 1; ; try++ {
		if try > deliveryTries {
			return fmt.Errorf("record a delivery to endpoint %s: concurrent writes kept winning: %w",
				models.Quote(sent.EndpointID), models.ErrRetryLater)
		}
		var cur deliveryDoc
		err := o.deliveries.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&cur)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record a delivery to endpoint %s: %w", models.Quote(sent.EndpointID), translate(err))
		}
		doc := newDeliveryDoc(models.Settled(cur.model(), sent, result), cur.Rev+1)
		doc.ID = key
		if o.beforeWrite != nil {
			o.beforeWrite()
		}
		res, err := retryConflicts(ctx, func() (*mongo.UpdateResult, error) {
			return o.deliveries.ReplaceOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "rev", Value: cur.Rev}}, doc)
		})
		if err != nil {
			return fmt.Errorf("record a delivery to endpoint %s: %w", models.Quote(sent.EndpointID), translate(err))
		}
		if res.MatchedCount > 0 {
			return nil
		}
	}
}

// Delivery returns an endpoint's delivery of one object.
func (o *Outbound) Delivery(ctx context.Context, endpointID string, kind models.Kind, objectID string) (models.Delivery, error) {
	var d deliveryDoc
	key := models.Delivery{EndpointID: endpointID, Kind: kind, ObjectID: objectID}.Key()
	if err := o.deliveries.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&d); err != nil {
		return models.Delivery{}, fmt.Errorf("read a delivery: %w", translate(err))
	}
	return d.model(), nil
}

// deliveriesPageFilter selects the deliveries of f's endpoint after the
// cursor after ("<kind>/<object>"), by _id: a range of _id_, or with a
// status of endpointId_1_status_1__id_1.
func deliveriesPageFilter(f models.DeliveryFilter, after string) bson.D {
	filter := endpointDeliveriesFilter(f.EndpointID, after)
	if f.Status != "" {
		filter = append(filter, bson.E{Key: "status", Value: f.Status})
	}
	return filter
}

// Deliveries returns a page of an endpoint's deliveries, by key: a range
// of _id_. The cursor is the last one's "<kind>/<object>".
func (o *Outbound) Deliveries(ctx context.Context, f models.DeliveryFilter) ([]models.Delivery, string, error) {
	return repository.Page(f.Limit, f.After, func(after string, n int) ([]models.Delivery, error) {
		return o.findDeliveries(ctx, "deliveries", deliveriesPageFilter(f, after), options.Find().SetSort(idOrder).SetLimit(int64(n)))
	}, func(models.Delivery) bool { return true }, func(d models.Delivery) string {
		return strings.TrimPrefix(d.Key(), d.EndpointID+"/")
	})
}

// notPending is the condition of a requeue: a pending delivery is sent
// anyway.
var notPending = bson.E{Key: "status", Value: bson.D{{Key: "$ne", Value: models.DeliveryPending}}}

// requeueWindowFilter selects an endpoint's deliveries not pending whose
// last attempt was at or after since, through endpointId_1_lastAt_1.
func requeueWindowFilter(endpointID string, since time.Time) bson.D {
	return bson.D{{Key: "endpointId", Value: endpointID}, {Key: "lastAt", Value: bson.D{{Key: "$gte", Value: since}}}, notPending}
}

// Requeue makes the deliveries f selects pending again, due at now, their
// last state received forgotten: one object's by _id, or a window's found
// first (up to f.Limit) and then updated by _id, each under the condition
// that it is not pending.
func (o *Outbound) Requeue(ctx context.Context, f models.Requeue, now time.Time) (int, error) {
	update := bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "status", Value: models.DeliveryPending}, {Key: "attempts", Value: 0},
			{Key: "nextAt", Value: now}, {Key: "dueKey", Value: pendingKey(f.EndpointID, now)}, {Key: "since", Value: now},
			{Key: "pendingKey", Value: pendingKey(f.EndpointID, now)},
		}},
		{Key: "$unset", Value: bson.D{{Key: "fields", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}},
	}
	var filter bson.D
	if f.Kind != "" {
		key := models.Delivery{EndpointID: f.EndpointID, Kind: f.Kind, ObjectID: f.ObjectID}.Key()
		filter = bson.D{{Key: "_id", Value: key}, notPending}
	} else {
		which := requeueWindowFilter(f.EndpointID, f.Since)
		if f.Failed {
			which = bson.D{{Key: "endpointId", Value: f.EndpointID}, {Key: "status", Value: models.DeliveryFailed}}
		}
		docs, err := findDocs[idDoc](ctx, o.deliveries, which,
			options.Find().SetLimit(int64(f.Limit)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return 0, fmt.Errorf("requeue deliveries of endpoint %s: %w", models.Quote(f.EndpointID), err)
		}
		if len(docs) == 0 {
			return 0, nil
		}
		ids := make(bson.A, len(docs))
		for i, d := range docs {
			ids[i] = d.ID
		}
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, notPending}
	}
	res, err := updateMany(ctx, o.deliveries, filter, update)
	if err != nil {
		return 0, fmt.Errorf("requeue deliveries of endpoint %s: %w", models.Quote(f.EndpointID), translate(err))
	}
	return int(res.ModifiedCount), nil
}

// backlogFilter selects an endpoint's pending deliveries, a range of the
// sparse pendingKey_1 index.
func backlogFilter(endpointID string) bson.D {
	from, to := endpointKeys(endpointID)
	return bson.D{{Key: "pendingKey", Value: bson.D{{Key: "$gte", Value: from}, {Key: "$lt", Value: to}}}}
}

var backlogOrder = bson.D{{Key: "pendingKey", Value: 1}}

// Backlog returns the pending deliveries of each endpoint of ids (none:
// every endpoint) that has some, counted up to models.MaxBacklogCount
// each: per endpoint a count and the oldest, both in the sparse
// pendingKey_1 index.
func (o *Outbound) Backlog(ctx context.Context, ids ...string) (map[string]models.Backlog, error) {
	ids, err := repository.EndpointIDs(ctx, o, ids)
	if err != nil {
		return nil, err
	}
	out := map[string]models.Backlog{}
	for _, id := range ids {
		n, err := o.deliveries.CountDocuments(ctx, backlogFilter(id), options.Count().SetLimit(models.MaxBacklogCount))
		if err != nil {
			return nil, fmt.Errorf("count the backlog of endpoint %s: %w", models.Quote(id), translate(err))
		}
		if n == 0 {
			continue
		}
		// Sorted: the oldest is wanted (a DocumentDB engine sorts the
		// backlog to find it, every BacklogEvery).
		oldest, err := findDocs[deliveryDoc](ctx, o.deliveries, backlogFilter(id),
			options.Find().SetSort(backlogOrder).SetLimit(1).SetProjection(bson.D{{Key: "pendingKey", Value: 1}}))
		if err != nil {
			return nil, fmt.Errorf("read the backlog of endpoint %s: %w", models.Quote(id), err)
		}
		b := models.Backlog{Pending: n}
		if len(oldest) > 0 {
			_, at, _ := strings.Cut(oldest[0].PendingKey, "|")
			if t, err := time.Parse(pendingKeyTime, at); err == nil {
				b.Oldest = &t
			}
		}
		out[id] = b
	}
	return out, nil
}

// sendAttemptDoc is one attempt to send a delivery; its _id, a new ObjectID,
// orders the attempts (newest first: descending).
type sendAttemptDoc struct {
	ID         bson.ObjectID `bson:"_id"`
	EndpointID string        `bson:"endpointId"`
	MessageID  string        `bson:"messageId"`
	Type       string        `bson:"type"`
	ObjectID   string        `bson:"objectId"`
	At         time.Time     `bson:"at"`
	Status     int           `bson:"status"`
	LatencyMS  int64         `bson:"latencyMs"`
	Error      string        `bson:"error"`
	Delivered  bool          `bson:"delivered"`
}

func newSendAttemptDoc(a models.Attempt) sendAttemptDoc {
	return sendAttemptDoc{ID: bson.NewObjectID(), EndpointID: a.EndpointID, MessageID: a.MessageID, Type: a.Type, ObjectID: a.ObjectID,
		At: a.At, Status: a.Status, LatencyMS: a.Latency.Milliseconds(), Error: a.Error, Delivered: a.Delivered}
}

func (d sendAttemptDoc) model() models.Attempt {
	return models.Attempt{ID: d.ID.Hex(), EndpointID: d.EndpointID, MessageID: d.MessageID, Type: d.Type, ObjectID: d.ObjectID,
		At: d.At.UTC(), Status: d.Status, Latency: time.Duration(d.LatencyMS) * time.Millisecond, Error: d.Error, Delivered: d.Delivered}
}

// sendAttemptsOrder is the order of the attempts: newest first.
var sendAttemptsOrder = bson.D{{Key: "_id", Value: -1}}

// attemptWindow is a window of a page of attempts: the _id from lo (the
// first ObjectID of its second) up to hi, excluded; hasLo and hasHi say
// whether each side is bounded.
type attemptWindow struct {
	lo, hi       bson.ObjectID
	hasLo, hasHi bool
}

// sendAttemptsFilter selects the attempts of f within window w, before
// f's cursor (an _id in hex): through endpointId_1__id_-1 for an
// endpoint's, endpointId_1_delivered_1__id_-1 for its failures,
// delivered_1__id_-1 for every endpoint's failures, _id_ for all. A
// malformed cursor wraps models.ErrInvalid.
func sendAttemptsFilter(f models.AttemptFilter, w attemptWindow) (bson.D, error) {
	filter := bson.D{}
	if f.EndpointID != "" {
		filter = append(filter, bson.E{Key: "endpointId", Value: f.EndpointID})
	}
	if f.Failed {
		filter = append(filter, bson.E{Key: "delivered", Value: false})
	}
	var r bson.D
	if f.After != "" {
		id, err := bson.ObjectIDFromHex(f.After)
		if err != nil {
			return nil, models.ErrBadCursor()
		}
		if !w.hasHi || bytes.Compare(id[:], w.hi[:]) < 0 {
			w.hi, w.hasHi = id, true
		}
	}
	if w.hasHi {
		r = append(r, bson.E{Key: "$lt", Value: w.hi})
	}
	if w.hasLo {
		r = append(r, bson.E{Key: "$gte", Value: w.lo})
	}
	if r != nil {
		filter = append(filter, bson.E{Key: "_id", Value: r})
	}
	return filter, nil
}

// attemptWindowWidth is the width of the first window of a page of
// attempts; each next one is windowGrowth times wider, and the one that
// reaches past models.AttemptsKept (and a day more, for a retention
// behind) is unbounded below.
const attemptWindowWidth = time.Hour

// Attempts returns a page of attempts, newest first (by _id: a new
// ObjectID each, ordered by the second it was made). It walks _id down
// from the cursor (or now) in windows of time, each one query sorted and
// limited as the page: a DocumentDB engine, which sorts every match of a
// query, sorts one window's attempts, not all the attempts kept (see
// window.go for the same walk of the event log).
func (o *Outbound) Attempts(ctx context.Context, f models.AttemptFilter) ([]models.Attempt, string, error) {
	top := time.Now()
	if f.After != "" {
		id, err := bson.ObjectIDFromHex(f.After)
		if err != nil {
			return nil, "", fmt.Errorf("read attempts: %w", models.ErrBadCursor())
		}
		top = id.Timestamp().Add(time.Second)
	}
	out := make([]models.Attempt, 0, f.Limit+1)
	w := attemptWindow{}
	for width := attemptWindowWidth; len(out) <= f.Limit; width *= windowGrowth {
		from := top.Add(-width)
		w.lo, w.hasLo = bson.NewObjectIDFromTimestamp(from), width <= models.AttemptsKept+24*time.Hour
		filter, err := sendAttemptsFilter(f, w)
		if err != nil {
			return nil, "", fmt.Errorf("read attempts: %w", err)
		}
		docs, err := findDocs[sendAttemptDoc](ctx, o.attempts, filter,
			options.Find().SetSort(sendAttemptsOrder).SetLimit(int64(f.Limit+1-len(out))))
		if err != nil {
			return nil, "", fmt.Errorf("read attempts: %w", err)
		}
		for _, d := range docs {
			out = append(out, d.model())
		}
		if !w.hasLo {
			break
		}
		w.hi, w.hasHi = w.lo, true
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = out[f.Limit-1].ID
	}
	return out, next, nil
}

// sendAttemptsBeforeFilter selects the attempts made before cutoff, through
// at_1.
func sendAttemptsBeforeFilter(cutoff time.Time) bson.D {
	return bson.D{{Key: "at", Value: bson.D{{Key: "$lt", Value: cutoff}}}}
}

// DeleteAttemptsBefore deletes up to limit attempts made before cutoff: a
// find through at_1, unsorted (a DocumentDB engine would sort every one
// found), then a delete by _id.
func (o *Outbound) DeleteAttemptsBefore(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	docs, err := findDocs[struct {
		ID bson.ObjectID `bson:"_id"`
	}](ctx, o.attempts, sendAttemptsBeforeFilter(cutoff), options.Find().
		SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("find old attempts: %w", err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	ids := make(bson.A, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	res, err := o.attempts.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return 0, fmt.Errorf("delete old attempts: %w", translate(err))
	}
	return int(res.DeletedCount), nil
}

// Indexes of the outbound collections; docs/mongodb-queries.md's query →
// index table says which query reads each. The endpoints are read by _id
// alone.
var (
	deliveryIndexes = []mongo.IndexModel{
		{Keys: bson.D{{Key: "dueKey", Value: 1}}, Options: options.Index().SetSparse(true)},
		{Keys: bson.D{{Key: "pendingKey", Value: 1}}, Options: options.Index().SetSparse(true)},
		{Keys: bson.D{{Key: "endpointId", Value: 1}, {Key: "lastAt", Value: 1}}},
		{Keys: bson.D{{Key: "userId", Value: 1}}, Options: options.Index().SetSparse(true)},
		// An endpoint's deliveries of one status, by _id: one range,
		// however few have the status.
		{Keys: bson.D{{Key: "endpointId", Value: 1}, {Key: "status", Value: 1}, {Key: "_id", Value: 1}}},
	}
	deliveryAttemptIndexes = []mongo.IndexModel{
		{Keys: bson.D{{Key: "endpointId", Value: 1}, {Key: "_id", Value: -1}}},
		{Keys: bson.D{{Key: "endpointId", Value: 1}, {Key: "delivered", Value: 1}, {Key: "_id", Value: -1}}},
		{Keys: bson.D{{Key: "delivered", Value: 1}, {Key: "_id", Value: -1}}},
		{Keys: bson.D{{Key: "at", Value: 1}}},
	}
)

// userDeliveriesFilter selects a user's deliveries (of the user, and of
// its memberships), through userId_1.
func userDeliveriesFilter(userID string) bson.D {
	return bson.D{{Key: "userId", Value: userID}}
}

// membershipDeliveriesFilter selects a membership's deliveries, through
// userId_1 (its member's).
// eraseDeliveries erases the deliveries filter selects: those that are
// not deletions are deleted; the deletions are updated in place, their
// fingerprints and the data last sent unset and their revision moved on
// (a settle under way reads them again), so that an endpoint still learns
// of the deletion, in order, and a replay can send it again. Each of the
// two writes can be made again after a crash.
func (o *Outbound) eraseDeliveries(ctx context.Context, filter bson.D) error {
	notDeletion := append(slices.Clone(filter), bson.E{Key: "deleted", Value: false})
	if _, err := o.deliveries.DeleteMany(ctx, notDeletion); err != nil {
		return translate(err)
	}
	deletion := append(slices.Clone(filter), bson.E{Key: "deleted", Value: true},
		bson.E{Key: "$or", Value: bson.A{bson.D{{Key: "fields", Value: bson.D{{Key: "$ne", Value: nil}}}},
			bson.D{{Key: "sent", Value: bson.D{{Key: "$exists", Value: true}}}}}})
	_, err := updateMany(ctx, o.deliveries, deletion, bson.D{
		{Key: "$set", Value: bson.D{{Key: "fields", Value: nil}}},
		{Key: "$unset", Value: bson.D{{Key: "sent", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
	return translate(err)
}

// objectDeliveriesFilter selects every endpoint's delivery of the object
// id of kind k by _id (models.Delivery.Key), for an object whose
// deliveries name no user: one key per endpoint (at most
// models.MaxEndpoints, and those of the configuration).
func (o *Outbound) objectDeliveriesFilter(ctx context.Context, k models.Kind, id string) (bson.D, error) {
	eps, err := findDocs[idDoc](ctx, o.endpoints, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	keys := bson.A{}
	for _, ep := range eps {
		keys = append(keys, models.Delivery{EndpointID: ep.ID, Kind: k, ObjectID: id}.Key())
	}
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}, nil
}

func membershipDeliveriesFilter(membershipID, userID string) bson.D {
	return bson.D{{Key: "userId", Value: userID}, {Key: "kind", Value: string(models.KindMembership)}, {Key: "objectId", Value: membershipID}}
}
