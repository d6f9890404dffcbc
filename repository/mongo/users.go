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

// Users is the users collection.
type Users struct {
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write
	members *Memberships      // a deletion's cascade
	events  *mongo.Collection // the event log, from the primary: a new user's activity (sessions.go)
	// walkBatch is the batch size of WalkActive's cursor.
	walkBatch int
	// afterTake, if set, runs after Apply took an email from another user
	// and before it writes again (tests race it).
	afterTake func()
	// density sizes the windows of the users' pages and change feed (pages.go).
	density densities
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
	// LastActiveAt is written only by session events (sessions.go), never
	// by a user state's write: absent until one tells of an activity, and
	// on a tombstone.
	LastActiveAt *time.Time `bson:"lastActiveAt,omitempty"`
	Profile      profileDoc `bson:",inline"`
	// EraseAfter is set on a tombstone whose events still hold personal
	// data: the time erasure counts from (see erase.go). Sparse-indexed.
	EraseAfter *time.Time `bson:"eraseAfter,omitempty"`
	// ErasedAt is set on a tombstone once its events were erased.
	ErasedAt *time.Time `bson:"erasedAt,omitempty"`
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
		LastActiveAt:    utc(d.LastActiveAt),
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

// userIndexes are the indexes of users; docs/mongodb-queries.md's query → index table
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
// EnsureIndexes drops them; knownIndexNames takes them as usersync's.
//
// Reads: the indexes of a database of schema 0, made by versions before
// a6aede5 (2026-11-21, "Users keyed by a derived _id").
// Remove: with obsoleteEventIndexes, in the first release after no
// database of schema below 3 is left (Migrate drops them before it
// leaves a database at schema 3, and serve drops what a stopped run left).
var obsoleteUserIndexes = []string{"updatedAt_-1", "deletedAt_1_updatedAt_-1"}

// maxApplyTries bounds the writes of one Apply: a write that lost a race
// to a concurrent write of the same user, or whose email had to be taken
// from another user first, is tried again, up to this many writes in all.
const maxApplyTries = 5

// Apply writes ch to its user if models.Decide says so: the user is
// unknown, or active with an older stored state (Clerk time, then event
// id), or ch deletes it. It returns
//   - OutcomeApplied when ch is now the user's state (also when this very
//     event had been applied before, and when ch's email had to be left
//     out, see below);
//   - OutcomeStale when a newer state is stored;
//   - OutcomeDeleted when the user is deleted;
//   - an error wrapping models.ErrEmailTaken when another active user
//     kept claiming ch's email faster than it could be taken (see
//     takeEmail), models.ErrRetryLater when concurrent writes to the user
//     kept winning races, models.ErrInvalid when ch's metadata cannot be
//     stored, or models.ErrUnavailable when the database is down. No
//     error carries an email: it may end up in an event's error field.
//
// The rules are those of models.Decide, each written once as the filter
// of one conditional write: an upsert of the user by _id that matches
// only an active user with an older state (any active user for a
// deletion), or inserts the user when it is unknown. A new user and an
// update cost one round trip. When the write does not go through, the
// user's state says why, through models.Decide; the stored state is the
// explanation, not a second statement of the rules.
//
// An email held by another active user is taken from it when ch proves
// that it no longer holds it (models.TakesEmailFrom): see takeEmail. So
// two users that swapped emails in Clerk converge whatever the order of
// delivery, and whatever events were lost.
//
// A deletion then deletes the user's active memberships (see applied).
func (u *Users) Apply(ctx context.Context, ch models.UserChange, now time.Time) (models.Outcome, error) {
	w, err := newUserWrite(ch, now)
	if err != nil {
		return "", err
	}
	return u.applyWrite(ctx, w, now)
}

// applyWrite is Apply of the write w (a user event's, or a session's
// embedded state: sessions.go).
func (u *Users) applyWrite(ctx context.Context, w userWrite, now time.Time) (models.Outcome, error) {
	ch := w.ch
	fail := func(err error) (models.Outcome, error) {
		return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
	}
	emailHeld := false
	for try := 1; try <= maxApplyTries; try++ {
		outcome, err := u.write(ctx, w)
		emailHeld = errors.Is(err, errEmailHeld)
		switch {
		case errors.Is(err, errLostRace):
			continue
		case emailHeld:
			drop, err := u.takeEmail(ctx, w.ch, now)
			if err != nil {
				return fail(err)
			}
			if drop {
				if w, err = w.again(withoutEmail(ch), now); err != nil {
					return fail(err)
				}
			}
			if u.afterTake != nil {
				u.afterTake()
			}
			continue
		case err != nil:
			return fail(err)
		}
		if outcome == outcomeCreated {
			if err := u.catchUpActivity(ctx, ch.UserID); err != nil {
				return fail(err)
			}
			outcome = models.OutcomeApplied
		}
		return u.applied(ctx, ch, outcome, now)
	}
	if emailHeld {
		return fail(fmt.Errorf("other users kept claiming the email: %w", models.ErrEmailTaken))
	}
	return fail(fmt.Errorf("concurrent writes to the user kept winning: %w", models.ErrRetryLater))
}

// applied ends an Apply that made its decision: a deletion deletes the
// user's memberships, whatever the decision (the deletion may have been
// written by an earlier delivery that stopped before this write: its
// next delivery, or the sweep, heals it).
func (u *Users) applied(ctx context.Context, ch models.UserChange, outcome models.Outcome, now time.Time) (models.Outcome, error) {
	if ch.Deleted {
		if err := u.members.cascade(ctx, bson.E{Key: "userId", Value: ch.UserID}, ch.SourceTime, ch.EventID, now); err != nil {
			return "", fmt.Errorf("apply event %s to user %s: %w", ch.EventID, ch.UserID, err)
		}
	}
	return outcome, nil
}

// Reasons for Apply to write again. Neither leaves Apply.
var (
	// errEmailHeld: ch's email is held by another active user.
	errEmailHeld = errors.New("email held by another user")
	// errLostRace: a concurrent write changed the user between the write
	// and the read that explains it.
	errLostRace = errors.New("lost a race")
)

// write makes the conditional write of w once. It returns the outcome,
// errEmailHeld, errLostRace or another error. The driver's error for a
// duplicate key is never returned: its message holds the key (an email).
func (u *Users) write(ctx context.Context, w userWrite) (models.Outcome, error) {
	res, err := updateOne(ctx, u.coll, w.filter, w.update, options.UpdateOne().SetUpsert(true))
	if err == nil && res.UpsertedCount > 0 && !w.ch.Deleted {
		return outcomeCreated, nil
	}
	if err == nil {
		return models.OutcomeApplied, nil // updated, or inserted
	}
	err = translate(err)
	switch {
	case errors.Is(err, models.ErrEmailTaken):
		return "", errEmailHeld
	case !errors.Is(err, errDuplicate):
		return "", err
	}
	// Another duplicate key: the upsert's insert was refused by _id
	// because the user exists with a state the filter rejects (a stale
	// change, a deleted user, a retry), or by the email index on an engine
	// that did not name it. The user's state tells which.
	cur, err := u.state(ctx, w.doc.ID)
	switch {
	case errors.Is(err, models.ErrNotFound) && w.ch.Email != "":
		return "", errEmailHeld
	case errors.Is(err, models.ErrNotFound):
		return "", fmt.Errorf("the user is stored under another _id: %w", models.ErrNeedsMigration)
	case err != nil:
		return "", err
	}
	d := w.decide(cur.version())
	if d == models.DecideUnchanged && !w.ch.Deleted {
		return outcomeCreated, nil
	}
	if !d.Writes() {
		return d.Outcome(), u.keepErasable(ctx, d, cur)
	}
	if w.ch.Email != "" {
		// The filter matches the stored state: the email index refused it.
		// (Or a concurrent write got in between; taking the email then
		// finds no holder, and the write is tried again.)
		return "", errEmailHeld
	}
	return "", errLostRace
}

// takeEmail settles a claim of ch on an email that another active user
// holds, by models.TakesEmailFrom: ch is a state at time T that claims
// the email, so a holder whose stored state is older than T no longer
// holds it (the event that said so may have been lost), and loses it
// here: one conditional write, whose filter checks the holder's version,
// so a newer state of the holder written meanwhile keeps it. A holder
// whose stored state is newer keeps it: ch's own user has given the email
// up since, and drop reports that ch must be written without it. In every
// other case (no holder any more, or a different one) Apply writes again.
//
// The holder's document changes, so its updatedAt moves, and the change
// feed serves it; its Clerk version (sourceUpdatedAt, lastEventId) stays:
// its next event is still applied.
func (u *Users) takeEmail(ctx context.Context, ch models.UserChange, now time.Time) (drop bool, err error) {
	res, err := updateOne(ctx, u.primary, takeEmailFilter(ch), bson.D{
		{Key: "$unset", Value: bson.D{{Key: "email", Value: ""}}},
		{Key: "$set", Value: bson.D{{Key: "updatedAt", Value: now}}},
	})
	if err != nil {
		return false, fmt.Errorf("take the email from its holder: %w", translate(err))
	}
	if res.MatchedCount > 0 {
		return false, nil
	}
	var holder userDoc
	err = u.primary.FindOne(ctx, bson.D{{Key: "email", Value: ch.Email}}, options.FindOne().SetProjection(versionProjection)).Decode(&holder)
	if err = translate(err); errors.Is(err, models.ErrNotFound) {
		return false, nil // given up meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("read the holder of the email: %w", err)
	}
	if holder.UserID == ch.UserID || holder.DeletedAt != nil {
		return false, nil
	}
	return !models.TakesEmailFrom(ch, holder.version()), nil
}

// takeEmailFilter selects the other active user that holds ch's email
// with a stored state older than ch, through the email index.
func takeEmailFilter(ch models.UserChange) bson.D {
	return append(bson.D{
		{Key: "email", Value: ch.Email},
		{Key: "deletedAt", Value: nil},
		{Key: "userId", Value: bson.D{{Key: "$ne", Value: ch.UserID}}},
	}, olderThan(ch.Version()))
}

// olderThan matches a stored state (of a user, an organization or a
// membership) older than v: Clerk's time, then the event id
// (models.Newer).
func olderThan(v models.Version) bson.E {
	ts := v.SourceTime.UTC()
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: "sourceUpdatedAt", Value: bson.D{{Key: "$lt", Value: ts}}}},
		bson.D{{Key: "sourceUpdatedAt", Value: ts}, {Key: "lastEventId", Value: bson.D{{Key: "$lt", Value: v.EventID}}}},
	}}
}

