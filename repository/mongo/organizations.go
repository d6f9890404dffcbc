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

// Organizations is the organizations collection.
type Organizations struct {
	coll    *mongo.Collection
	primary *mongo.Collection // reads that decide a write
	members *Memberships      // a deletion's cascade
	invites *Invitations      // likewise
	// density sizes the windows of the organizations' pages (pages.go).
	density densities
	// walkBatch is the batch size of WalkActive's cursor.
	walkBatch int
}

// orgDoc is an organizations document. Its _id is derived from its
// organizationId (see docID), so that every read and write of one
// organization is by _id. A tombstone keeps the ids and times; every other
// field is null.
type orgDoc struct {
	ID                    bson.ObjectID `bson:"_id"`
	OrgID                 string        `bson:"organizationId"`
	Name                  *string       `bson:"name"`
	Slug                  *string       `bson:"slug"`
	ImageURL              *string       `bson:"imageUrl"`
	Metadata              bson.D        `bson:"metadata"`
	MembersCount          *int64        `bson:"membersCount"`
	MaxAllowedMemberships *int64        `bson:"maxAllowedMemberships"`
	CreatedBy             *string       `bson:"createdBy"`
	SourceCreatedAt       *time.Time    `bson:"sourceCreatedAt"`
	CreatedAt             time.Time     `bson:"createdAt"`
	UpdatedAt             time.Time     `bson:"updatedAt"`
	DeletedAt             *time.Time    `bson:"deletedAt"`
	SourceUpdatedAt       time.Time     `bson:"sourceUpdatedAt"`
	LastEventID           string        `bson:"lastEventId"`
}

func (d orgDoc) model() (models.Organization, error) {
	meta := []byte("{}")
	if d.Metadata != nil {
		var err error
		if meta, err = docToJSON(d.Metadata); err != nil {
			return models.Organization{}, fmt.Errorf("organization %s metadata: %w", d.OrgID, err)
		}
	}
	return models.Organization{
		OrgID: d.OrgID,
		OrganizationProfile: models.OrganizationProfile{
			Name: deref(d.Name), Slug: deref(d.Slug), ImageURL: deref(d.ImageURL), MembersCount: d.MembersCount,
			MaxAllowedMemberships: d.MaxAllowedMemberships, CreatedBy: deref(d.CreatedBy), SourceCreatedAt: utc(d.SourceCreatedAt),
		},
		Metadata: meta, CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(), DeletedAt: utc(d.DeletedAt),
		SourceUpdatedAt: d.SourceUpdatedAt.UTC(), LastEventID: d.LastEventID,
	}, nil
}

func (d orgDoc) version() models.Version {
	return models.Version{SourceTime: d.SourceUpdatedAt, EventID: d.LastEventID, Deleted: d.DeletedAt != nil}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orgIndexes are the indexes of organizations; docs/organizations.md's
// query → index table says which query uses each. The unique one is built
// by Prepare, the others by EnsureIndexes.
var orgIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "organizationId", Value: 1}}, Options: options.Index().SetUnique(true)},
	{Keys: bson.D{{Key: "slug", Value: 1}, {Key: "_id", Value: 1}}},      // the slug filter
	{Keys: bson.D{{Key: "updatedAt", Value: 1}, {Key: "_id", Value: 1}}}, // the change feed
}

// orgVersionProjection is what Apply reads of an organization to explain
// a write that did not go through.
var orgVersionProjection = bson.D{
	{Key: "organizationId", Value: 1}, {Key: "deletedAt", Value: 1}, {Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1},
}

// Apply writes ch to its organization if models.Decide says so, with one
// conditional upsert by _id (explained, when it does not go through, by
// the stored state), and with a deletion deletes the organization's active
// memberships (see Memberships.cascade). It returns the outcome; errors
// wrap models.ErrRetryLater when concurrent writes kept winning,
// models.ErrInvalid for metadata that cannot be stored.
func (o *Organizations) Apply(ctx context.Context, ch models.OrganizationChange, now time.Time) (models.Outcome, error) {
	d, err := o.apply(ctx, ch, now)
	if err != nil {
		return "", fmt.Errorf("apply event %s to organization %s: %w", ch.EventID, ch.OrgID, err)
	}
	return d.Outcome(), nil
}

