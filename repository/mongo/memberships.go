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
	"github.com/usersync/usersync/repository"
)

// Memberships is the memberships collection.
//
// Without transactions, its rules are conditional writes and reads after
// them:
//   - one active membership per (organization, user): activeKey, present
//     only on an active membership, under a sparse unique index (as users'
//     email); a holder of the pair with an older state is made a tombstone
//     by one conditional write (settlePair), one with a newer state makes
//     the incoming state a tombstone;
//   - the cascades: a deletion of an organization or a user is followed by
//     an UpdateMany of their active memberships into tombstones (cascade),
//     run by every delivery of the deletion, so a crash between the two is
//     healed by the next delivery or the sweep; a membership state is
//     followed by a read of its organization and user, so a state written
//     while they were being deleted (after the cascade read the
//     memberships) is made a tombstone by its own Apply;
//   - reads join each membership to its user and organization and show as
//     active only what models.ActiveMember says, so an application never
//     sees an active membership of a deleted organization or user, even
//     between a deletion and its cascade.
type Memberships struct {
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write
	users   *mongo.Collection // joined by reads, and read after a write
	orgs    *Organizations
	// walkBatch is the batch size of WalkActive's cursor.
	walkBatch int
	// density sizes the windows of the memberships' pages (pages.go).
	density densities
}

// membershipDoc is a memberships document; its _id is derived from its
// membershipId (see docID).
type membershipDoc struct {
	ID           bson.ObjectID `bson:"_id"`
	MembershipID string        `bson:"membershipId"`
	OrgID        string        `bson:"organizationId,omitempty"`
	UserID       string        `bson:"userId,omitempty"`
	// ActiveKey is organizationId/userId while the membership is active,
	// and absent on a tombstone: the sparse unique activeKey index keeps
	// one active membership per pair on every engine, with no partial
	// index.
	ActiveKey       string        `bson:"activeKey,omitempty"`
	Role            *string       `bson:"role"`
	RoleName        *string       `bson:"roleName"`
	Permissions     []string      `bson:"permissions"`
	Metadata        bson.D        `bson:"metadata"`
	PublicUserData  publicUserDoc `bson:"publicUserData"`
	SourceCreatedAt *time.Time    `bson:"sourceCreatedAt"`
	CreatedAt       time.Time     `bson:"createdAt"`
	UpdatedAt       time.Time     `bson:"updatedAt"`
	DeletedAt       *time.Time    `bson:"deletedAt"`
	SourceUpdatedAt time.Time     `bson:"sourceUpdatedAt"`
	LastEventID     string        `bson:"lastEventId"`
}

// publicUserDoc is a membership's public_user_data: shown when usersync
// does not have the user; null on a tombstone.
type publicUserDoc struct {
	FirstName     *string `bson:"firstName"`
	LastName      *string `bson:"lastName"`
	ImageURL      *string `bson:"imageUrl"`
	Identifier    *string `bson:"identifier"`
	Username      *string `bson:"username"`
	Banned        bool    `bson:"banned"`
	Deprovisioned bool    `bson:"deprovisioned"`
}

func newPublicUserDoc(m models.Member) publicUserDoc {
	return publicUserDoc{
		FirstName: str(m.FirstName), LastName: str(m.LastName), ImageURL: str(m.ImageURL),
		Identifier: str(m.Identifier), Username: str(m.Username), Banned: m.Banned, Deprovisioned: m.Deprovisioned,
	}
}

func (d membershipDoc) model() (models.Membership, error) {
	meta := []byte("{}")
	if d.Metadata != nil {
		var err error
		if meta, err = docToJSON(d.Metadata); err != nil {
			return models.Membership{}, fmt.Errorf("membership %s metadata: %w", d.MembershipID, err)
		}
	}
	perms := d.Permissions
	if perms == nil {
		perms = []string{}
	}
	p := d.PublicUserData
	return models.Membership{
		MembershipID: d.MembershipID, OrgID: d.OrgID, UserID: d.UserID, Role: deref(d.Role), RoleName: deref(d.RoleName),
		Permissions: perms, Metadata: meta,
		Member: models.Member{
			FirstName: deref(p.FirstName), LastName: deref(p.LastName), ImageURL: deref(p.ImageURL),
			Identifier: deref(p.Identifier), Username: deref(p.Username), Banned: p.Banned, Deprovisioned: p.Deprovisioned,
		},
		SourceCreatedAt: utc(d.SourceCreatedAt), CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
		DeletedAt: utc(d.DeletedAt), SourceUpdatedAt: d.SourceUpdatedAt.UTC(), LastEventID: d.LastEventID,
	}, nil
}