// withoutEmail is ch with its email left out.
func withoutEmail(ch models.UserChange) models.UserChange {
	ch.Email = ""
	return ch
}

// keepErasable makes erasure come back for a deleted user whose events
// were all erased already: the event that found the user deleted holds
// personal data too. Marking it processed erases it at once when the user
// was erased (see eraseIfErased); this mark is for a mark that never
// comes (a crash), and is then due at once.
func (u *Users) keepErasable(ctx context.Context, d models.Decision, cur userDoc) error {
	if d != models.DecideDeleted || cur.EraseAfter != nil || cur.DeletedAt == nil {
		return nil
	}
	due := *cur.DeletedAt
	if cur.ErasedAt != nil {
		due = eraseEpoch
	}
	return u.rearmErasure(ctx, cur.UserID, due)
}

// outcomeCreated is write's word for applied by inserting the user, or
// found applied by this very event before (a retry: the insert may have
// been its own, and a crash may have come before what follows it); the
// user then reads back its activity (sessions.go). Never an event's
// outcome.
const outcomeCreated models.Outcome = "created"

// userWrite is ch as the write of Apply.
type userWrite struct {
	ch models.UserChange
	// session, when set, makes the write a session's (sessions.go): its
	// embedded state and its activity.
	session *models.SessionChange
	filter  bson.D  // models.Decide's DecideUpdate, and the user's _id
	update  bson.D  // the user as ch says; with upsert, the new user
	doc     userDoc // a new user as ch says (seeds)
}

