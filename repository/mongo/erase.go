package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Erasure of deleted users' and memberships' personal data.
//
// A tombstone carries eraseAfter (its deletedAt) while some of its events
// may still hold a body; the sparse eraseAfter indexes of users and
// memberships find the due ones without reading others. A user's events
// are found by the userId index of user_events, a membership's by the
// objectId index. Once none is left to erase, eraseAfter is removed. An
// event that arrives for a deleted user later (its outcome is
// deleted) finds it removed and sets it again. A pass that removes it
// looks for the tombstone's events once more afterwards and sets it back
// if one came in meanwhile: an event stored before that look is seen by
// it, and one stored after it finds eraseAfter removed. Either way it is
// erased.
//
// The pass that removes eraseAfter sets erasedAt on the tombstone: the
// personal data is gone. An event that arrives for the user or membership
// after that is erased when it is marked processed (deleted) or given
// up, in the same call (see Events.eraseIfErased): nothing waits for the
// next pass.

// eraseEpoch is the eraseAfter of a tombstone whose erasure an admin asked
// for: due at the next pass, whatever USERSYNC_ERASE_AFTER says.
var eraseEpoch = time.Unix(0, 0).UTC()

// subject is a kind of tombstone whose events erasure erases: a deleted
// user (its events by userId, its membership events included) or a
// deleted membership (its events by objectId: they hold the member's
// public_user_data while the member's user may stay active).
type subject struct {
	name   string
	coll   *mongo.Collection
	id     func(eraseDoc) string
	events func(id string) bson.D // its events not erased yet, through an index
	// deliveries selects the outbound deliveries of the tombstone
	// (outbound.go): erasure deletes those that are not deletions, and
	// keeps the deletions, which an endpoint may still have to be told
	// (pending, or failed for a replay), without the fingerprints of what
	// it was told before.
	deliveries func(ctx context.Context, d eraseDoc) (bson.D, error)
	// object, when set, erases what the object's own document holds of a
	// person, in the state the pass read (its lastEventId): a newer state
	// that came in meanwhile is due on its own schedule.
	object func(ctx context.Context, t eraseDoc) error
	// guard, when set, is the condition that the object is still in the
	// state the pass read (an object that is not a tombstone may take a
	// newer state meanwhile, which holds personal data again and is due
	// on its own schedule): the pass erases nothing of it otherwise, and
	// does not mark it erased.
	guard func(t eraseDoc) bson.D
	count func(*models.Erasure)
}

// subjects are the kinds of tombstones erased, users first.
func (s *Store) subjects() []subject {
	return []subject{
		{name: "user", coll: s.users.coll, id: func(d eraseDoc) string { return d.UserID },
			events: userEventsToErase, count: func(e *models.Erasure) { e.Users++ },
			deliveries: func(_ context.Context, d eraseDoc) (bson.D, error) { return userDeliveriesFilter(d.UserID), nil }},
		{name: "membership", coll: s.members.coll, id: func(d eraseDoc) string { return d.MembershipID },
			events: membershipEventsToErase, count: func(e *models.Erasure) { e.Memberships++ },
			deliveries: func(_ context.Context, d eraseDoc) (bson.D, error) {
				return membershipDeliveriesFilter(d.MembershipID, d.UserID), nil
			}},
		// An invitation that ended (accepted, revoked, expired, deleted
		// with its organization) holds the email of someone who may never
		// be a user: its email and metadata go with its events.
		{name: "invitation", coll: s.invites.coll, id: func(d eraseDoc) string { return d.InvitationID },
			events: membershipEventsToErase, count: func(e *models.Erasure) { e.Invitations++ },
			deliveries: func(ctx context.Context, d eraseDoc) (bson.D, error) {
				return s.outbound.objectDeliveriesFilter(ctx, models.KindInvitation, d.InvitationID)
			},
			guard: func(d eraseDoc) bson.D { return bson.D{{Key: "lastEventId", Value: d.LastEventID}} },
			object: func(ctx context.Context, d eraseDoc) error {
				_, err := updateOne(ctx, s.invites.coll, bson.D{{Key: "_id", Value: docID(d.InvitationID)}, {Key: "lastEventId", Value: d.LastEventID}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "emailAddress", Value: nil}, {Key: "metadata", Value: bson.D{}}}}})
				if err != nil {
					return fmt.Errorf("erase invitation %s: %w", d.InvitationID, translate(err))
				}
				return nil
			}},
	}
}

