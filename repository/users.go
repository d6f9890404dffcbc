package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Users is the users collection.
type Users struct {
	coll  *mongo.Collection
	locks *keyLocks // per user; set for the embedded engine
}

// userDoc is a users document. Email is present only while the user is
// active and has one: the sparse unique email index then makes an email
// unique among active users on both engines, with no partial index.
type userDoc struct {
	ID              bson.ObjectID `bson:"_id,omitempty"`
	UserID          string        `bson:"userId"`
	Email           string        `bson:"email,omitempty"`
	DisplayName     string        `bson:"displayName"`
	Metadata        bson.D        `bson:"metadata"`
	CreatedAt       time.Time     `bson:"createdAt"`
	UpdatedAt       time.Time     `bson:"updatedAt"`
	DeletedAt       *time.Time    `bson:"deletedAt"`
	SourceUpdatedAt time.Time     `bson:"sourceUpdatedAt"`
	LastEventID     string        `bson:"lastEventId"`
	Profile         profileDoc    `bson:",inline"`
	// EraseAfter is set on a tombstone whose events still hold personal
	// data: the time erasure counts from (see erase.go). Sparse-indexed.
	EraseAfter *time.Time `bson:"eraseAfter,omitempty"`
}

func (d userDoc) model() (models.User, error) {
	meta, err := docToJSON(d.Metadata)
	if err != nil {
		return models.User{}, fmt.Errorf("user %s metadata: %w", d.UserID, err)
	}
	if d.Metadata == nil {
		meta = []byte("{}")
	}
	u := models.User{
		UserID:          d.UserID,
		Email:           d.Email,
		DisplayName:     d.DisplayName,
		Metadata:        meta,
		CreatedAt:       d.CreatedAt.UTC(),
		UpdatedAt:       d.UpdatedAt.UTC(),
		SourceUpdatedAt: d.SourceUpdatedAt.UTC(),
		LastEventID:     d.LastEventID,
		Profile:         d.Profile.model(),
	}
	if d.DeletedAt != nil {
		t := d.DeletedAt.UTC()
		u.DeletedAt = &t
	}
	return u, nil
}

func (u *Users) ensureIndexes(ctx context.Context) error {
	return createIndexes(ctx, u.coll, []mongo.IndexModel{
		{Keys: bson.D{{Key: "userId", Value: 1}}, Options: options.Index().SetUnique(true)},
		{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)},
		{Keys: bson.D{{Key: "updatedAt", Value: -1}}},
		{Keys: bson.D{{Key: "deletedAt", Value: 1}, {Key: "updatedAt", Value: -1}}},
	})
}

// maxApplyTries bounds the retries of Apply when a concurrent write to the
// same user wins a race.
const maxApplyTries = 3

// Apply writes ch to its user if the user is unknown, or active with an
// older stored state (Clerk time, then event id). Either of two writes does
// it: a conditional update of an existing user, or the insert of a new one,
// which the unique userId index refuses if the user exists. The one more
// likely to succeed goes first (the insert for user.created), so the usual
// case is one round trip; on the embedded engine an insert also avoids
// reading the whole collection. Apply returns
//   - OutcomeApplied when ch is now the user's state (also when this very
//     event had been applied before);
//   - OutcomeStale when a newer state is stored;
//   - OutcomeDeletedUser when the user is deleted;
//   - an error wrapping models.ErrConflict when ch's email is held by another
//     active user, or models.ErrUnavailable when the database is down.
func (u *Users) Apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error) {
	w, err := newUserWrite(ch, now)
	if err != nil {
		return "", err
	}
	defer u.locks.lock(ch.UserID)()
	writes := []func(context.Context, *mongo.Collection) (bool, error){w.updateOld, w.insertNew}
	if ch.New {
		writes[0], writes[1] = writes[1], writes[0]
	}
	for try := 1; ; try++ {
		for _, write := range writes {
			done, err := write(ctx, u.coll)
			if err != nil {
				return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
			}
			if done {
				return models.OutcomeApplied, nil
			}
		}
		// Neither write went through: the user is newer or deleted, or the
		// email is held by another active user.
		cur, err := u.state(ctx, ch.UserID)
		switch {
		case errors.Is(err, models.ErrNotFound):
			// Users are never removed, so only the email can have clashed.
		case err != nil:
			return "", err
		case cur.LastEventID == ch.EventID && (cur.DeletedAt != nil) == ch.Deleted:
			return models.OutcomeApplied, nil // a retry of an applied event
		case cur.DeletedAt != nil:
			// This event's body holds personal data too: if the user's
			// events are all erased already, make erasure come back.
			if cur.EraseAfter == nil {
				return models.OutcomeDeletedUser, u.rearmErasure(ctx, ch.UserID, *cur.DeletedAt)
			}
			return models.OutcomeDeletedUser, nil
		case !models.Newer(ch.SourceTime, ch.EventID, cur.SourceUpdatedAt, cur.LastEventID):
			return models.OutcomeStale, nil
		case try < maxApplyTries:
			continue // a concurrent write to this user won a race
		}
		return "", fmt.Errorf("user %s: email is held by another active user: %w", ch.UserID, models.ErrConflict)
	}
}

// userWrite is ch as the two writes of Apply.
type userWrite struct {
	filter  bson.D  // an active user older than ch
	changes bson.D  // that user as ch says
	doc     userDoc // a new user as ch says
}