// newUserWrite builds, from ch, both the document of a new user and the
// update of an existing one: every field a change writes is set here.
func newUserWrite(ch models.UserChange, now time.Time) (userWrite, error) {
	ts := ch.SourceTime.UTC()
	w := userWrite{
		ch: ch,
		// An upsert inserts these equalities too: the _id, and no deletedAt
		// until a deletion's $set gives one.
		filter: bson.D{
			{Key: "_id", Value: docID(ch.UserID)},
			{Key: "deletedAt", Value: nil},
		},
		doc: userDoc{
			ID: docID(ch.UserID), UserID: ch.UserID, CreatedAt: now, UpdatedAt: now,
			SourceUpdatedAt: ts, LastEventID: ch.EventID,
		},
	}
	onInsert := bson.E{Key: "$setOnInsert", Value: bson.D{
		{Key: "userId", Value: ch.UserID},
		{Key: "createdAt", Value: now},
	}}
	if ch.Deleted {
		// A delete wins over every state of an active user; it turns the
		// user into a tombstone so that every order of delivery ends in
		// the same document.
		w.doc.DisplayName, w.doc.Metadata, w.doc.DeletedAt = ch.UserID, bson.D{}, &ts
		w.doc.EraseAfter = &ts
		w.update = bson.D{
			{Key: "$set", Value: append(bson.D{
				{Key: "deletedAt", Value: ts},
				{Key: "displayName", Value: w.doc.DisplayName},
				{Key: "metadata", Value: w.doc.Metadata},
				{Key: "sourceUpdatedAt", Value: ts},
				{Key: "lastEventId", Value: ch.EventID},
				{Key: "updatedAt", Value: now},
				{Key: "eraseAfter", Value: ts},
			}, profileDoc{}.set()...)},
			{Key: "$unset", Value: bson.D{{Key: "email", Value: ""}, {Key: "lastActiveAt", Value: ""}}},
			onInsert,
		}
		return w, nil
	}
	meta, err := jsonToDoc(ch.Metadata)
	if err != nil {
		return userWrite{}, fmt.Errorf("user %s metadata: %w: %v", ch.UserID, models.ErrInvalid, err)
	}
	w.doc.Email, w.doc.DisplayName, w.doc.Metadata = ch.Email, ch.DisplayName, meta
	w.doc.Profile = newProfileDoc(ch.Profile)
	// Not this very event (DecideUnchanged: a retry), and older.
	w.filter = append(w.filter, bson.E{Key: "lastEventId", Value: bson.D{{Key: "$ne", Value: ch.EventID}}}, olderThan(ch.Version()))
	set := bson.D{
		{Key: "displayName", Value: ch.DisplayName},
		{Key: "metadata", Value: meta},
		{Key: "sourceUpdatedAt", Value: ts},
		{Key: "lastEventId", Value: ch.EventID},
		{Key: "updatedAt", Value: now},
	}
	set = append(set, w.doc.Profile.set()...)
	if ch.Email != "" {
		w.update = bson.D{{Key: "$set", Value: append(set, bson.E{Key: "email", Value: ch.Email})}, onInsert}
	} else {
		w.update = bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "email", Value: ""}}}, onInsert}
	}
	return w, nil
}

