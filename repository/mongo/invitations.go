package mongo

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// InvitationsCollection is the collection of organization invitations.
const InvitationsCollection = "invitations"

// Invitations is the invitations collection.
//
// Without transactions, its rules are conditional writes and a read after
// them, as memberships': a state is one conditional upsert by _id (never
// over a tombstone); an organization's deletion is followed by an
// UpdateMany of its invitations into tombstones (cascade), run by every
// delivery of the deletion; a state is followed by a read of its
// organization, so a state written while it was being deleted (after the
// cascade) is made a tombstone by its own Apply.
type Invitations struct {
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write
	orgs    *mongo.Collection // read after a write, from the primary
	density densities
}

// invitationDoc is an invitations document; its _id is derived from its
// invitationId (see docID).
type invitationDoc struct {
	ID              bson.ObjectID `bson:"_id"`
	InvitationID    string        `bson:"invitationId"`
	OrgID           string        `bson:"organizationId"`
	EmailAddress    *string       `bson:"emailAddress"` // null once erased, and on a tombstone
	Role            *string       `bson:"role"`
	RoleName        *string       `bson:"roleName"`
	Status          string        `bson:"status"`
	Metadata        bson.D        `bson:"metadata"`
	UserID          *string       `bson:"userId"`
	ExpiresAt       *time.Time    `bson:"expiresAt"`
	SourceCreatedAt *time.Time    `bson:"sourceCreatedAt"`
	CreatedAt       time.Time     `bson:"createdAt"`
	UpdatedAt       time.Time     `bson:"updatedAt"`
	DeletedAt       *time.Time    `bson:"deletedAt"`
	SourceUpdatedAt time.Time     `bson:"sourceUpdatedAt"`
	LastEventID     string        `bson:"lastEventId"`
	// EraseAfter is when its email and events are due for erasure (it
	// ended, or a pending one expires), absent when not due; ErasedAt
	// when they were erased.
	EraseAfter *time.Time `bson:"eraseAfter,omitempty"`
	ErasedAt   *time.Time `bson:"erasedAt,omitempty"`
}

func (d invitationDoc) pageID() bson.ObjectID { return d.ID }
func (d invitationDoc) changedAt() time.Time  { return d.UpdatedAt }

func (d invitationDoc) model() (models.Invitation, error) {
	meta := []byte("{}")
	if d.Metadata != nil {
		var err error
		if meta, err = docToJSON(d.Metadata); err != nil {
			return models.Invitation{}, fmt.Errorf("invitation %s metadata: %w", d.InvitationID, err)
		}
	}
	return models.Invitation{
		InvitationID: d.InvitationID, OrgID: d.OrgID, EmailAddress: deref(d.EmailAddress), Role: deref(d.Role),
		RoleName: deref(d.RoleName), Status: d.Status, Metadata: meta, UserID: deref(d.UserID),
		ExpiresAt: utc(d.ExpiresAt), SourceCreatedAt: utc(d.SourceCreatedAt), CreatedAt: d.CreatedAt.UTC(),
		UpdatedAt: d.UpdatedAt.UTC(), DeletedAt: utc(d.DeletedAt), SourceUpdatedAt: d.SourceUpdatedAt.UTC(),
		LastEventID: d.LastEventID, ErasedAt: utc(d.ErasedAt),
	}, nil
}

// invitationIndexes are the indexes of invitations; docs/mongodb-queries.md
// says which query uses each. The unique one is built by Prepare, the
// others by EnsureIndexes.
var invitationIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "invitationId", Value: 1}}, Options: options.Index().SetUnique(true)},
	// An organization's invitations in id order; its cascade.
	{Keys: bson.D{{Key: "organizationId", Value: 1}, {Key: "invitationId", Value: 1}}},
	// An organization's invitations of one stored status, in id order.
	{Keys: bson.D{{Key: "organizationId", Value: 1}, {Key: "status", Value: 1}, {Key: "invitationId", Value: 1}}},
	{Keys: bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}},                    // the change feed
	{Keys: bson.D{{Key: "eraseAfter", Value: 1}}, Options: options.Index().SetSparse(true)}, // erasure: due ones
}

var invitationVersionProjection = bson.D{{Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1}, {Key: "deletedAt", Value: 1}}

// invitationTombstone is the update that makes an invitation a tombstone,
// deleted at deletedAt with its organization, its version that of
// eventID at sourceTime, its events due for erasure from deletedAt.
func invitationTombstone(deletedAt, sourceTime time.Time, eventID string, now time.Time) bson.D {
	return bson.D{{Key: "$set", Value: bson.D{
		{Key: "deletedAt", Value: deletedAt.UTC()}, {Key: "eraseAfter", Value: deletedAt.UTC()},
		{Key: "emailAddress", Value: nil}, {Key: "metadata", Value: bson.D{}},
		{Key: "sourceUpdatedAt", Value: sourceTime.UTC()}, {Key: "lastEventId", Value: eventID}, {Key: "updatedAt", Value: now},
	}}}
}