func (d membershipDoc) version() models.Version {
	return models.Version{SourceTime: d.SourceUpdatedAt, EventID: d.LastEventID, Deleted: d.DeletedAt != nil}
}

// activeKeyIndex names the sparse unique activeKey index, which unique
// violations name.
const activeKeyIndex = "activeKey_1"

// activeKey is the pair key of an active membership.
func activeKey(orgID, userID string) string { return orgID + "/" + userID }

// membershipIndexes are the indexes of memberships; docs/organizations.md's
// query → index table says which query uses each. The unique ones are
// built by Prepare, the others by EnsureIndexes.
var membershipIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "membershipId", Value: 1}}, Options: options.Index().SetUnique(true)},
	{Keys: bson.D{{Key: "activeKey", Value: 1}}, Options: options.Index().SetUnique(true).SetSparse(true)},
	{Keys: bson.D{{Key: "organizationId", Value: 1}, {Key: "_id", Value: 1}}},               // an organization's memberships; its cascade
	{Keys: bson.D{{Key: "userId", Value: 1}, {Key: "_id", Value: 1}}},                       // a user's memberships; its cascade
	{Keys: bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},                    // the change feed
	{Keys: bson.D{{Key: "eraseAfter", Value: 1}}, Options: options.Index().SetSparse(true)}, // erasure: tombstones still to erase
}

var membershipVersionProjection = bson.D{
	{Key: "membershipId", Value: 1}, {Key: "deletedAt", Value: 1}, {Key: "sourceUpdatedAt", Value: 1},
	{Key: "lastEventId", Value: 1}, {Key: "activeKey", Value: 1},
}

// tombstoneSet is the $set that makes a membership a tombstone, deleted
// at deletedAt, its version (sourceUpdatedAt, lastEventId) that of the
// event that deleted it, and its events due for erasure from deletedAt
// (eraseAfter, see erase.go): they hold the member's public_user_data.
func tombstoneSet(deletedAt, sourceTime time.Time, eventID string, now time.Time) bson.D {
	return bson.D{
		{Key: "deletedAt", Value: deletedAt.UTC()}, {Key: "eraseAfter", Value: deletedAt.UTC()},
		{Key: "role", Value: nil}, {Key: "roleName", Value: nil},
		{Key: "permissions", Value: bson.A{}}, {Key: "metadata", Value: bson.D{}}, {Key: "publicUserData", Value: publicUserDoc{}},
		{Key: "sourceUpdatedAt", Value: sourceTime.UTC()}, {Key: "lastEventId", Value: eventID}, {Key: "updatedAt", Value: now},
	}
}

// tombstoneUpdate is the update that makes a membership a tombstone.
func tombstoneUpdate(deletedAt, sourceTime time.Time, eventID string, now time.Time) bson.D {
	return bson.D{
		{Key: "$set", Value: tombstoneSet(deletedAt, sourceTime, eventID, now)},
		{Key: "$unset", Value: bson.D{{Key: "activeKey", Value: ""}}},
	}
}

// cascadeFilter selects the active memberships of an organization or a
// user (by is organizationId or userId), through their index.
func cascadeFilter(by bson.E) bson.D { return bson.D{by, {Key: "deletedAt", Value: nil}} }

// cascade makes the active memberships of an organization or a user (by)
// tombstones, deleted at at by the event eventID. It is idempotent: a
// second run finds none.
func (m *Memberships) cascade(ctx context.Context, by bson.E, at time.Time, eventID string, now time.Time) error {
	if _, err := updateMany(ctx, m.coll, cascadeFilter(by), tombstoneUpdate(at, at, eventID, now)); err != nil {
		return fmt.Errorf("delete the memberships of %s %v: %w", by.Key, by.Value, translate(err))
	}
	return nil
}

// membershipWrite is a state of a membership as the conditional upsert
// of Apply.
type membershipWrite struct {
	id     bson.ObjectID
	v      models.Version // the state written
	key    string         // activeKey written; "" for a tombstone
	filter bson.D
	update bson.D
}

