package mongo

import (
	"context"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// appliers write a change of each kind: the one place that maps a kind
// to its collections.
var appliers = map[models.Kind]func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error){
	models.KindUser: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		if sc, ok := ch.(models.SessionChange); ok {
			return s.users.ApplySession(ctx, sc, now)
		}
		return s.users.Apply(ctx, ch.(models.UserChange), now)
	},
	models.KindOrganization: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.orgs.Apply(ctx, ch.(models.OrganizationChange), now)
	},
	models.KindMembership: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.members.Apply(ctx, ch.(models.MembershipChange), now)
	},
	models.KindInvitation: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.invites.Apply(ctx, ch.(models.InvitationChange), now)
	},
	models.KindSubscription: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.billing.applySubscription(ctx, ch.(models.SubscriptionChange), now)
	},
	models.KindSubscriptionItem: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.billing.applyItem(ctx, ch.(models.SubscriptionItemChange), now)
	},
	models.KindPaymentAttempt: func(ctx context.Context, s *Store, ch models.Change, now time.Time) (models.Outcome, error) {
		return s.billing.applyAttempt(ctx, ch.(models.PaymentAttemptChange), now)
	},
}

// apply writes ch to its kind's collections.
func (s *Store) apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error) {
	if _, ok := ch.(models.IgnoredChange); ok {
		return models.OutcomeIgnored, nil // a billing type usersync does not know: nothing to write
	}
	apply, ok := appliers[ch.Kind()]
	if !ok {
		return "", fmt.Errorf("%w: the MongoDB store keeps no %q", models.ErrInvalid, ch.Kind())
	}
	return apply(ctx, s, ch, now)
}

// Deliver stores ev, applies ch to its object and marks ev processed, in
// three writes, each idempotent: a crash after the first leaves the event
// stored, and its next delivery or the recovery sweep applies it (the
// apply finds what it wrote, if it wrote); a crash after the second
// applies it again, which changes nothing. An event already finished is
// returned as it is, with no outcome; a change that cannot apply (or a
// mark that failed) leaves the event stored and returns the error, for
// the caller to mark it failed.
//
// Deliveries in flight at once share their round trips (batch.go), unless
// Options.DeliveryBatch is 1. A change of a kind a batch cannot write
// (none of oneWrites: a membership, an invitation, Clerk Billing's) goes
// alone at once: in a batch it would only add the batch's find to its own
// writes.
func (s *Store) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if _, shared := oneWrites[ch.Kind()]; shared && s.batch != nil {
		r := &delivery{ctx: ctx, ev: ev, ch: ch, now: now, done: make(chan struct{})}
		if s.batch.deliver(r) {
			return s.finish(r)
		}
	}
	return s.deliverOne(ctx, ev, ch, now)
}

// deliverOne is Deliver of one delivery alone.
func (s *Store) deliverOne(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	stored, created, err := s.events.Record(ctx, ev)
	if err != nil {
		return models.Delivered{}, err
	}
	if stored.Status.Finished() {
		return models.Delivered{Event: stored, Created: created}, nil
	}
	stored.Origin = ev.Origin
	d, err := s.Reapply(ctx, stored, ch, now)
	d.Created = created
	return d, err
}

// oneWrites are the kinds whose change, in the common case, is applied by
// one conditional write with nothing after it: what deliveries of a batch
// can share (batch.go). ok is false for a change that needs more (a
// deletion's cascade, metadata that cannot be stored). The write is the
// one the kind's Apply makes first; that it went through means applied.
var oneWrites = map[models.Kind]func(s *Store, ch models.Change, now time.Time) (coll *mongo.Collection, filter, update bson.D, ok bool){
	models.KindUser: func(s *Store, ch models.Change, now time.Time) (*mongo.Collection, bson.D, bson.D, bool) {
		u, ok := ch.(models.UserChange)
		if !ok || u.Deleted { // a session event (the batch writes its own), or a deletion
			return nil, nil, nil, false
		}
		w, err := newUserWrite(u, now)
		return s.users.coll, w.filter, w.update, err == nil
	},
	models.KindOrganization: func(s *Store, ch models.Change, now time.Time) (*mongo.Collection, bson.D, bson.D, bool) {
		o := ch.(models.OrganizationChange)
		if o.Deleted {
			return nil, nil, nil, false
		}
		filter, update, err := orgWrite(o, now)
		return s.orgs.coll, filter, update, err == nil
	},
}

// Reapply applies ch, the change of the stored event ev, and marks ev
// processed: Deliver's last two writes, for an event stored before (the
// sweep's and a replay's). When the change applied and recording is on,
// the mark records its outbox entry too (outbound.go): a re-apply after a
// crash between the apply and the mark records it.
func (s *Store) Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	d := models.Delivered{Event: ev}
	outcome, err := s.apply(ctx, ch, now)
	if err != nil {
		return d, err
	}
	if err := s.events.markProcessedWith(ctx, ev.ID, outcome, now, s.outbound.outboxEntry(ev, ch, outcome, now), ch.Kind()); err != nil {
		// The object is written; the event stays unmarked, and applying
		// it again changes nothing.
		return d, err
	}
	d.Outcome = outcome
	d.Event.Status, d.Event.Outcome, d.Event.Attempts = models.StatusProcessed, outcome, ev.Attempts+1
	return d, nil
}
