package mongo

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Deliveries in flight at the same moment share their round trips, as the
// embedded store's group commit shares one transaction: one find of their
// events (which tells the duplicates), one bulkWrite per collection of
// their objects' conditional writes, one insertMany of their events, made
// processed already where the write went through. So a new delivery
// writes its event once, not twice, and the batch makes two writes a
// delivery where a delivery alone makes three.
//
// The batch is a fast path only. Whatever it cannot settle with no doubt
// (an event stored already, an object written twice in one batch, a write
// the filter refused, a deletion's cascade, an email another user holds,
// any error) leaves the batch at the step it reached and goes on alone,
// on the path of a single delivery, which explains and retries. Every
// write the batch makes is the very conditional write the single path
// makes, and a delivery is answered only once its event is stored: a
// crash between the object's write and the event's leaves the delivery
// unanswered, and its next delivery finds the object written (the write
// refused as this very state) and stores the event.

// DefaultDeliveryBatch is how many deliveries one batch takes at most.
const DefaultDeliveryBatch = 64

// step is how far a batch took a delivery.
type step int

const (
	stepNone   step = iota // nothing known: the delivery goes on alone
	stepFound              // its event was stored before (d.Event, if read)
	stepStored             // its event is stored, its change not applied
	stepMarked             // applied, and its event stored processed: done
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

// batcher gathers deliveries into batches: the deliveries that arrive
// while batches are written make the next one, written by the first of
// its batchWriters that is free.
type batcher struct {
	s    *Store
	max  int
	reqs chan *delivery
	stop chan struct{}
	gone chan struct{}
}

// batchWriters is how many batches are written at once: while one waits
// for the server, another is written, and the server's cores share them.
const batchWriters = 2

func newBatcher(s *Store, max int) *batcher {
	b := &batcher{s: s, max: max, reqs: make(chan *delivery), stop: make(chan struct{}), gone: make(chan struct{})}
	var wg sync.WaitGroup
	for range batchWriters {
		wg.Go(b.run)
	}
	go func() {
		wg.Wait()
		close(b.gone)
	}()
	return b
}

// close stops the batcher once its batches are written.
func (b *batcher) close() {
	close(b.stop)
	<-b.gone
}

// deliver hands r to the batcher and waits for its batch to be written;
// false when the batcher stops or r's context ends before a batch takes
// it (r then goes on alone, from the start).
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
	fresh := s.findStored(ctx, live)
	s.applyBatch(ctx, fresh)
	s.storeBatch(ctx, fresh)
}

// findStored reads the events of batch stored already, by _id: those are
// found (a duplicate), the others returned. On an error every delivery
// goes on alone.
func (s *Store) findStored(ctx context.Context, batch []*delivery) []*delivery {
	ids := make(bson.A, len(batch))
	for i, r := range batch {
		r.doc = newStoredDoc(r.ev)
		ids[i] = r.doc.ID
	}
	var found []eventDoc
	cur, err := s.events.primary.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(summary))
	if err == nil {
		err = cur.All(ctx, &found)
	}
	if err != nil {
		return nil
	}
	stored := map[bson.ObjectID]eventDoc{}
	for _, d := range found {
		stored[d.ID] = d
	}
	var fresh []*delivery
	for _, r := range batch {
		if d, ok := stored[r.doc.ID]; ok {
			r.step, r.d = stepFound, models.Delivered{Event: d.model()}
			continue
		}
		fresh = append(fresh, r)
	}
	return fresh
}

// applyBatch makes the one conditional write of each delivery whose
// change is applied by one (oneWrites), one bulkWrite per collection, in
// _id order so that instances writing the same objects at once take them
// in the same order, and gives those that went through their outcome. A
// write that did not go through is left to the delivery alone, and so is
// the second change of one object in the batch.
func (s *Store) applyBatch(ctx context.Context, fresh []*delivery) {
	type op struct {
		r              *delivery
		id             bson.ObjectID
		filter, update bson.D
		outcome        models.Outcome // when the write goes through
	}
	byColl := map[*mongo.Collection][]op{}
	seen := map[string]bool{}
	users := s.sessionUsers(ctx, fresh)
	for _, r := range fresh {
		user, object := r.ch.IDs()
		key := string(r.ch.Kind()) + "/" + user + "/" + object
		if seen[key] {
			continue
		}
		if sc, ok := r.ch.(models.SessionChange); ok {
			// A session event: its activity alone is one write (sessions.go).
			doc, known := users[docID(sc.UserID)]
			if !known {
				continue
			}
			d := models.DecideSession(new(doc.version()), doc.LastActiveAt, sc)
			switch {
			case d.State == models.DecideStale && d.Active:
				seen[key] = true
				filter, update := activityWrite(sc.UserID, sc.ActiveAt)
				byColl[s.users.coll] = append(byColl[s.users.coll], op{r: r, id: docID(sc.UserID), filter: filter, update: update,
					outcome: models.OutcomeActivity})
			case d.State == models.DecideStale:
				seen[key] = true
				r.d.Outcome = models.OutcomeStale // nothing to write: activity never moves back
			}
			continue
		}
		one, ok := oneWrites[r.ch.Kind()]
		if !ok {
			continue
		}
		coll, filter, update, ok := one(s, r.ch, r.now)
		if !ok {
			continue
		}
		seen[key] = true
		byColl[coll] = append(byColl[coll], op{r: r, id: filter[0].Value.(bson.ObjectID), filter: filter, update: update,
			outcome: models.OutcomeApplied})
	}
	var created []*delivery // users the batch inserted
	for coll, ops := range byColl {
		slices.SortFunc(ops, func(a, b op) int { return bytes.Compare(a.id[:], b.id[:]) })
		writes := make([]mongo.WriteModel, len(ops))
		for i, o := range ops {
			writes[i] = mongo.NewUpdateOneModel().SetFilter(o.filter).SetUpdate(o.update).SetUpsert(true)
		}
		res, err := coll.BulkWrite(ctx, writes, options.BulkWrite().SetOrdered(false))
		failed, ok := writeErrors(err)
		if !ok {
			continue
		}
		for i, o := range ops {
			if _, refused := failed[i]; refused {
				continue
			}
			o.r.d.Outcome = o.outcome
			if _, inserted := upserted(res)[int64(i)]; inserted && coll == s.users.coll {
				created = append(created, o.r) // a session's write never inserts: its user was read
			}
		}
	}
	if len(created) == 0 {
		return
	}
	// New users read back the activity of their session events stored
	// before them (sessions.go), one find for the batch; if they cannot,
	// they go on alone (their write is done: the alone path finds it).
	ids := make([]string, len(created))
	for i, r := range created {
		ids[i] = r.ch.(models.UserChange).UserID
	}
	if s.users.catchUpActivity(ctx, ids...) != nil {
		for _, r := range created {
			r.d.Outcome = ""
		}
	}
}

