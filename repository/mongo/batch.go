package mongo

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Deliveries in flight at the same moment share their round trips, as the
// embedded store's group commit shares one transaction: one insertMany of
// their events, one bulkWrite of their objects' conditional writes per
// collection, one bulkWrite of their marks. The batch is a fast path only.
// Whatever it cannot settle with no doubt (an event stored already, an
// object written twice in one batch, a write the filter refused, a
// deletion's cascade, an email another user holds, any error) leaves the
// batch at the step it reached and goes on alone, on the path of a single
// delivery, which explains and retries. So every promise of Deliver holds
// either way: a write the batch makes is the very conditional write the
// single path makes, and a delivery is answered only after its writes are
// acknowledged.

// DefaultDeliveryBatch is how many deliveries one batch takes at most.
const DefaultDeliveryBatch = 64

// step is how far a batch took a delivery.
type step int

const (
	stepNone    step = iota // nothing written: the delivery goes on alone
	stepFound               // its event was stored before: it is read
	stepStored              // its event is stored, its change not applied
	stepApplied             // its change applied, its event not marked
	stepMarked              // done
)

// delivery is one Deliver waiting for, or carried by, a batch.
type delivery struct {
	ctx  context.Context
	ev   models.Event
	ch   models.Change
	now  time.Time
	doc  eventDoc
	step step
	d    models.Delivered
	done chan struct{}
}

// batcher gathers deliveries into batches, one batch at a time: the
// deliveries that arrive while a batch is written make the next one.
type batcher struct {
	s    *Store
	max  int
	reqs chan *delivery
	stop chan struct{}
	gone chan struct{}
}

func newBatcher(s *Store, max int) *batcher {
	b := &batcher{s: s, max: max, reqs: make(chan *delivery), stop: make(chan struct{}), gone: make(chan struct{})}
	go b.run()
	return b
}

// close stops the batcher once its batch is written.
func (b *batcher) close() {
	close(b.stop)
	<-b.gone
}

// deliver hands r to the batcher and waits for its batch; false when the
// batcher is stopped or ctx ends first (r then goes on alone from the
// step its batch took it to, if any).
func (b *batcher) deliver(r *delivery) bool {
	select {
	case b.reqs <- r:
	case <-b.stop:
		return false
	case <-r.ctx.Done():
		return false
	}
	<-r.done
	return true
}

func (b *batcher) run() {
	defer close(b.gone)
	for {
		var batch []*delivery
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-b.stop:
			return
		}
	gather:
		for len(batch) < b.max {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		b.s.writeBatch(batch)
		for _, r := range batch {
			close(r.done)
		}
	}
}