// apply is Apply, returning the decision: for Apply, and for the
// organization state a membership event nests.
func (o *Organizations) apply(ctx context.Context, ch models.OrganizationChange, now time.Time) (models.Decision, error) {
	filter, update, err := orgWrite(ch, now)
	if err != nil {
		return 0, err
	}
	var d models.Decision
	for try := 1; ; try++ {
		if try > maxApplyTries {
			return 0, fmt.Errorf("concurrent writes to the organization kept winning: %w", models.ErrRetryLater)
		}
		res, err := updateOne(ctx, o.coll, filter, update, options.UpdateOne().SetUpsert(true))
		if err == nil {
			d = models.DecideUpdate
			if res.UpsertedCount > 0 {
				d = models.DecideCreate
			}
			break
		}
		if err = translate(err); !errors.Is(err, errDuplicate) {
			return 0, err
		}
		// The upsert's insert was refused by _id: the organization exists in
		// a state the filter rejects, which says why.
		var cur orgDoc
		err = findByID(ctx, o.primary, docID(ch.OrgID), &cur, orgVersionProjection)
		if errors.Is(err, models.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read organization: %w", err)
		}
		if d = models.Decide(new(cur.version()), ch.Version()); !d.Writes() {
			break
		}
		// Changed between the write and the read: write again.
	}
	if ch.Deleted {
		// Every time, so that a crash between the two writes is healed by
		// the next delivery of the deletion (or the sweep).
		if err := o.members.cascade(ctx, bson.E{Key: "organizationId", Value: ch.OrgID}, ch.SourceTime, ch.EventID, now); err != nil {
			return 0, err
		}
		if err := o.invites.cascade(ctx, ch.OrgID, ch.SourceTime, ch.EventID, now); err != nil {
			return 0, err
		}
	}
	return d, nil
}

// orgWrite is the conditional upsert of ch: models.Decide's DecideUpdate
// (an active organization whose state is older, or any active one for a
// deletion) as the filter; the organization as ch says as the update.
func orgWrite(ch models.OrganizationChange, now time.Time) (filter, update bson.D, err error) {
	ts := ch.SourceTime.UTC()
	filter = bson.D{{Key: "_id", Value: docID(ch.OrgID)}, {Key: "deletedAt", Value: nil}}
	onInsert := bson.E{Key: "$setOnInsert", Value: bson.D{
		{Key: "organizationId", Value: ch.OrgID},
		{Key: "createdAt", Value: now},
	}}
	set := bson.D{
		{Key: "sourceUpdatedAt", Value: ts},
		{Key: "lastEventId", Value: ch.EventID},
		{Key: "updatedAt", Value: now},
	}
	if ch.Deleted {
		set = append(set, bson.D{
			{Key: "deletedAt", Value: ts}, {Key: "name", Value: nil}, {Key: "slug", Value: nil}, {Key: "imageUrl", Value: nil},
			{Key: "metadata", Value: bson.D{}}, {Key: "membersCount", Value: nil}, {Key: "maxAllowedMemberships", Value: nil},
			{Key: "createdBy", Value: nil}, {Key: "sourceCreatedAt", Value: nil},
		}...)
		return filter, bson.D{{Key: "$set", Value: set}, onInsert}, nil
	}
	meta := bson.D{}
	if len(ch.Metadata) > 0 {
		if meta, err = jsonToDoc(ch.Metadata); err != nil {
			return nil, nil, fmt.Errorf("organization %s metadata: %w: %v", ch.OrgID, models.ErrInvalid, err)
		}
	}
	p := ch.OrganizationProfile
	set = append(set, bson.D{
		{Key: "name", Value: str(p.Name)}, {Key: "slug", Value: str(p.Slug)}, {Key: "imageUrl", Value: str(p.ImageURL)},
		{Key: "metadata", Value: meta}, {Key: "membersCount", Value: p.MembersCount},
		{Key: "maxAllowedMemberships", Value: p.MaxAllowedMemberships}, {Key: "createdBy", Value: str(p.CreatedBy)},
		{Key: "sourceCreatedAt", Value: utc(p.SourceCreatedAt)},
	}...)
	// Not this very event (DecideUnchanged: a retry), and older.
	filter = append(filter, bson.E{Key: "lastEventId", Value: bson.D{{Key: "$ne", Value: ch.EventID}}}, olderThan(ch.Version()))
	return filter, bson.D{{Key: "$set", Value: set}, onInsert}, nil
}