// sessionUsers reads, in one find from the primary, the users of the
// session events of fresh, by _id: what models.DecideSession needs. A
// user unknown, or every user on an error, is absent: its event goes on
// alone.
func (s *Store) sessionUsers(ctx context.Context, fresh []*delivery) map[bson.ObjectID]userDoc {
	var ids bson.A
	for _, r := range fresh {
		if sc, ok := r.ch.(models.SessionChange); ok {
			ids = append(ids, docID(sc.UserID))
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var docs []userDoc
	cur, err := s.users.primary.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(append(bson.D{{Key: "lastActiveAt", Value: 1}}, versionProjection...)))
	if err == nil {
		err = cur.All(ctx, &docs)
	}
	if err != nil {
		return nil
	}
	users := make(map[bson.ObjectID]userDoc, len(docs))
	for _, d := range docs {
		users[d.ID] = d
	}
	return users
}

// storeBatch inserts the events of fresh, unordered: processed already
// for a change the batch applied, stored for the others. An insert
// refused as a duplicate (a concurrent delivery of the event) finds it;
// any other refusal leaves the delivery to go on alone.
func (s *Store) storeBatch(ctx context.Context, fresh []*delivery) {
	if len(fresh) == 0 {
		return
	}
	docs := make([]any, len(fresh))
	for i, r := range fresh {
		if r.d.Outcome != "" {
			at := r.now
			r.doc.Status, r.doc.Outcome, r.doc.ProcessedAt, r.doc.Attempts = string(models.StatusProcessed), string(r.d.Outcome), &at, 1
			r.doc.Uncounted = string(r.d.Outcome) // see counters.go
			if entry := s.outbound.outboxEntry(r.ev, r.ch, r.d.Outcome, r.now); entry != nil {
				seq := bson.NewObjectID() // see outboxSet
				r.doc.Outbox, r.doc.OutboxSeq = entry, &seq
			}
		}
		docs[i] = r.doc
	}
	_, err := s.events.primary.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false))
	failed, ok := writeErrors(err)
	if !ok {
		return
	}
	for i, r := range fresh {
		code, refused := failed[i]
		switch {
		case !refused && r.d.Outcome != "":
			r.step, r.d.Event, r.d.Created = stepMarked, r.doc.model(), true
			r.d.Event.Origin = r.ev.Origin
		case !refused:
			r.step, r.d.Event, r.d.Created = stepStored, r.doc.model(), true
		case isDuplicateKeyCode(code):
			r.step, r.d = stepFound, models.Delivered{}
		}
	}
}

// upserted are the writes of a bulkWrite that inserted, by index.
func upserted(res *mongo.BulkWriteResult) map[int64]any {
	if res == nil {
		return nil
	}
	return res.UpsertedIDs
}

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
		stored := r.d.Event
		if stored.ID == "" {
			var err error
			if stored, err = s.events.readStored(r.ctx, r.doc); err != nil {
				return models.Delivered{}, err
			}
		}
		if stored.Status.Finished() {
			return models.Delivered{Event: stored}, nil
		}
		stored.Origin = r.ev.Origin
		return s.Reapply(r.ctx, stored, r.ch, r.now)
	case stepStored:
		r.d.Event.Origin = r.ev.Origin
		d, err := s.Reapply(r.ctx, r.d.Event, r.ch, r.now)
		d.Created = true
		return d, err
	case stepMarked:
		return r.d, nil
	}
	return s.deliverOne(r.ctx, r.ev, r.ch, r.now)
}
