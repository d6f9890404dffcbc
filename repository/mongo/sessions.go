package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Session events (models.SessionChange) write their user's document: the
// user state they embed, under models.DecideSession's rule, with their
// activity in the same write ($max: never backwards); or, when that state
// does not apply, their activity alone, one conditional write. Neither
// moves updatedAt.

// sessionTypes are the Clerk types of session events, as the event log
// stores them.
var sessionTypes = func() bson.A {
	var a bson.A
	for _, t := range models.TypesOf(models.KindUser) {
		if models.IsSessionType(t) {
			a = append(a, t)
		}
	}
	return a
}()

// ApplySession applies a session event to its user. It returns
//   - OutcomeApplied when the user state it embeds applied (the user
//     created or updated, its activity with it; also when this very event
//     had been applied before);
//   - OutcomeActivity when it moved only the user's lastActiveAt;
//   - OutcomeDeleted when the user is deleted;
//   - OutcomeIgnored when the user is unknown and the event carries no
//     state to create it with (the user's creation reads its activity back
//     from the event log);
//   - OutcomeStale when it changed nothing;
//
// and the errors of Apply.
func (u *Users) ApplySession(ctx context.Context, ch models.SessionChange, now time.Time) (models.Outcome, error) {
	if ch.User != nil {
		w, err := sessionWrite(ch, *ch.User, now)
		if err != nil {
			return "", err
		}
		outcome, err := u.applyWrite(ctx, w, now)
		if err != nil || outcome != models.OutcomeStale {
			return outcome, err
		}
	}
	moved, err := u.setActivity(ctx, ch.UserID, ch.ActiveAt)
	if err != nil {
		return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
	}
	if moved {
		return models.OutcomeActivity, nil
	}
	cur, err := u.state(ctx, docID(ch.UserID))
	switch {
	case errors.Is(err, models.ErrNotFound):
		return models.OutcomeIgnored, nil
	case err != nil:
		return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
	case cur.DeletedAt != nil:
		return models.OutcomeDeleted, u.keepErasable(ctx, models.DecideDeleted, cur)
	}
	return models.OutcomeStale, nil
}

// sessionWrite is the write of the user state st that the session event
// ch embeds: Apply's, but for a strictly older stored state only (an
// equal time keeps the stored state), and with ch's activity.
func sessionWrite(ch models.SessionChange, st models.UserChange, now time.Time) (userWrite, error) {
	w, err := newUserWrite(st, now)
	if err != nil {
		return userWrite{}, err
	}
	w.session = &ch
	// The last of the filter is olderThan: Clerk's time, then the id.
	w.filter[len(w.filter)-1] = bson.E{Key: "sourceUpdatedAt", Value: bson.D{{Key: "$lt", Value: st.SourceTime.UTC()}}}
	w.update = append(w.update, bson.E{Key: "$max", Value: bson.D{{Key: "lastActiveAt", Value: ch.ActiveAt.UTC()}}})
	return w, nil
}

// decide is what applying w does to a user whose stored version is cur:
// models.Decide, or for a session's state models.DecideSession.
func (w userWrite) decide(cur models.Version) models.Decision {
	if w.session != nil {
		return models.DecideSession(&cur, nil, *w.session).State
	}
	return models.Decide(&cur, w.ch.Version())
}

// again is w's write of ch instead (its state without the email).
func (w userWrite) again(ch models.UserChange, now time.Time) (userWrite, error) {
	if w.session != nil {
		return sessionWrite(*w.session, ch, now)
	}
	return newUserWrite(ch, now)
}

// setActivity moves the active user's lastActiveAt to at, never
// backwards, by _id; moved is false when the user is unknown, deleted, or
// was active at or after at. updatedAt stays: it is not a change of the
// user.
func (u *Users) setActivity(ctx context.Context, userID string, at time.Time) (moved bool, err error) {
	filter, update := activityWrite(userID, at)
	res, err := updateOne(ctx, u.coll, filter, update)
	if err != nil {
		return false, fmt.Errorf("set the user's activity: %w", translate(err))
	}
	return res.MatchedCount > 0, nil
}

// activityWrite is the conditional write that moves the active user's
// lastActiveAt to at, never backwards, by _id. In a batch (batch.go) it
// is an upsert, as every write there: the user was read, so it never
// inserts; a user that no longer matches refuses it by _id, and the
// delivery goes on alone.
func activityWrite(userID string, at time.Time) (filter, update bson.D) {
	at = at.UTC()
	return bson.D{
			{Key: "_id", Value: docID(userID)},
			{Key: "userId", Value: userID},
			{Key: "deletedAt", Value: nil},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: "lastActiveAt", Value: nil}},
				bson.D{{Key: "lastActiveAt", Value: bson.D{{Key: "$lt", Value: at}}}},
			}},
		}, bson.D{
			{Key: "$set", Value: bson.D{{Key: "lastActiveAt", Value: at}}},
		}
}

// catchUpActivity gives users just created the newest activity of their
// session events stored before they existed (the event log keeps them
// until retention deletes them), so that lastActiveAt is the same in
// every order of arrival: one find of the users' events, through the
// userId_1_receivedAt_-1__id_-1 index, then a write for each user that
// has any (a session event is stored before it is applied, so of the
// session's write and the user's creation one sees the other).
func (u *Users) catchUpActivity(ctx context.Context, userIDs ...string) error {
	cur, err := u.events.Find(ctx, sessionEventsFilter(userIDs...),
		options.Find().SetProjection(bson.D{{Key: "userId", Value: 1}, {Key: "sourceTimestamp", Value: 1}}).SetHint(userEventsIndex))
	if err != nil {
		return fmt.Errorf("read the users' session events: %w", translate(err))
	}
	var docs []struct {
		UserID          string     `bson:"userId"`
		SourceTimestamp *time.Time `bson:"sourceTimestamp"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return fmt.Errorf("read the users' session events: %w", translate(err))
	}
	newest := map[string]time.Time{}
	for _, d := range docs {
		if d.SourceTimestamp != nil && d.SourceTimestamp.After(newest[d.UserID]) {
			newest[d.UserID] = *d.SourceTimestamp
		}
	}
	for userID, at := range newest {
		if _, err := u.setActivity(ctx, userID, at); err != nil {
			return err
		}
	}
	return nil
}

// sessionEventsFilter selects the session events of userIDs.
func sessionEventsFilter(userIDs ...string) bson.D {
	user := bson.E{Key: "userId", Value: userIDs[0]}
	if len(userIDs) > 1 {
		in := make(bson.A, len(userIDs))
		for i, id := range userIDs {
			in[i] = id
		}
		user.Value = bson.D{{Key: "$in", Value: in}}
	}
	return bson.D{user, {Key: "type", Value: bson.D{{Key: "$in", Value: sessionTypes}}}}
}

// userEventsIndex is the event log's index of a user's events.
const userEventsIndex = "userId_1_receivedAt_-1__id_-1"