// eraseDoc is what erasure reads of a tombstone.
type eraseDoc struct {
	UserID       string     `bson:"userId"`
	MembershipID string     `bson:"membershipId"`
	InvitationID string     `bson:"invitationId"`
	LastEventID  string     `bson:"lastEventId"`
	DeletedAt    *time.Time `bson:"deletedAt"`
	ErasedAt     *time.Time `bson:"erasedAt"`
}

var eraseProjection = bson.D{{Key: "userId", Value: 1}, {Key: "membershipId", Value: 1}, {Key: "invitationId", Value: 1},
	{Key: "lastEventId", Value: 1}, {Key: "deletedAt", Value: 1}, {Key: "erasedAt", Value: 1}}

// rearmErasure marks the tombstone of userID as holding events to erase
// again, due from dueAt. Apply calls it when an event arrives for a
// deleted user whose tombstone is not marked.
func (u *Users) rearmErasure(ctx context.Context, userID string, dueAt time.Time) error {
	return rearm(ctx, u.coll, "user", userID, dueAt)
}

// rearm marks the tombstone id in coll as holding events to erase again,
// due from dueAt.
func rearm(ctx context.Context, coll *mongo.Collection, what, id string, dueAt time.Time) error {
	// By _id alone: only tombstones are marked, and a tombstone stays one.
	_, err := updateOne(ctx, coll, bson.D{{Key: "_id", Value: docID(id)}},
		// $min: an erasure an admin asked for (eraseEpoch) stays due at once.
		bson.D{{Key: "$min", Value: bson.D{{Key: "eraseAfter", Value: dueAt}}}})
	if err != nil {
		return fmt.Errorf("mark %s %s for erasure: %w", what, id, translate(err))
	}
	return nil
}

// EraseDeletedBefore erases the events of every user and membership whose
// tombstone has been due for erasure since before cutoff: their rawBody and
// payload are removed and erasedAt is set to now. Events still stored, or
// failed and to be retried, are left (Pending) until they are processed or
// given up; the tombstone stays due until then. Errors wrap
// models.ErrUnavailable when the database is down.
func (s *Store) EraseDeletedBefore(ctx context.Context, cutoff, now time.Time) (models.Erasure, error) {
	var total models.Erasure
	for _, subj := range s.subjects() {
		if err := s.eraseDue(ctx, subj, cutoff, now, &total); err != nil {
			return total, err
		}
	}
	return total, nil
}

// eraseDue erases the tombstones of subj due since before cutoff, adding
// what it did to total.
func (s *Store) eraseDue(ctx context.Context, subj subject, cutoff, now time.Time, total *models.Erasure) error {
	cur, err := subj.coll.Find(ctx, eraseDueFilter(cutoff),
		options.Find().SetProjection(eraseProjection).SetBatchSize(100))
	if err != nil {
		return fmt.Errorf("find %ss to erase: %w", subj.name, translate(err))
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var d eraseDoc
		if err := cur.Decode(&d); err != nil {
			return fmt.Errorf("read %s to erase: %w", subj.name, err)
		}
		res, err := s.eraseEvents(ctx, subj, d, now)
		if d.ErasedAt != nil && res.Events == 0 {
			// Marked again by an event that found it erased (see
			// keepErasable), which its mark erased at once: nothing
			// was left to erase, and no tombstone is counted erased.
			res.Users, res.Memberships, res.Invitations = 0, 0, 0
		}
		total.Users += res.Users
		total.Memberships += res.Memberships
		total.Invitations += res.Invitations
		total.Events += res.Events
		total.Pending += res.Pending
		if err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("find %ss to erase: %w", subj.name, translate(err))
	}
	return nil
}