// versionProjection is what Apply reads of a user to decide or explain a
// write.
var versionProjection = bson.D{
	{Key: "userId", Value: 1}, {Key: "deletedAt", Value: 1}, {Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1},
	{Key: "eraseAfter", Value: 1}, {Key: "erasedAt", Value: 1},
}

// version is the version of d's stored state, for models.Decide.
func (d userDoc) version() models.Version {
	return models.Version{SourceTime: d.SourceUpdatedAt, EventID: d.LastEventID, Deleted: d.DeletedAt != nil}
}

// state reads, from the primary, what Apply needs to decide or explain a
// write.
func (u *Users) state(ctx context.Context, id bson.ObjectID) (userDoc, error) {
	var d userDoc
	if err := findByID(ctx, u.primary, id, &d, versionProjection); err != nil {
		return userDoc{}, fmt.Errorf("read user: %w", err)
	}
	return d, nil
}

// userListQuery is the filter and sort of one page of users: in _id order
// (the _id index), or, with an email, the one active user the email index
// finds, with no sort. Active users are neither deleted nor deprovisioned
// (few are: they are read in the index's order and passed over).
func userListQuery(f models.UserFilter) (filter, sort bson.D, err error) {
	return userWindowQuery(f, allKeys)
}

// userWindowQuery is userListQuery within window w of _id (see
// window.go).
func userWindowQuery(f models.UserFilter, w window) (filter, sort bson.D, err error) {
	filter = bson.D{}
	if !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "deletedAt", Value: nil},
			bson.E{Key: "deprovisioned", Value: bson.D{{Key: "$ne", Value: true}}})
	}
	if f.Email != "" {
		filter = append(filter, bson.E{Key: "email", Value: models.NormalizeEmail(f.Email)})
	}
	if filter, err = withIDRange(filter, f.After, w); err != nil {
		return nil, nil, err
	}
	if f.Email == "" {
		sort = idOrder
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
	return listUsers(ctx, collSource[userDoc]{u.coll}, &u.density, f)
}

// listUsers is List, reading src: without an email, a walk of the _id
// space in windows (walkIDs); with one, the one query the email index
// answers.
func listUsers(ctx context.Context, src source[userDoc], d *densities, f models.UserFilter) (models.UserPage, error) {
	filter, sort, err := userListQuery(f)
	if err != nil {
		return models.UserPage{}, err
	}
	want := f.Limit + 1
	var docs []userDoc
	if f.Email == "" {
		docs, err = walkIDs(ctx, src, d, fmt.Sprintf("users:%v", f.IncludeDeleted), f.After, want, func(w window) (bson.D, error) {
			filter, _, err := userWindowQuery(f, w)
			return filter, err
		})
	} else {
		docs, err = src.find(ctx, filter, sort, want)
	}
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list users: %w", err)
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