func newUserWrite(ch models.Change, now time.Time) (userWrite, error) {
	ts := ch.SourceTime.UTC()
	w := userWrite{
		filter: bson.D{
			{Key: "userId", Value: ch.UserID},
			{Key: "deletedAt", Value: nil},
		},
		doc: userDoc{
			UserID: ch.UserID, CreatedAt: now, UpdatedAt: now,
			SourceUpdatedAt: ts, LastEventID: ch.EventID,
		},
	}
	if ch.Deleted {
		// A delete wins over every state; it turns the user into a tombstone
		// so that every order of delivery ends in the same document.
		w.doc.DisplayName, w.doc.Metadata, w.doc.DeletedAt = ch.UserID, bson.D{}, &ts
		w.doc.EraseAfter = &ts
		w.changes = bson.D{
			{Key: "$set", Value: append(bson.D{
				{Key: "deletedAt", Value: ts},
				{Key: "displayName", Value: w.doc.DisplayName},
				{Key: "metadata", Value: w.doc.Metadata},
				{Key: "sourceUpdatedAt", Value: ts},
				{Key: "lastEventId", Value: ch.EventID},
				{Key: "updatedAt", Value: now},
				{Key: "eraseAfter", Value: ts},
			}, profileDoc{}.set()...)},
			{Key: "$unset", Value: bson.D{{Key: "email", Value: ""}}},
		}
		return w, nil
	}
	meta, err := jsonToDoc(ch.Metadata)
	if err != nil {
		return userWrite{}, fmt.Errorf("user %s metadata: %w: %v", ch.UserID, models.ErrInvalid, err)
	}
	w.doc.Email, w.doc.DisplayName, w.doc.Metadata = ch.Email, ch.DisplayName, meta
	w.doc.Profile = newProfileDoc(ch.Profile)
	w.filter = append(w.filter, bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "sourceUpdatedAt", Value: bson.D{{Key: "$lt", Value: ts}}}},
		bson.D{{Key: "sourceUpdatedAt", Value: ts}, {Key: "lastEventId", Value: bson.D{{Key: "$lt", Value: ch.EventID}}}},
	}})
	set := bson.D{
		{Key: "displayName", Value: ch.DisplayName},
		{Key: "metadata", Value: meta},
		{Key: "sourceUpdatedAt", Value: ts},
		{Key: "lastEventId", Value: ch.EventID},
		{Key: "updatedAt", Value: now},
	}
	set = append(set, w.doc.Profile.set()...)
	if ch.Email != "" {
		w.changes = bson.D{{Key: "$set", Value: append(set, bson.E{Key: "email", Value: ch.Email})}}
	} else {
		w.changes = bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "email", Value: ""}}}}
	}
	return w, nil
}

// updateOld applies the write to an existing active user with an older state.
// done is false when there is none, or when the new email is taken.
func (w userWrite) updateOld(ctx context.Context, coll *mongo.Collection) (done bool, err error) {
	res, err := coll.UpdateOne(ctx, w.filter, w.changes)
	if err = translate(err); errors.Is(err, models.ErrConflict) {
		return false, nil
	}
	return err == nil && res.MatchedCount > 0, err
}

// insertNew writes a new user. done is false when the user exists, or when
// the email is taken.
func (w userWrite) insertNew(ctx context.Context, coll *mongo.Collection) (done bool, err error) {
	err = translate(insertOne(ctx, coll, w.doc))
	if errors.Is(err, models.ErrConflict) {
		return false, nil
	}
	return err == nil, err
}

// state reads what Apply needs to explain a missed write.
func (u *Users) state(ctx context.Context, userID string) (userDoc, error) {
	var d userDoc
	err := u.coll.FindOne(ctx, bson.D{{Key: "userId", Value: userID}},
		options.FindOne().SetProjection(bson.D{
			{Key: "deletedAt", Value: 1}, {Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1},
			{Key: "eraseAfter", Value: 1},
		})).Decode(&d)
	if err != nil {
		return userDoc{}, fmt.Errorf("read user %s: %w", userID, translate(err))
	}
	return d, nil
}

// Get returns the user with userID, deleted or not, or an error wrapping
// models.ErrNotFound.
func (u *Users) Get(ctx context.Context, userID string) (models.User, error) {
	var d userDoc
	err := u.coll.FindOne(ctx, bson.D{{Key: "userId", Value: userID}}).Decode(&d)
	if err != nil {
		return models.User{}, fmt.Errorf("user %s: %w", userID, translate(err))
	}
	return d.model()
}

// List returns one page of users in a stable order (creation of the
// document), starting after f.After. A malformed cursor wraps
// models.ErrInvalid.
func (u *Users) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	filter := bson.D{}
	if !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "deletedAt", Value: nil})
	}
	if f.Email != "" {
		filter = append(filter, bson.E{Key: "email", Value: strings.ToLower(strings.TrimSpace(f.Email))})
	}
	if f.After != "" {
		after, err := bson.ObjectIDFromHex(f.After)
		if err != nil {
			return models.UserPage{}, fmt.Errorf("%w: cursor is not one this API returned", models.ErrInvalid)
		}
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}})
	}
	cur, err := u.coll.Find(ctx, filter, options.Find().
		SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetLimit(int64(f.Limit)+1))
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list users: %w", translate(err))
	}
	var docs []userDoc
	if err := cur.All(ctx, &docs); err != nil {
		return models.UserPage{}, fmt.Errorf("list users: %w", translate(err))
	}
	var page models.UserPage
	if len(docs) > f.Limit {
		docs = docs[:f.Limit]
		page.NextCursor = docs[len(docs)-1].ID.Hex()
	}
	page.Users = make([]models.User, 0, len(docs))
	for _, d := range docs {
		m, err := d.model()
		if err != nil {
			return models.UserPage{}, err
		}
		page.Users = append(page.Users, m)
	}
	return page, nil
}
