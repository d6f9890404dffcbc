package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Schema 3: emails as models.NormalizeEmail makes them, and users' Clerk
// creation time (sourceCreatedAt) filled from their last applied payload,
// as the embedded store's schema upgrade fills it.
//
// Earlier versions folded an email's case the Unicode way, so an address
// written with a look-alike letter (the Kelvin sign for K) was stored as
// another user's address and could take it from that user. Migrate
// recomputes every active user's email from its last applied payload (its
// lastEventId's body): users whose email comes out the same are left as
// they are; the others give up the email they hold, then each recomputed
// email goes to the newest state claiming it, taken from an older holder
// as a webhook's claim would be (takeEmail). A user whose last payload
// was erased or cannot be read keeps its email. The operator runs
// reconcile afterwards: Clerk's current state settles whatever a
// look-alike changed before the upgrade.
//
// Reads: the active users and their last applied events of a database of
// schema below 3 (written by versions before c0b5adc, 2026-11-26,
// "Upgrade: every active user's email is recomputed from its last applied
// payload"), whose emails were folded the Unicode way.
// Remove: with fillCreated, in the first release after no database of
// schema below 3 is left; payloadFixes, recomputeEmails, emailFix and
// their tests go with it.

// emailFix is one active user whose recomputed email differs from the
// stored one.
type emailFix struct {
	userID        string
	stored, email string // "": none
	version       models.Version
}

// createdFill is one active user written before usersync kept Clerk's
// created_at, whose last applied payload holds it.
type createdFill struct {
	userID, lastEventID string
	at                  time.Time
}

// payloadFixes reads every active user (by the users' primary, with only
// its version, email and Clerk creation time) and its last applied event,
// and returns those whose email the rule recomputes differently, newest
// state first, and those whose sourceCreatedAt that payload fills.
func (s *Store) payloadFixes(ctx context.Context) ([]emailFix, []createdFill, error) {
	cur, err := s.users.primary.Find(ctx, bson.D{{Key: "deletedAt", Value: nil}},
		options.Find().SetProjection(bson.D{{Key: "userId", Value: 1}, {Key: "email", Value: 1},
			{Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1}, {Key: "sourceCreatedAt", Value: 1}}))
	if err != nil {
		return nil, nil, fmt.Errorf("read users: %w", translate(err))
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var fixes []emailFix
	var fills []createdFill
	for cur.Next(ctx) {
		var d userDoc
		if err := cur.Decode(&d); err != nil {
			return nil, nil, fmt.Errorf("read users: %w", err)
		}
		ev, err := s.events.Get(ctx, d.LastEventID)
		switch {
		case errors.Is(err, models.ErrNotFound):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("read the last event of user %s: %w", d.UserID, err)
		case len(ev.RawBody) == 0:
			continue // erased
		}
		if at, ok := models.PayloadCreatedAt(ev.RawBody); ok && d.Profile.SourceCreatedAt == nil {
			fills = append(fills, createdFill{userID: d.UserID, lastEventID: d.LastEventID, at: at})
		}
		email, ok := models.PayloadEmail(ev.RawBody)
		if !ok || email == d.Email {
			continue
		}
		fixes = append(fixes, emailFix{userID: d.UserID, stored: d.Email, email: email,
			version: models.Version{SourceTime: d.SourceUpdatedAt, EventID: d.LastEventID}})
	}
	if err := cur.Err(); err != nil {
		return nil, nil, fmt.Errorf("read users: %w", translate(err))
	}
	slices.SortFunc(fixes, func(a, b emailFix) int {
		switch {
		case models.Newer(a.version.SourceTime, a.version.EventID, b.version.SourceTime, b.version.EventID):
			return -1
		case models.Newer(b.version.SourceTime, b.version.EventID, a.version.SourceTime, a.version.EventID):
			return 1
		}
		return 0
	})
	return fixes, fills, nil
}

// fillCreated sets the sourceCreatedAt of each fill, on the user whose
// state is still that of its last event then (a newer state carries its
// own). It does not move updatedAt: the user's REST shape gains a field
// it always had in Clerk, and the change feed need not serve every user
// again. It returns how many users it filled.
//
// Reads: the active users without sourceCreatedAt of a database of schema
// below 3, written by versions before ca3755c (2026-11-26, "Users keep
// Clerk's created_at as sourceCreatedAt").
// Remove: with the email recompute above (the same pass over users), in
// the first release after no database of schema below 3 is left;
// createdFill goes with it.
func (s *Store) fillCreated(ctx context.Context, fills []createdFill) (int, error) {
	n := 0
	for _, f := range fills {
		res, err := updateOne(ctx, s.users.primary, bson.D{{Key: "_id", Value: docID(f.userID)}, {Key: "deletedAt", Value: nil},
			{Key: "lastEventId", Value: f.lastEventID}, {Key: "sourceCreatedAt", Value: nil}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "sourceCreatedAt", Value: f.at}}}})
		if err != nil {
			return n, fmt.Errorf("fill the creation time of user %s: %w", f.userID, translate(err))
		}
		n += int(res.ModifiedCount)
	}
	return n, nil
}

// recomputeEmails writes the fixes: each user gives up the email it
// holds, then, newest first, claims its recomputed one. It returns how
// many users' emails changed.
func (s *Store) recomputeEmails(ctx context.Context, fixes []emailFix, now time.Time) (int, error) {
	changed := map[string]bool{}
	for _, f := range fixes {
		if f.stored == "" {
			continue
		}
		res, err := s.users.primary.UpdateOne(ctx, bson.D{{Key: "userId", Value: f.userID}, {Key: "email", Value: f.stored}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "email", Value: ""}}}, {Key: "$set", Value: bson.D{{Key: "updatedAt", Value: now}}}})
		if err != nil {
			return len(changed), fmt.Errorf("recompute the email of user %s: %w", f.userID, translate(err))
		}
		if res.ModifiedCount > 0 {
			changed[f.userID] = true
		}
	}
	for _, f := range fixes {
		if f.email == "" {
			continue
		}
		ch := models.UserChange{UserID: f.userID, EventID: f.version.EventID, SourceTime: f.version.SourceTime, Email: f.email}
		// A newer claimant, or a newer holder, keeps it.
		drop, err := s.users.takeEmail(ctx, ch, now)
		if err != nil {
			return len(changed), fmt.Errorf("recompute the email of user %s: %w", f.userID, err)
		}
		if drop {
			continue
		}
		res, err := s.users.primary.UpdateOne(ctx, bson.D{{Key: "userId", Value: f.userID}, {Key: "deletedAt", Value: nil},
			{Key: "email", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: f.email}, {Key: "updatedAt", Value: now}}}})
		if err = translate(err); errors.Is(err, errDuplicate) {
			continue // a newer claimant holds it
		}
		if err != nil {
			return len(changed), fmt.Errorf("recompute the email of user %s: %w", f.userID, err)
		}
		if res.ModifiedCount > 0 {
			changed[f.userID] = true
		}
	}
	return len(changed), nil
}
