package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// Organizations is the organizations table.
type Organizations struct{ s *Store }

// orgColumns are the columns an organization is read from, in scanOrg's
// order.
const orgColumns = `org_id, name, slug, image_url, metadata, members_count, max_allowed_memberships,
	created_by, source_created_at, created_at, updated_at, deleted_at, source_updated_at, last_event_id`

func scanOrg(r scanner) (models.Organization, error) {
	var (
		o                               models.Organization
		name, slug, image, createdBy    sql.NullString
		members, maxMembers             sql.NullInt64
		sourceCreated, deleted          sql.NullInt64
		meta                            string
		created, updated, sourceUpdated int64
	)
	err := r.Scan(&o.OrgID, &name, &slug, &image, &meta, &members, &maxMembers, &createdBy, &sourceCreated,
		&created, &updated, &deleted, &sourceUpdated, &o.LastEventID)
	if err != nil {
		return models.Organization{}, translate(err)
	}
	o.OrganizationProfile = models.OrganizationProfile{
		Name: name.String, Slug: slug.String, ImageURL: image.String, CreatedBy: createdBy.String,
		MembersCount: intPtr(members), MaxAllowedMemberships: intPtr(maxMembers), SourceCreatedAt: timePtr(sourceCreated),
	}
	if o.Metadata, err = damagedJSON(fmt.Sprintf("organization %q metadata", o.OrgID), meta); err != nil {
		return models.Organization{}, err
	}
	o.CreatedAt, o.UpdatedAt, o.SourceUpdatedAt = fromMS(created), fromMS(updated), fromMS(sourceUpdated)
	o.DeletedAt = timePtr(deleted)
	return o, nil
}

func intPtr(n sql.NullInt64) *int64 {
	if !n.Valid {
		return nil
	}
	return &n.Int64
}

func nullInt(n *int64) any {
	if n == nil {
		return nil
	}
	return *n
}

// objectJSON checks that raw is a JSON object ({} when empty) and returns
// it as stored.
func objectJSON(raw json.RawMessage, what string) (string, error) {
	if len(raw) == 0 {
		return "{}", nil
	}
	if !json.Valid(raw) || !strings.HasPrefix(strings.TrimSpace(string(raw)), "{") {
		return "", fmt.Errorf("%s metadata: %w: not a JSON object", what, models.ErrInvalid)
	}
	return string(raw), nil
}

// readVersion reads the stored version of one object with q, which
// selects source_updated_at, last_event_id, deleted_at by id; nil when the
// object is unknown.
func readVersion(t *wtx, q, id string) (*models.Version, sql.NullInt64, error) {
	var (
		v       models.Version
		source  int64
		deleted sql.NullInt64
	)
	err := t.row(q, id).Scan(&source, &v.EventID, &deleted)
	if err == sql.ErrNoRows {
		return nil, deleted, nil
	}
	if err != nil {
		return nil, deleted, translate(err)
	}
	v.SourceTime, v.Deleted = fromMS(source), deleted.Valid
	return &v, deleted, nil
}

// Apply writes ch to its organization as models.Decide says, in one
// transaction, and with a deletion deletes the organization's active
// memberships in the same transaction. Errors wrap models.ErrInvalid for
// metadata that is not a JSON object.
func (o *Organizations) Apply(ctx context.Context, ch models.OrganizationChange, now time.Time) (models.Outcome, error) {
	return o.s.apply(ctx, ch, now)
}