// writeBatch takes each delivery of batch as far as the batch can, within
// the earliest deadline of their requests (the change feed relies on that
// bound, see models.ChangeSettle).
func (s *Store) writeBatch(batch []*delivery) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	deadline, ok := live[0].ctx.Deadline()
	for _, r := range live[1:] {
		if d, has := r.ctx.Deadline(); has && (!ok || d.Before(deadline)) {
			deadline, ok = d, true
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if ok {
		ctx, cancel = context.WithDeadline(context.Background(), deadline)
	}
	defer cancel()
	stored := s.storeBatch(ctx, live)
	applied := s.applyBatch(ctx, stored)
	s.markBatch(ctx, applied)
}

// storeBatch inserts the events of batch, unordered: the ones inserted
// are stored; one refused (a duplicate, a document the engine refuses)
// goes on alone.
func (s *Store) storeBatch(ctx context.Context, batch []*delivery) []*delivery {
	docs := make([]any, len(batch))
	for i, r := range batch {
		r.doc = newStoredDoc(r.ev)
		docs[i] = r.doc
	}
	_, err := s.events.primary.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	failed, ok := writeErrors(err)
	if !ok {
		return nil
	}
	var stored []*delivery
	for i, r := range batch {
		switch code, refused := failed[i]; {
		case !refused:
			r.step, r.d = stepStored, models.Delivered{Event: r.doc.model(), Created: true}
			stored = append(stored, r)
		case code == duplicateKey && r.doc.Payload != nil:
			r.step = stepFound
		}
	}
	return stored
}

// applyBatch makes the one conditional write of each stored delivery whose
// change is applied by one (oneWrites), one bulkWrite per collection, in
// _id order so that instances writing the same objects at once take them
// in the same order. A write that did not go through goes on alone, and
// so does the second change of one object in the batch.
func (s *Store) applyBatch(ctx context.Context, stored []*delivery) []*delivery {
	type op struct {
		r              *delivery
		id             bson.ObjectID
		filter, update bson.D
	}
	byColl := map[*mongo.Collection][]op{}
	seen := map[string]bool{}
	for _, r := range stored {
		one, ok := oneWrites[r.ch.Kind()]
		if !ok {
			continue
		}
		coll, filter, update, ok := one(s, r.ch, r.now)
		_, object := r.ch.IDs()
		if user, _ := r.ch.IDs(); object == "" {
			object = user
		}
		key := string(r.ch.Kind()) + "/" + object
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		byColl[coll] = append(byColl[coll], op{r: r, id: filter[0].Value.(bson.ObjectID), filter: filter, update: update})
	}
	var applied []*delivery
	for coll, ops := range byColl {
		slices.SortFunc(ops, func(a, b op) int { return bytes.Compare(a.id[:], b.id[:]) })
		writes := make([]mongo.WriteModel, len(ops))
		for i, o := range ops {
			writes[i] = mongo.NewUpdateOneModel().SetFilter(o.filter).SetUpdate(o.update).SetUpsert(true)
		}
		_, err := coll.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
		failed, ok := writeErrors(err)
		if !ok {
			continue
		}
		for i, o := range ops {
			if _, refused := failed[i]; !refused {
				o.r.step, o.r.d.Outcome = stepApplied, appliedOutcome
				applied = append(applied, o.r)
			}
		}
	}
	return applied
}

// appliedOutcome is the outcome of a conditional write that went through.
const appliedOutcome = models.OutcomeApplied

// markBatch marks the applied deliveries processed, in one bulkWrite in
// _id order; a mark that fails is made again alone.
func (s *Store) markBatch(ctx context.Context, applied []*delivery) {
	if len(applied) == 0 {
		return
	}
	slices.SortFunc(applied, func(a, b *delivery) int { return bytes.Compare(a.doc.ID[:], b.doc.ID[:]) })
	writes := make([]mongo.WriteModel, len(applied))
	for i, r := range applied {
		writes[i] = mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: r.doc.ID}, notProcessed}).
			SetUpdate(markProcessed(r.d.Outcome, r.now))
	}
	_, err := s.events.primary.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
	failed, ok := writeErrors(err)
	if !ok {
		return
	}
	for i, r := range applied {
		if _, refused := failed[i]; !refused {
			r.step = stepMarked
			r.d.Event.Status, r.d.Event.Outcome, r.d.Event.Attempts = models.StatusProcessed, r.d.Outcome, 1
		}
	}
}

// duplicateKey is the server's code of a write refused by a unique index.
const duplicateKey = 11000

// writeErrors says which writes of an unordered insertMany or bulkWrite
// failed, by index, with their codes: ok is false when the error leaves
// every write in doubt (the command failed, or its write concern did).
func writeErrors(err error) (failed map[int]int, ok bool) {
	if err == nil {
		return nil, true
	}
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return nil, false
	}
	failed = map[int]int{}
	for _, we := range bwe.WriteErrors {
		failed[we.Index] = we.Code
	}
	return failed, true
}

// finish takes r on alone from the step its batch took it to.
func (s *Store) finish(r *delivery) (models.Delivered, error) {
	switch r.step {
	case stepFound:
		stored, err := s.events.readStored(r.ctx, r.doc)
		if err != nil || stored.Status.Finished() {
			return models.Delivered{Event: stored}, err
		}
		return s.Reapply(r.ctx, stored, r.ch, r.now)
	case stepStored:
		d, err := s.Reapply(r.ctx, r.d.Event, r.ch, r.now)
		d.Created = true
		return d, err
	case stepApplied:
		if err := s.events.MarkProcessed(r.ctx, r.d.Event.ID, r.d.Outcome, r.now); err != nil {
			d := r.d
			d.Outcome = ""
			return d, err
		}
		r.d.Event.Status, r.d.Event.Outcome, r.d.Event.Attempts = models.StatusProcessed, r.d.Outcome, 1
		return r.d, nil
	case stepMarked:
		return r.d, nil
	}
	return s.deliverOne(r.ctx, r.ev, r.ch, r.now)
}