// newMembershipWrite is the write of ch (a tombstone deleted at ch's time
// for a deletion).
func newMembershipWrite(ch models.MembershipChange, now time.Time) (membershipWrite, error) {
	if ch.Deleted {
		return newTombstoneWrite(ch, ch.SourceTime, now), nil
	}
	meta := bson.D{}
	if len(ch.Metadata) > 0 {
		var err error
		if meta, err = jsonToDoc(ch.Metadata); err != nil {
			return membershipWrite{}, fmt.Errorf("membership %s metadata: %w: %v", ch.MembershipID, models.ErrInvalid, err)
		}
	}
	perms := ch.Permissions
	if perms == nil {
		perms = []string{}
	}
	w := membershipWrite{id: docID(ch.MembershipID), v: ch.Version(), key: activeKey(ch.OrgID, ch.UserID)}
	// Not this very event (DecideUnchanged: a retry), and older.
	w.filter = bson.D{{Key: "_id", Value: w.id}, {Key: "deletedAt", Value: nil},
		{Key: "lastEventId", Value: bson.D{{Key: "$ne", Value: ch.EventID}}}, olderThan(w.v)}
	w.update = bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "organizationId", Value: ch.OrgID}, {Key: "userId", Value: ch.UserID}, {Key: "activeKey", Value: w.key},
			{Key: "role", Value: str(ch.Role)}, {Key: "roleName", Value: str(ch.RoleName)}, {Key: "permissions", Value: perms},
			{Key: "metadata", Value: meta}, {Key: "publicUserData", Value: newPublicUserDoc(ch.Member)},
			{Key: "sourceCreatedAt", Value: utc(ch.SourceCreatedAt)}, {Key: "sourceUpdatedAt", Value: ch.SourceTime.UTC()},
			{Key: "lastEventId", Value: ch.EventID}, {Key: "updatedAt", Value: now},
		}},
		{Key: "$setOnInsert", Value: bson.D{{Key: "membershipId", Value: ch.MembershipID}, {Key: "createdAt", Value: now}}},
	}
	return w, nil
}

// newTombstoneWrite is the write of ch's membership as a tombstone deleted
// at deletedAt: a deletion, or a state that lost its pair to a newer
// membership. It matches any active state (a deletion wins over every
// one).
func newTombstoneWrite(ch models.MembershipChange, deletedAt, now time.Time) membershipWrite {
	v := ch.Version()
	v.Deleted = true
	w := membershipWrite{id: docID(ch.MembershipID), v: v}
	w.filter = bson.D{{Key: "_id", Value: w.id}, {Key: "deletedAt", Value: nil}}
	onInsert := bson.D{{Key: "membershipId", Value: ch.MembershipID}, {Key: "createdAt", Value: now}}
	// A deletion names its organization and user when Clerk sends them;
	// an existing membership keeps its own.
	if ch.OrgID != "" {
		onInsert = append(onInsert, bson.E{Key: "organizationId", Value: ch.OrgID})
	}
	if ch.UserID != "" {
		onInsert = append(onInsert, bson.E{Key: "userId", Value: ch.UserID})
	}
	w.update = append(tombstoneUpdate(deletedAt, ch.SourceTime, ch.EventID, now), bson.E{Key: "$setOnInsert", Value: onInsert})
	return w
}

// Reasons for Apply to write again, besides errLostRace.
var errPairHeld = errors.New("the organization and user are held by another active membership")

// maxMembershipTries bounds the writes of one Apply: more than a user's,
// since several memberships of one pair may race to hold it.
const maxMembershipTries = 2 * maxApplyTries