// invitationWrite is the conditional upsert of ch: over an invitation that
// is not a tombstone and whose state is older (and not ch's own event: a
// retry is DecideUnchanged).
func invitationWrite(ch models.InvitationChange, now time.Time) (filter, update bson.D, err error) {
	meta := bson.D{}
	if len(ch.Metadata) > 0 {
		if meta, err = jsonToDoc(ch.Metadata); err != nil {
			return nil, nil, fmt.Errorf("invitation %s metadata: %w: %v", ch.InvitationID, models.ErrInvalid, err)
		}
	}
	filter = bson.D{{Key: "_id", Value: docID(ch.InvitationID)}, {Key: "deletedAt", Value: nil},
		{Key: "lastEventId", Value: bson.D{{Key: "$ne", Value: ch.EventID}}}, olderThan(ch.Version())}
	set := bson.D{
		{Key: "organizationId", Value: ch.OrgID}, {Key: "emailAddress", Value: str(ch.EmailAddress)},
		{Key: "role", Value: str(ch.Role)}, {Key: "roleName", Value: str(ch.RoleName)}, {Key: "status", Value: ch.Status},
		{Key: "metadata", Value: meta}, {Key: "userId", Value: str(ch.UserID)}, {Key: "expiresAt", Value: utc(ch.ExpiresAt)},
		{Key: "sourceCreatedAt", Value: utc(ch.SourceCreatedAt)}, {Key: "sourceUpdatedAt", Value: ch.SourceTime.UTC()},
		{Key: "lastEventId", Value: ch.EventID}, {Key: "updatedAt", Value: now},
	}
	// A new state holds an email again: not erased, due as it says.
	unset := bson.D{{Key: "erasedAt", Value: ""}}
	if due := models.InvitationEraseAfter(ch.Status, ch.SourceTime, ch.ExpiresAt, nil); due != nil {
		set = append(set, bson.E{Key: "eraseAfter", Value: due.UTC()})
	} else {
		unset = append(unset, bson.E{Key: "eraseAfter", Value: ""})
	}
	update = bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: unset},
		{Key: "$setOnInsert", Value: bson.D{{Key: "invitationId", Value: ch.InvitationID}, {Key: "createdAt", Value: now}}}}
	return filter, update, nil
}

// Apply writes ch with one conditional upsert by _id as models.Decide
// says (the stored version explains a write that did not go through),
// then reads its organization: when it is deleted, the invitation is made
// a tombstone and the outcome is deleted. Errors wrap
// models.ErrRetryLater when concurrent writes kept winning,
// models.ErrInvalid for metadata that cannot be stored.
func (iv *Invitations) Apply(ctx context.Context, ch models.InvitationChange, now time.Time) (models.Outcome, error) {
	fail := func(err error) (models.Outcome, error) {
		return "", fmt.Errorf("apply event %s to invitation %s: %w", ch.EventID, ch.InvitationID, err)
	}
	filter, update, err := invitationWrite(ch, now)
	if err != nil {
		return fail(err)
	}
	d, err := iv.write(ctx, ch, filter, update)
	if err != nil {
		return fail(err)
	}
	outcome := d.Outcome()
	var org struct {
		DeletedAt *time.Time `bson:"deletedAt"`
	}
	err = findByID(ctx, iv.orgs, docID(ch.OrgID), &org, bson.D{{Key: "deletedAt", Value: 1}})
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return fail(fmt.Errorf("read organization %s: %w", ch.OrgID, err))
	}
	if org.DeletedAt != nil {
		outcome = models.OutcomeDeleted
		if d.Writes() {
			if _, err := updateOne(ctx, iv.coll, bson.D{{Key: "_id", Value: docID(ch.InvitationID)}, {Key: "deletedAt", Value: nil}},
				invitationTombstone(*org.DeletedAt, ch.SourceTime, ch.EventID, now)); err != nil {
				return fail(fmt.Errorf("delete the invitation of a deleted organization: %w", translate(err)))
			}
		}
	}
	return outcome, nil
}

// write makes the conditional upsert and returns models.Decide's
// decision, read from the stored version when the upsert was refused.
func (iv *Invitations) write(ctx context.Context, ch models.InvitationChange, filter, update bson.D) (models.Decision, error) {
	id := docID(ch.InvitationID)
	for try := 1; try <= maxApplyTries; try++ {
		res, err := updateOne(ctx, iv.coll, filter, update, options.UpdateOne().SetUpsert(true))
		if err == nil {
			if res.UpsertedCount > 0 {
				return models.DecideCreate, nil
			}
			return models.DecideUpdate, nil
		}
		if err = translate(err); !errors.Is(err, errDuplicate) {
			return 0, err
		}
		var cur invitationDoc
		err = findByID(ctx, iv.primary, id, &cur, invitationVersionProjection)
		if errors.Is(err, models.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read the stored state: %w", err)
		}
		v := models.Version{SourceTime: cur.SourceUpdatedAt, EventID: cur.LastEventID, Deleted: cur.DeletedAt != nil}
		if d := models.Decide(&v, ch.Version()); !d.Writes() {
			return d, nil
		}
	}
	return 0, fmt.Errorf("concurrent writes kept winning: %w", models.ErrRetryLater)
}

