package mongo

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
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write
	eng     engine
}

// userDoc is a users document. Its _id is derived from userId (see
// docID), so that every read and write of one user is by _id. Email is present only while the user is
// active and has one: the sparse unique email index then makes an email
// unique among active users on both engines, with no partial index.
type userDoc struct {
	ID              bson.ObjectID `bson:"_id"`
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

// emailIndex names the sparse unique email index, which unique violations
// name.
const emailIndex = "email_1"

// userIndexes are the indexes of users; README.md's query → index table
// says which query uses each. The unique ones are built by Prepare (see
// uniqueIndexes), the others by EnsureIndexes.
var userIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "userId", Value: 1}}, Options: options.Index().SetUnique(true)},
	{Keys: bson.D{{Key: "email", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)},
	{Keys: bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},                    // the change feed
	{Keys: bson.D{{Key: "eraseAfter", Value: 1}}, Options: options.Index().SetSparse(true)}, // erasure: tombstones still to erase
}

// obsoleteUserIndexes were made by earlier versions and serve no query:
// the planner intersected deletedAt_1_updatedAt_-1 with userId_1.
var obsoleteUserIndexes = []string{"updatedAt_-1", "deletedAt_1_updatedAt_-1"}

// maxApplyTries bounds the retries of Apply when a concurrent write to the
// same user wins a race.
const maxApplyTries = 3

// Apply writes ch to its user if the user is unknown, or active with an
// older stored state (Clerk time, then event id). It returns
//   - OutcomeApplied when ch is now the user's state (also when this very
//     event had been applied before);
//   - OutcomeStale when a newer state is stored;
//   - OutcomeDeletedUser when the user is deleted;
//   - an error wrapping models.ErrEmailTaken when ch's email is held by
//     another active user, models.ErrConflict when concurrent writes to
//     the user kept winning races, models.ErrInvalid when ch's metadata
//     cannot be stored, or models.ErrUnavailable when the database is down.
//
// How depends on the engine (see engine): applyAtomic on MongoDB,
// applySerial on FerretDB.
func (u *Users) Apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error) {
	w, err := newUserWrite(ch, now)
	if err != nil {
		return "", err
	}
	outcome, err := u.eng.applyUser(ctx, u, w)
	if err != nil {
		return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
	}
	return outcome, nil
}

func (atomicEngine) applyUser(ctx context.Context, u *Users, w userWrite) (models.Outcome, error) {
	return u.applyAtomic(ctx, w)
}

func (serialEngine) applyUser(ctx context.Context, u *Users, w userWrite) (models.Outcome, error) {
	return u.applySerial(ctx, w)
}

// applyAtomic is Apply where updates are atomic: one of two writes does
// it, a conditional update of an existing user or the insert of a new one
// (refused by the _id and userId indexes if the user exists). The one more
// likely to succeed goes first (the insert for user.created), so the usual
// case is one round trip. When neither goes through, the user's state,
// read from the primary, says why.
func (u *Users) applyAtomic(ctx context.Context, w userWrite) (models.Outcome, error) {
	writes := []func(context.Context) (bool, error){w.updateOld(u.coll), w.insertNew(u.coll)}
	if w.ch.New {
		writes[0], writes[1] = writes[1], writes[0]
	}
	for try := 1; ; try++ {
		for _, write := range writes {
			if done, err := write(ctx); err != nil || done {
				return models.OutcomeApplied, err
			}
		}
		// Neither write went through: the user exists and is newer or
		// deleted, or a concurrent write got in between.
		cur, err := u.state(ctx, w.doc.ID)
		switch {
		case errors.Is(err, models.ErrNotFound):
			// The insert was refused, and not for the user (users are
			// never removed): an engine that did not name the email index.
			return "", fmt.Errorf("insert refused with no user there: %w", models.ErrEmailTaken)
		case err != nil:
			return "", err
		default:
			if outcome, final := w.explain(cur); final {
				return outcome, u.keepErasable(ctx, outcome, cur)
			}
		}
		if try == maxApplyTries {
			return "", fmt.Errorf("concurrent writes to the user kept winning: %w", models.ErrConflict)
		}
	}
}

// applySerial is Apply where updates are not atomic: under the user's
// turn, the state is read by _id, the decision made in Go, and the user
// inserted or updated by _id. For user.created the insert goes first (the
// user is probably new), and the state is read only if it is refused.
func (u *Users) applySerial(ctx context.Context, w userWrite) (models.Outcome, error) {
	defer u.eng.turn(w.ch.UserID)()
	for try := 1; ; try++ {
		var cur userDoc
		err := models.ErrNotFound // for user.created, the insert first
		if !w.ch.New || try > 1 {
			cur, err = u.state(ctx, w.doc.ID)
		}
		if errors.Is(err, models.ErrNotFound) {
			err = translate(insertOne(ctx, u.coll, w.doc))
			if !errors.Is(err, models.ErrConflict) {
				return models.OutcomeApplied, err
			}
			// FerretDB does not say which index refused an insert: the
			// user itself (it exists) or its email.
			if _, serr := u.state(ctx, w.doc.ID); errors.Is(serr, models.ErrNotFound) {
				return "", fmt.Errorf("insert refused with no user there: %w", models.ErrEmailTaken)
			}
			if try == maxApplyTries {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		if outcome, final := w.explain(cur); final {
			return outcome, u.keepErasable(ctx, outcome, cur)
		}
		if _, err := u.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: w.doc.ID}}, w.changes); err != nil {
			return "", translate(err)
		}
		return models.OutcomeApplied, nil
	}
}