// Apply applies the organization state ch nests (as Organizations.Apply
// does), then ch to its membership with one conditional upsert by _id,
// as models.Decide says (the stored state explains a write that did not
// go through). A pair held by another active membership is settled by
// settlePair. Then the membership's organization and user are read: when
// either is deleted, the membership is made a tombstone (and the outcome
// is deleted). Errors wrap models.ErrRetryLater when concurrent writes
// kept winning, models.ErrInvalid for metadata that cannot be stored.
func (m *Memberships) Apply(ctx context.Context, ch models.MembershipChange, now time.Time) (models.Outcome, error) {
	fail := func(err error) (models.Outcome, error) {
		return "", fmt.Errorf("apply event %s to membership %s: %w", ch.EventID, ch.MembershipID, err)
	}
	if ch.Organization != nil {
		if _, err := m.orgs.apply(ctx, *ch.Organization, now); err != nil {
			return fail(err)
		}
	}
	w, err := newMembershipWrite(ch, now)
	if err != nil {
		return fail(err)
	}
	lostPair := false
	var d models.Decision
	for try := 1; ; try++ {
		if try > maxMembershipTries {
			return fail(fmt.Errorf("concurrent writes to the membership kept winning: %w", models.ErrRetryLater))
		}
		d, err = m.write(ctx, w)
		if errors.Is(err, errLostRace) {
			continue
		}
		if errors.Is(err, errPairHeld) {
			var heldAt *time.Time
			if heldAt, err = m.settlePair(ctx, ch, now); err != nil {
				return fail(err)
			}
			if heldAt != nil {
				// ch's membership was left before the holder was made.
				lostPair, w = true, newTombstoneWrite(ch, *heldAt, now)
			}
			continue
		}
		if err != nil {
			return fail(err)
		}
		break
	}
	outcome := d.Outcome()
	if lostPair {
		outcome = models.OutcomeDeleted
	}
	// Read after the write: a deletion of the organization or the user
	// whose cascade ran before this write is seen here.
	gone, err := m.parentDeletedAt(ctx, ch.OrgID, ch.UserID)
	if err != nil {
		return fail(err)
	}
	if gone != nil {
		outcome = models.OutcomeDeleted
		if _, err := updateOne(ctx, m.coll, bson.D{{Key: "_id", Value: w.id}, {Key: "deletedAt", Value: nil}},
			tombstoneUpdate(*gone, ch.SourceTime, ch.EventID, now)); err != nil {
			return fail(fmt.Errorf("delete the membership of a deleted organization or user: %w", translate(err)))
		}
	}
	return outcome, nil
}

// write makes the conditional upsert of w once and returns the decision;
// errPairHeld when the activeKey index refused it, errLostRace when a
// concurrent write changed the membership between the write and the read
// that explains it.
func (m *Memberships) write(ctx context.Context, w membershipWrite) (models.Decision, error) {
	res, err := updateOne(ctx, m.coll, w.filter, w.update, options.UpdateOne().SetUpsert(true))
	if err == nil {
		if res.UpsertedCount > 0 {
			return models.DecideCreate, nil
		}
		return models.DecideUpdate, nil
	}
	if err = translate(err); !errors.Is(err, errDuplicate) {
		return 0, err
	}
	if conflictIndex(err) == activeKeyIndex {
		return 0, errPairHeld
	}
	// A duplicate key the engine did not name: by _id (the membership
	// exists in a state the filter rejects) or by activeKey. The stored
	// state tells which.
	var cur membershipDoc
	err = findByID(ctx, m.primary, w.id, &cur, membershipVersionProjection)
	switch {
	case errors.Is(err, models.ErrNotFound) && w.key != "":
		return 0, errPairHeld
	case errors.Is(err, models.ErrNotFound):
		return 0, errLostRace
	case err != nil:
		return 0, fmt.Errorf("read membership: %w", err)
	}
	d := models.Decide(new(cur.version()), w.v)
	switch {
	case !d.Writes():
		return d, nil
	case w.key != "" && cur.ActiveKey != w.key:
		return 0, errPairHeld
	}
	return 0, errLostRace
}

// takePairFilter selects the other active membership of ch's pair whose
// state is older than ch, through the activeKey index.
func takePairFilter(ch models.MembershipChange) bson.D {
	return bson.D{
		{Key: "activeKey", Value: activeKey(ch.OrgID, ch.UserID)},
		{Key: "membershipId", Value: bson.D{{Key: "$ne", Value: ch.MembershipID}}},
		olderThan(ch.Version()),
	}
}

// settlePair settles a pair that another active membership holds against
// ch, as the embedded store does in one transaction: Clerk has one
// membership per (organization, user) at a time, so of two the older was
// left before the newer was made. A holder older than ch becomes a
// tombstone (one conditional write, whose filter checks its version);
// when the holder is newer, heldAt is its time and ch's membership is to
// be written as a tombstone. In every other case (no holder any more, or
// another one) Apply writes again.
func (m *Memberships) settlePair(ctx context.Context, ch models.MembershipChange, now time.Time) (heldAt *time.Time, err error) {
	res, err := updateOne(ctx, m.primary, takePairFilter(ch), tombstoneUpdate(ch.SourceTime, ch.SourceTime, ch.EventID, now))
	if err != nil {
		return nil, fmt.Errorf("delete the older membership of the pair: %w", translate(err))
	}
	if res.MatchedCount > 0 {
		return nil, nil
	}
	var holder membershipDoc
	err = m.primary.FindOne(ctx, bson.D{{Key: "activeKey", Value: activeKey(ch.OrgID, ch.UserID)}},
		options.FindOne().SetProjection(membershipVersionProjection)).Decode(&holder)
	if err = translate(err); errors.Is(err, models.ErrNotFound) {
		return nil, nil // left meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("read the holder of the pair: %w", err)
	}
	if holder.MembershipID == ch.MembershipID || models.Newer(ch.SourceTime, ch.EventID, holder.SourceUpdatedAt, holder.LastEventID) {
		return nil, nil
	}
	at := holder.SourceUpdatedAt.UTC()
	return &at, nil
}