// EraseUser erases the events of the deleted user userID at once, as
// EraseDeletedBefore would. Events that cannot be erased yet are erased by
// the next pass after they are processed or given up. It returns an error
// wrapping models.ErrNotFound for an unknown user and models.ErrConflict
// for an active one.
func (s *Store) EraseUser(ctx context.Context, userID string, now time.Time) (models.Erasure, error) {
	var d eraseDoc
	if err := findByID(ctx, s.users.primary, docID(userID), &d, eraseProjection); err != nil {
		return models.Erasure{}, fmt.Errorf("user %s: %w", userID, translate(err))
	}
	if d.DeletedAt == nil {
		return models.Erasure{}, fmt.Errorf("%w: user %s is active; only a deleted user's events are erased", models.ErrConflict, userID)
	}
	d.UserID = userID
	res, err := s.eraseEvents(ctx, s.subjects()[0], d, now)
	if err != nil || res.Pending == 0 {
		return res, err
	}
	_, err = updateOne(ctx, s.users.coll, bson.D{{Key: "_id", Value: docID(userID)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "eraseAfter", Value: eraseEpoch}}}})
	if err != nil {
		return res, fmt.Errorf("mark user %s for erasure: %w", userID, translate(err))
	}
	return res, nil
}

// erasable is the rule an event must meet to be erased: not erased yet,
// and processed, discarded, or failed with no retry to come; the condition of the
// write that erases it.
var erasable = bson.D{{Key: "erasedAt", Value: nil}, {Key: "$or", Value: bson.A{
	bson.D{{Key: "status", Value: bson.D{{Key: "$in", Value: bson.A{models.StatusProcessed, models.StatusDiscarded}}}}},
	bson.D{{Key: "status", Value: models.StatusFailed}, {Key: "retryAt", Value: nil}},
}}}

// eraseEvents erases the outbound deliveries of the tombstone t of subj
// (eraseDeliveries), erases its events that can be erased, and unmarks
// the tombstone when none is left.
func (s *Store) eraseEvents(ctx context.Context, subj subject, t eraseDoc, now time.Time) (models.Erasure, error) {
	var res models.Erasure
	id := subj.id(t)
	filter, err := subj.deliveries(ctx, t)
	if err != nil {
		return res, fmt.Errorf("find the outbound deliveries of %s %s: %w", subj.name, id, err)
	}
	if err := s.outbound.eraseDeliveries(ctx, filter); err != nil {
		return res, fmt.Errorf("erase the outbound deliveries of %s %s: %w", subj.name, id, err)
	}
	if subj.guard != nil {
		n, err := subj.coll.CountDocuments(ctx, append(bson.D{{Key: "_id", Value: docID(id)}}, subj.guard(t)...), options.Count().SetLimit(1))
		if err != nil {
			return res, fmt.Errorf("read %s %s: %w", subj.name, id, translate(err))
		}
		if n == 0 {
			return res, nil // a newer state came: due on its own schedule
		}
	}
	if subj.object != nil {
		if err := subj.object(ctx, t); err != nil {
			return res, err
		}
	}
	docs, err := s.events.findAll(ctx, subj.events(id), options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "status", Value: 1}, {Key: "retryAt", Value: 1}}))
	if err != nil {
		return res, fmt.Errorf("find events of %s %s: %w", subj.name, id, err)
	}
	for _, ev := range docs {
		if ev.Status == string(models.StatusStored) || (ev.Status == string(models.StatusFailed) && ev.RetryAt != nil) {
			res.Pending++
			continue
		}
		done, err := s.events.erase(ctx, ev.ID, now)
		if err != nil {
			return res, err
		}
		if done {
			res.Events++
		} else {
			res.Pending++ // its status changed meanwhile
		}
	}
	if res.Pending > 0 {
		return res, nil
	}
	if done, err := s.unmarkErasure(ctx, subj, t, id, now); err != nil || !done {
		return res, err
	}
	subj.count(&res)
	return res, nil
}