// Get returns the organization with orgID, deleted or not, or an error
// wrapping models.ErrNotFound.
func (o *Organizations) Get(ctx context.Context, orgID string) (models.Organization, error) {
	var d orgDoc
	if err := findByID(ctx, o.coll, docID(orgID), &d, nil); err != nil {
		return models.Organization{}, fmt.Errorf("organization %s: %w", orgID, err)
	}
	return d.model()
}

// orgListQuery is the filter and sort of one page of organizations, in _id
// order: the _id index, or with a slug the slug_1__id_1 index.
func orgListQuery(f models.OrganizationFilter) (filter, sort bson.D, err error) {
	filter, err = orgWindowFilter(f, allKeys)
	return filter, idOrder, err
}

// orgWindowFilter is the filter of orgListQuery within window w of _id
// (see window.go).
func orgWindowFilter(f models.OrganizationFilter, w window) (bson.D, error) {
	filter := bson.D{}
	if f.Slug != "" {
		filter = append(filter, bson.E{Key: "slug", Value: f.Slug})
	}
	if !f.IncludeDeleted {
		filter = append(filter, bson.E{Key: "deletedAt", Value: nil})
	}
	return withIDRange(filter, f.After, w)
}

// List returns one page of organizations in _id order (derived from the
// organization id: an order that means nothing else) after f.After. A
// malformed cursor wraps models.ErrInvalid.
func (o *Organizations) List(ctx context.Context, f models.OrganizationFilter) (models.OrganizationPage, error) {
	return listOrgs(ctx, collSource[orgDoc]{o.coll}, &o.density, f)
}

// listOrgs is List, reading src: without a slug, a walk of the _id space
// in windows (walkIDs); with one, the one query of the slug's few
// organizations (one active organization holds a slug; a tombstone none).
func listOrgs(ctx context.Context, src source[orgDoc], d *densities, f models.OrganizationFilter) (models.OrganizationPage, error) {
	filter, sort, err := orgListQuery(f)
	if err != nil {
		return models.OrganizationPage{}, err
	}
	want := f.Limit + 1
	var docs []orgDoc
	if f.Slug == "" {
		docs, err = walkIDs(ctx, src, d, fmt.Sprintf("organizations:%v", f.IncludeDeleted), f.After, want, func(w window) (bson.D, error) {
			return orgWindowFilter(f, w)
		})
	} else {
		docs, err = src.find(ctx, filter, sort, want)
	}
	if err != nil {
		return models.OrganizationPage{}, fmt.Errorf("list organizations: %w", err)
	}
	var page models.OrganizationPage
	if len(docs) > f.Limit {
		docs = docs[:f.Limit]
		page.NextCursor = docs[len(docs)-1].ID.Hex()
	}
	page.Organizations, err = orgModels(docs)
	return page, err
}

func orgModels(docs []orgDoc) ([]models.Organization, error) {
	out := make([]models.Organization, 0, len(docs))
	for _, d := range docs {
		m, err := d.model()
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Changes returns one page of the organizations' change feed, as
// Users.Changes does for users (changesPage: updatedAt_1__id_1, walked in
// windows).
func (o *Organizations) Changes(ctx context.Context, f models.ChangeFilter) (models.OrganizationPage, error) {
	docs, next, err := changesPage(ctx, collSource[orgDoc]{o.coll}, &o.density, "organizations", f)
	if err != nil {
		return models.OrganizationPage{}, err
	}
	orgs, err := orgModels(docs)
	return models.OrganizationPage{Organizations: orgs, NextCursor: next}, err
}