// parentDeletedAt returns when the organization orgID or the user userID
// was deleted (the earlier), or nil when neither is a tombstone. It reads
// from the primary: it decides a write.
func (m *Memberships) parentDeletedAt(ctx context.Context, orgID, userID string) (*time.Time, error) {
	var gone *time.Time
	for _, p := range []struct {
		coll *mongo.Collection
		id   string
	}{{m.orgs.primary, orgID}, {m.users, userID}} {
		if p.id == "" {
			continue
		}
		var d struct {
			DeletedAt *time.Time `bson:"deletedAt"`
		}
		err := findByID(ctx, p.coll, docID(p.id), &d, bson.D{{Key: "deletedAt", Value: 1}})
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return nil, fmt.Errorf("read %s %s: %w", p.coll.Name(), p.id, err)
		}
		if d.DeletedAt != nil && (gone == nil || d.DeletedAt.Before(*gone)) {
			gone = utc(d.DeletedAt)
		}
	}
	return gone, nil
}

// joinedDoc is a membership as read, with what its joins found.
type joinedDoc struct {
	id                      bson.ObjectID
	m                       models.Membership
	orgDeleted, userDeleted bool
}

// join reads the users and organizations of docs (one query each, by
// _id) and returns each membership with its member from its user's
// current record (models.MemberOf) when the user is known and active, and
// its organization's summary.
func (m *Memberships) join(ctx context.Context, docs []membershipDoc) ([]joinedDoc, error) {
	userIDs, orgIDs := bson.A{}, bson.A{}
	for _, d := range docs {
		if d.UserID != "" {
			userIDs = append(userIDs, docID(d.UserID))
		}
		if d.OrgID != "" {
			orgIDs = append(orgIDs, docID(d.OrgID))
		}
	}
	users := map[string]userDoc{}
	if len(userIDs) > 0 {
		cur, err := m.users.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: userIDs}}}})
		if err != nil {
			return nil, fmt.Errorf("read members: %w", translate(err))
		}
		var uds []userDoc
		if err := cur.All(ctx, &uds); err != nil {
			return nil, fmt.Errorf("read members: %w", translate(err))
		}
		for _, u := range uds {
			users[u.UserID] = u
		}
	}
	orgs := map[string]orgDoc{}
	if len(orgIDs) > 0 {
		ods, err := findDocs[orgDoc](ctx, m.orgs.coll, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: orgIDs}}}},
			options.Find().SetProjection(bson.D{{Key: "organizationId", Value: 1}, {Key: "name", Value: 1},
				{Key: "slug", Value: 1}, {Key: "imageUrl", Value: 1}, {Key: "deletedAt", Value: 1}}))
		if err != nil {
			return nil, fmt.Errorf("read organizations of memberships: %w", err)
		}
		for _, o := range ods {
			orgs[o.OrgID] = o
		}
	}
	out := make([]joinedDoc, 0, len(docs))
	for _, d := range docs {
		mm, err := d.model()
		if err != nil {
			return nil, err
		}
		j := joinedDoc{id: d.ID}
		if u, ok := users[d.UserID]; ok {
			j.userDeleted = u.DeletedAt != nil
			if !j.userDeleted && !mm.Deleted() {
				um, err := u.model()
				if err != nil {
					return nil, err
				}
				mm.Member, mm.MemberFromUser = models.MemberOf(um), true
			}
		}
		if o, ok := orgs[d.OrgID]; ok {
			j.orgDeleted = o.DeletedAt != nil
			if !j.orgDeleted {
				mm.Organization = &models.OrganizationSummary{OrgID: o.OrgID, Name: deref(o.Name), Slug: deref(o.Slug), ImageURL: deref(o.ImageURL)}
			}
		}
		j.m = mm
		out = append(out, j)
	}
	return out, nil
}