// unmarkErasure removes eraseAfter from the tombstone id of subj (t, as
// the pass read it: subj.guard) and sets erasedAt, then looks for an event
// of it that came in meanwhile, and marks it again, due at once, if there
// is one. done is false when a newer state of the object came meanwhile
// (subj.guard): it is left as that state wrote it.
func (s *Store) unmarkErasure(ctx context.Context, subj subject, t eraseDoc, id string, now time.Time) (done bool, err error) {
	filter := bson.D{{Key: "_id", Value: docID(id)}}
	if subj.guard != nil {
		filter = append(filter, subj.guard(t)...)
	}
	res, err := updateOne(ctx, subj.coll, filter, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "eraseAfter", Value: ""}}},
		{Key: "$set", Value: bson.D{{Key: "erasedAt", Value: now}}},
	})
	if err != nil {
		return false, fmt.Errorf("unmark %s %s for erasure: %w", subj.name, id, translate(err))
	}
	if subj.guard != nil && res.MatchedCount == 0 {
		return false, nil
	}
	n, err := s.events.coll.CountDocuments(ctx, subj.events(id), options.Count().SetLimit(1))
	if err != nil {
		return true, fmt.Errorf("find events of %s %s: %w", subj.name, id, translate(err))
	}
	if n == 0 {
		return true, nil
	}
	return true, rearm(ctx, subj.coll, subj.name, id, eraseEpoch)
}

// erase removes the body of one event if it is erasable; done is false
// when it is not (any more).
func (e *Events) erase(ctx context.Context, id bson.ObjectID, now time.Time) (done bool, err error) {
	done, err = updateByID(ctx, e.primary, id, erasable, bson.D{
		{Key: "$set", Value: bson.D{{Key: "erasedAt", Value: now}}},
		{Key: "$unset", Value: bson.D{{Key: "rawBody", Value: ""}, {Key: "payload", Value: ""}}},
	})
	if err != nil {
		return false, fmt.Errorf("erase event %s: %w", id.Hex(), err)
	}
	if !done {
		// Erased by a concurrent pass, or no longer erasable.
		ev, err := e.find(ctx, e.primary, bson.D{{Key: "_id", Value: id}}, summary)
		if errors.Is(err, models.ErrNotFound) {
			return true, nil // deleted by retention: nothing left to erase
		}
		if err != nil {
			return false, fmt.Errorf("erase event %s: %w", id.Hex(), err)
		}
		return ev.ErasedAt != nil, nil
	}
	return true, nil
}

// eraseDueFilter selects the tombstones whose events are due for erasure;
// the sparse eraseAfter_1 index holds only tombstones still to erase.
func eraseDueFilter(cutoff time.Time) bson.D {
	return bson.D{{Key: "eraseAfter", Value: bson.D{{Key: "$lte", Value: cutoff}}}}
}

// userEventsToErase selects the events of userID not erased yet, through
// the userId_1_receivedAt_-1__id_-1 index.
func userEventsToErase(userID string) bson.D {
	return bson.D{{Key: "userId", Value: userID}, {Key: "erasedAt", Value: nil}}
}

// membershipEventsToErase selects the events of membershipID not erased
// yet, through the objectId_1_receivedAt_-1__id_-1 index.
func membershipEventsToErase(membershipID string) bson.D {
	return bson.D{{Key: "objectId", Value: membershipID}, {Key: "erasedAt", Value: nil}}
}

// eraseIfErased erases the event with _id id, just marked processed with
// outcome deleted, or given up, if its user's or its membership's data
// has been erased already (the tombstone has erasedAt):
// such an event holds the personal data of an erased user or member, and
// is not left for a pass.
func (e *Events) eraseIfErased(ctx context.Context, id bson.ObjectID, now time.Time) error {
	var ev struct {
		UserID   string `bson:"userId"`
		ObjectID string `bson:"objectId"`
	}
	if err := findByID(ctx, e.primary, id, &ev, bson.D{{Key: "userId", Value: 1}, {Key: "objectId", Value: 1}}); err != nil {
		if errors.Is(err, models.ErrNotFound) {
			err = nil
		}
		return err
	}
	for _, t := range []struct {
		coll     *mongo.Collection
		what, id string
	}{{e.users, "user", ev.UserID}, {e.memberships, "membership", ev.ObjectID}, {e.invitations, "invitation", ev.ObjectID}} {
		if t.id == "" {
			continue
		}
		var d struct {
			ErasedAt *time.Time `bson:"erasedAt"`
		}
		err := findByID(ctx, t.coll, docID(t.id), &d, bson.D{{Key: "erasedAt", Value: 1}})
		if errors.Is(err, models.ErrNotFound) || err == nil && d.ErasedAt == nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s %s: %w", t.what, t.id, err)
		}
		_, err = e.erase(ctx, id, now)
		return err
	}
	return nil
}