// cascade makes every invitation of the deleted organization orgID a
// tombstone, deleted at at by the event eventID, through
// organizationId_1_invitationId_1. It is idempotent: a second run finds
// none.
func (iv *Invitations) cascade(ctx context.Context, orgID string, at time.Time, eventID string, now time.Time) error {
	if _, err := updateMany(ctx, iv.coll, invitationCascadeFilter(orgID), invitationTombstone(at, at, eventID, now)); err != nil {
		return fmt.Errorf("delete the invitations of organization %s: %w", orgID, translate(err))
	}
	return nil
}

// Get returns the invitation, deleted or not, or an error wrapping
// models.ErrNotFound (by _id).
func (iv *Invitations) Get(ctx context.Context, invitationID string) (models.Invitation, error) {
	var d invitationDoc
	if err := findByID(ctx, iv.coll, docID(invitationID), &d, nil); err != nil {
		return models.Invitation{}, fmt.Errorf("invitation %s: %w", invitationID, err)
	}
	return d.model()
}

// List returns one page of the invitations of f.OrgID in invitationId
// order after f.After (the last id of the previous page, in hex), as
// f.KeepInvitation selects them: of a stored status pending, accepted or
// revoked, through organizationId_1_status_1_invitationId_1; else (every
// status, the expired ones, tombstones) through
// organizationId_1_invitationId_1.
func (iv *Invitations) List(ctx context.Context, f models.InvitationFilter) (models.InvitationPage, error) {
	start, err := hex.DecodeString(f.After)
	if err != nil {
		return models.InvitationPage{}, models.ErrBadCursor()
	}
	read := func(after string, n int) ([]models.Invitation, error) {
		docs, err := findDocs[invitationDoc](ctx, iv.coll, invitationListFilter(f, after),
			options.Find().SetSort(invitationOrder).SetLimit(int64(n)))
		if err != nil {
			return nil, err
		}
		out := make([]models.Invitation, 0, len(docs))
		for _, d := range docs {
			i, err := d.model()
			if err != nil {
				return nil, err
			}
			out = append(out, i)
		}
		return out, nil
	}
	items, next, err := repository.Page(f.Limit, string(start), read, f.KeepInvitation,
		func(i models.Invitation) string { return i.InvitationID })
	if err != nil {
		return models.InvitationPage{}, fmt.Errorf("list invitations: %w", err)
	}
	page := models.InvitationPage{Invitations: items}
	if next != "" {
		page.NextCursor = hex.EncodeToString([]byte(next))
	}
	return page, nil
}

// invitationOrder is the order of an organization's invitations.
var invitationOrder = bson.D{{Key: "invitationId", Value: 1}}

// invitationListFilter selects the invitations of f's organization after
// the id after: of f's stored status (pending, accepted, revoked: not
// deleted), through organizationId_1_status_1_invitationId_1; else every
// one, through organizationId_1_invitationId_1 (f.KeepInvitation decides
// on the documents).
func invitationListFilter(f models.InvitationFilter, after string) bson.D {
	filter := bson.D{{Key: "organizationId", Value: f.OrgID}}
	if f.Status != "" && f.Status != models.InvitationExpired && !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "status", Value: f.Status}, bson.E{Key: "deletedAt", Value: nil})
	}
	return append(filter, bson.E{Key: "invitationId", Value: bson.D{{Key: "$gt", Value: after}}})
}

// invitationCascadeFilter selects the invitations of orgID that are not
// tombstones, through organizationId_1_invitationId_1.
func invitationCascadeFilter(orgID string) bson.D {
	return bson.D{{Key: "organizationId", Value: orgID}, {Key: "deletedAt", Value: nil}}
}

// Changes returns one page of the invitations' change feed, as
// Users.Changes does for users (changesPage: updatedAt_1__id_1, walked in
// windows), tombstones included.
func (iv *Invitations) Changes(ctx context.Context, f models.ChangeFilter) (models.InvitationPage, error) {
	docs, next, err := changesPage(ctx, collSource[invitationDoc]{iv.coll}, &iv.density, "invitations", f)
	if err != nil {
		return models.InvitationPage{}, err
	}
	page := models.InvitationPage{Invitations: make([]models.Invitation, 0, len(docs)), NextCursor: next}
	for _, d := range docs {
		i, err := d.model()
		if err != nil {
			return models.InvitationPage{}, err
		}
		page.Invitations = append(page.Invitations, i)
	}
	return page, nil
}