// Get returns the membership with membershipID, deleted or not, or an
// error wrapping models.ErrNotFound.
func (m *Memberships) Get(ctx context.Context, membershipID string) (models.Membership, error) {
	var d membershipDoc
	if err := findByID(ctx, m.coll, docID(membershipID), &d, nil); err != nil {
		return models.Membership{}, fmt.Errorf("membership %s: %w", membershipID, err)
	}
	js, err := m.join(ctx, []membershipDoc{d})
	if err != nil {
		return models.Membership{}, err
	}
	return js[0].m, nil
}

// membershipListFilter is the filter of a page of the memberships of an
// organization or a user after the cursor after (an _id in hex), read in
// _id order through organizationId_1__id_1 or userId_1__id_1.
func membershipListFilter(f models.MembershipFilter, after string) (bson.D, error) {
	return membershipWindowFilter(f, after, allKeys)
}

// membershipWindowFilter is membershipListFilter within window w of _id
// (see window.go).
func membershipWindowFilter(f models.MembershipFilter, after string, w window) (bson.D, error) {
	filter := bson.D{{Key: "organizationId", Value: f.OrgID}}
	if f.OrgID == "" {
		filter = bson.D{{Key: "userId", Value: f.UserID}}
	}
	if !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "deletedAt", Value: nil})
	}
	return withIDRange(filter, after, w)
}

// membershipDocs returns the first n memberships of f's organization or
// user after the cursor after, in _id order, walking the _id range of
// organizationId_1__id_1 or userId_1__id_1 in windows (walkIDs). The
// organizations' walks share one density, the users' another.
func membershipDocs(ctx context.Context, src source[membershipDoc], d *densities, f models.MembershipFilter, after string, n int) ([]membershipDoc, error) {
	kind := fmt.Sprintf("organization:%v", f.IncludeDeleted)
	if f.OrgID == "" {
		kind = fmt.Sprintf("user:%v", f.IncludeDeleted)
	}
	return walkIDs(ctx, src, d, kind, after, n, func(w window) (bson.D, error) {
		return membershipWindowFilter(f, after, w)
	})
}

// List returns one page of the memberships of f.OrgID or f.UserID in _id
// order after f.After: those models.ActiveMember counts as active, or all
// with f.IncludeDeleted.
func (m *Memberships) List(ctx context.Context, f models.MembershipFilter) (models.MembershipPage, error) {
	if _, err := membershipListFilter(f, f.After); err != nil {
		return models.MembershipPage{}, err
	}
	read := func(after string, n int) ([]joinedDoc, error) {
		docs, err := membershipDocs(ctx, collSource[membershipDoc]{m.coll}, &m.density, f, after, n)
		if err != nil {
			return nil, err
		}
		return m.join(ctx, docs)
	}
	keep := func(j joinedDoc) bool {
		return f.IncludeDeleted || models.ActiveMember(j.m, j.orgDeleted, j.userDeleted)
	}
	items, next, err := repository.Page(f.Limit, f.After, read, keep, func(j joinedDoc) string { return j.id.Hex() })
	if err != nil {
		return models.MembershipPage{}, fmt.Errorf("list memberships: %w", err)
	}
	page := models.MembershipPage{Memberships: make([]models.Membership, 0, len(items)), NextCursor: next}
	for _, j := range items {
		if f.UserID == "" {
			j.m.Organization = nil // the organization asked for
		}
		page.Memberships = append(page.Memberships, j.m)
	}
	return page, nil
}

// Changes returns one page of the memberships' change feed, as
// Users.Changes does for users (changesPage: updatedAt_1__id_1, walked in
// windows), tombstones included.
func (m *Memberships) Changes(ctx context.Context, f models.ChangeFilter) (models.MembershipPage, error) {
	docs, next, err := changesPage(ctx, collSource[membershipDoc]{m.coll}, &m.density, "memberships", f)
	if err != nil {
		return models.MembershipPage{}, err
	}
	js, err := m.join(ctx, docs)
	if err != nil {
		return models.MembershipPage{}, err
	}
	page := models.MembershipPage{Memberships: make([]models.Membership, 0, len(js)), NextCursor: next}
	for _, j := range js {
		page.Memberships = append(page.Memberships, j.m)
	}
	return page, nil
}