// applyOrg applies ch in t: for Apply, and for the organization state a
// membership event nests.
func applyOrg(t *wtx, ch models.OrganizationChange, now time.Time) (models.Decision, error) {
	meta := "{}"
	if !ch.Deleted {
		var err error
		if meta, err = objectJSON(ch.Metadata, "organization "+ch.OrgID); err != nil {
			return 0, err
		}
	}
	cur, _, err := readVersion(t, `SELECT source_updated_at, last_event_id, deleted_at FROM organizations WHERE org_id = ?`, ch.OrgID)
	if err != nil {
		return 0, err
	}
	d := models.Decide(cur, ch.Version())
	if ch.Deleted {
		// Every time, so that no order of arrival leaves one behind.
		if err := cascadeMemberships(t, qCascadeOrg, ch.OrgID, ch.SourceTime, ch.EventID, now); err != nil {
			return 0, err
		}
		if err := cascadeInvitations(t, ch.OrgID, ch.SourceTime, ch.EventID, now); err != nil {
			return 0, err
		}
	}
	if !d.Writes() {
		return d, nil
	}
	create := d == models.DecideCreate
	if ch.Deleted {
		ts := ms(ch.SourceTime)
		if create {
			_, err = t.exec(`INSERT INTO organizations (org_id, metadata, created_at, updated_at, deleted_at,
				source_updated_at, last_event_id) VALUES (?, '{}', ?, ?, ?, ?, ?)`, ch.OrgID, ms(now), ms(now), ts, ts, ch.EventID)
			return d, err
		}
		_, err = t.exec(`UPDATE organizations SET name = NULL, slug = NULL, image_url = NULL, metadata = '{}',
			members_count = NULL, max_allowed_memberships = NULL, created_by = NULL, source_created_at = NULL,
			updated_at = ?, deleted_at = ?, source_updated_at = ?, last_event_id = ? WHERE org_id = ?`,
			ms(now), ts, ts, ch.EventID, ch.OrgID)
		return d, err
	}
	p := ch.OrganizationProfile
	args := []any{text(p.Name), text(p.Slug), text(p.ImageURL), meta, nullInt(p.MembersCount), nullInt(p.MaxAllowedMemberships),
		text(p.CreatedBy), msPtr(p.SourceCreatedAt), ms(now), ms(ch.SourceTime), ch.EventID, ch.OrgID}
	if create {
		_, err = t.exec(`INSERT INTO organizations (name, slug, image_url, metadata, members_count, max_allowed_memberships,
			created_by, source_created_at, updated_at, source_updated_at, last_event_id, org_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, ms(now))...)
		return d, err
	}
	_, err = t.exec(`UPDATE organizations SET name = ?, slug = ?, image_url = ?, metadata = ?, members_count = ?,
		max_allowed_memberships = ?, created_by = ?, source_created_at = ?, updated_at = ?, source_updated_at = ?,
		last_event_id = ? WHERE org_id = ?`, args...)
	return d, err
}

// Get returns the organization with orgID, deleted or not, or an error
// wrapping models.ErrNotFound.
func (o *Organizations) Get(ctx context.Context, orgID string) (models.Organization, error) {
	org, err := scanOrg(o.s.r.QueryRowContext(ctx, qOrgGet, orgID))
	if err != nil {
		return models.Organization{}, fmt.Errorf("organization %q: %w", orgID, err)
	}
	return org, nil
}

// WalkActive calls fn with the id of every active organization first
// written before writtenBefore, in id order, a batch at a time
// (organizations_active), and stops at fn's first error, which it returns.
func (o *Organizations) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(orgID string) error) error {
	return o.s.walk(ctx, "organizations", qOrgsWalk, []any{""}, writtenBefore, fn)
}

// List returns one page of organizations in id order after f.After
// (organizations_active, or the primary key with deleted ones), or those
// with a slug (organizations_slug). The cursor is the last id of the page,
// in hex.
func (o *Organizations) List(ctx context.Context, f models.OrganizationFilter) (models.OrganizationPage, error) {
	after, err := hex.DecodeString(f.After)
	if err != nil {
		return models.OrganizationPage{}, models.ErrBadCursor()
	}
	q, args := qOrgsActive, []any{string(after), f.Limit + 1}
	switch {
	case f.Slug != "":
		q, args = qOrgsBySlug, []any{f.Slug, string(after), f.Limit + 1}
	case f.IncludeDeleted:
		q = qOrgsAll
	}
	orgs, err := o.query(ctx, q, args...)
	if err != nil {
		return models.OrganizationPage{}, fmt.Errorf("list organizations: %w", err)
	}
	page := models.OrganizationPage{}
	page.Organizations, page.NextCursor = cut(orgs, f.Limit, func(o models.Organization) string { return o.OrgID })
	return page, nil
}

func (o *Organizations) query(ctx context.Context, q string, args ...any) ([]models.Organization, error) {
	return readAll(ctx, o.s.r, q, scanOrg, args...)
}

// Changes returns the organizations whose row changed within [f.Since,
// f.Until], oldest change first (organizations_changes), after the cursor
// f.After ("<ms>_<orgId>"), as Users.Changes does for users.
func (o *Organizations) Changes(ctx context.Context, f models.ChangeFilter) (models.OrganizationPage, error) {
	from, at, after, next, err := feedWindow(f)
	if err != nil {
		return models.OrganizationPage{}, err
	}
	orgs, err := o.query(ctx, qOrgChanges, from, f.Until.UnixMilli(), at, after, f.Limit)
	if err != nil {
		return models.OrganizationPage{}, fmt.Errorf("list changed organizations: %w", err)
	}
	if n := len(orgs); n > 0 {
		next = feedCursor(orgs[n-1].UpdatedAt, orgs[n-1].OrgID)
	}
	return models.OrganizationPage{Organizations: orgs, NextCursor: next}, nil
}

// feedWindow reads a change feed's filter: the first updated_at, where
// the cursor puts the page's start (time and id), and the cursor of an
// empty page. A malformed cursor wraps models.ErrInvalid.
func feedWindow(f models.ChangeFilter) (from, at int64, after, next string, err error) {
	// Stored times are milliseconds: Since rounded up selects the same rows.
	from = f.Since.UTC().Add(time.Millisecond - time.Nanosecond).Truncate(time.Millisecond).UnixMilli()
	at, next = from, fmt.Sprintf("%d_", from)
	if f.After != "" {
		n, id, ok := strings.Cut(f.After, "_")
		c, err := cursorInt(n)
		if err != nil || !ok {
			return 0, 0, "", "", models.ErrBadCursor()
		}
		next = f.After
		if c > at || (c == at && id > after) {
			at, after = c, id
		}
	}
	return from, at, after, next, nil
}