// explain decides, from the stored state cur of the user, what ch does
// when it is not newer than cur: final is false when ch is to be written.
func (w userWrite) explain(cur userDoc) (outcome models.Outcome, final bool) {
	switch {
	case cur.LastEventID == w.ch.EventID && (cur.DeletedAt != nil) == w.ch.Deleted:
		return models.OutcomeApplied, true // a retry of an applied event
	case cur.DeletedAt != nil:
		return models.OutcomeDeletedUser, true
	case !models.Newer(w.ch.SourceTime, w.ch.EventID, cur.SourceUpdatedAt, cur.LastEventID):
		return models.OutcomeStale, true
	}
	return "", false
}

// keepErasable makes erasure come back for a deleted user whose events
// were all erased already: the event that found the user deleted holds
// personal data too.
func (u *Users) keepErasable(ctx context.Context, outcome models.Outcome, cur userDoc) error {
	if outcome != models.OutcomeDeletedUser || cur.EraseAfter != nil || cur.DeletedAt == nil {
		return nil
	}
	return u.rearmErasure(ctx, cur.UserID, *cur.DeletedAt)
}

// userWrite is ch as the writes of Apply.
type userWrite struct {
	ch      models.Change
	filter  bson.D  // an active user older than ch (for atomic engines)
	changes bson.D  // that user as ch says
	doc     userDoc // a new user as ch says
}

// newUserWrite builds, from ch, both the document of a new user and the
// update of an existing one: every field a change writes is set here.
func newUserWrite(ch models.Change, now time.Time) (userWrite, error) {
	ts := ch.SourceTime.UTC()
	w := userWrite{
		ch: ch,
		filter: bson.D{
			{Key: "_id", Value: docID(ch.UserID)},
			{Key: "deletedAt", Value: nil},
		},
		doc: userDoc{
			ID: docID(ch.UserID), UserID: ch.UserID, CreatedAt: now, UpdatedAt: now,
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

// updateOld is the conditional update of an existing active user with an
// older state. done is false when there is none. A taken email is an
// error wrapping models.ErrEmailTaken.
func (w userWrite) updateOld(coll *mongo.Collection) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		res, err := coll.UpdateOne(ctx, w.filter, w.changes)
		if err != nil {
			return false, translate(err)
		}
		return res.MatchedCount > 0, nil
	}
}

// insertNew writes a new user. done is false when the user exists. A
// taken email is an error wrapping models.ErrEmailTaken.
func (w userWrite) insertNew(coll *mongo.Collection) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := translate(insertOne(ctx, coll, w.doc))
		if errors.Is(err, models.ErrConflict) {
			return false, nil // the user exists (_id or userId)
		}
		return err == nil, err
	}
}

// state reads, from the primary, what Apply needs to decide or explain a
// write.
func (u *Users) state(ctx context.Context, id bson.ObjectID) (userDoc, error) {
	var d userDoc
	err := findByID(ctx, u.primary, id, &d, bson.D{
		{Key: "userId", Value: 1}, {Key: "deletedAt", Value: 1}, {Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1},
		{Key: "eraseAfter", Value: 1},
	})
	if err != nil {
		return userDoc{}, fmt.Errorf("read user: %w", err)
	}
	return d, nil
}

// userListQuery is the filter and sort of one page of users: in _id order
// (the _id index), or, with an email, the one active user the email index
// finds, with no sort.
func userListQuery(f models.UserFilter) (filter, sort bson.D, err error) {
	filter = bson.D{}
	if !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "deletedAt", Value: nil})
	}
	if f.Email != "" {
		filter = append(filter, bson.E{Key: "email", Value: strings.ToLower(strings.TrimSpace(f.Email))})
	}
	if f.After != "" {
		after, err := bson.ObjectIDFromHex(f.After)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: cursor is not one this API returned", models.ErrInvalid)
		}
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}})
	}
	if f.Email == "" {
		sort = bson.D{{Key: "_id", Value: 1}}
	}
	return filter, sort, nil
}

// Get returns the user with userID, deleted or not, or an error wrapping
// models.ErrNotFound.
func (u *Users) Get(ctx context.Context, userID string) (models.User, error) {
	var d userDoc
	if err := findByID(ctx, u.coll, docID(userID), &d, nil); err != nil {
		return models.User{}, fmt.Errorf("user %s: %w", userID, err)
	}
	return d.model()
}

// List returns one page of users in a stable order (of _id, which is
// derived from userId: an order that means nothing else), starting after
// f.After. With an email, the page holds the one active user with that
// email, if any. A malformed cursor wraps models.ErrInvalid.
func (u *Users) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	filter, sort, err := userListQuery(f)
	if err != nil {
		return models.UserPage{}, err
	}
	opts := options.Find().SetLimit(int64(f.Limit) + 1)
	if sort != nil {
		opts.SetSort(sort)
	}
	cur, err := u.coll.Find(ctx, filter, opts)
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
