package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Memberships is the memberships table.
type Memberships struct{ s *Store }

// membershipColumns are the columns a membership is read from, with its
// user's current record and its organization's summary (memberJoin), in
// scanMembership's order.
const membershipColumns = `m.membership_id, m.org_id, m.user_id, m.role, m.role_name, m.permissions, m.metadata,
	m.first_name, m.last_name, m.image_url, m.identifier, m.username, m.banned, m.deprovisioned,
	m.source_created_at, m.created_at, m.updated_at, m.deleted_at, m.source_updated_at, m.last_event_id,
	u.user_id, u.deleted_at, u.email, u.first_name, u.last_name, u.image_url, u.phone_number, u.username, u.banned,
	u.deprovisioned, o.org_id, o.deleted_at, o.name, o.slug, o.image_url`

// memberJoin joins a membership m to its user u and organization o, each
// by primary key: the member is shown from the user's current record,
// never copied (a user.updated changes what every membership shows).
const memberJoin = `
	LEFT JOIN users u ON u.user_id = m.user_id
	LEFT JOIN organizations o ON o.org_id = m.org_id`

// membershipTombstone is the SET of a membership's tombstone; its
// arguments are ?1 deleted_at (also erase_after: the member's data in its
// events is due for erasure from then), ?2 source_updated_at, ?3
// last_event_id, ?4 updated_at; the statement's WHERE takes ?5.
const membershipTombstone = `role = NULL, role_name = NULL, permissions = '[]', metadata = '{}',
	first_name = NULL, last_name = NULL, image_url = NULL, identifier = NULL, username = NULL, banned = 0,
	deprovisioned = 0, deleted_at = ?1, erase_after = ?1, source_updated_at = ?2, last_event_id = ?3, updated_at = ?4`

// joined is a membership as read, with what its joins found.
type joined struct {
	m                       models.Membership
	orgDeleted, userDeleted bool
}

func scanMembership(r scanner) (joined, error) {
	var (
		j                                                 joined
		m                                                 models.Membership
		orgID, userID, role, roleName                     sql.NullString
		first, last, image, identifier, username          sql.NullString
		perms, meta                                       string
		banned, deprovisioned                             bool
		sourceCreated, deleted                            sql.NullInt64
		created, updated, source                          int64
		uID, uEmail, uFirst, uLast, uImage, uPhone, uName sql.NullString
		uDeleted                                          sql.NullInt64
		uBanned, uDeprovisioned                           sql.NullBool
		oID, oName, oSlug, oImage                         sql.NullString
		oDeleted                                          sql.NullInt64
	)
	err := r.Scan(&m.MembershipID, &orgID, &userID, &role, &roleName, &perms, &meta,
		&first, &last, &image, &identifier, &username, &banned, &deprovisioned,
		&sourceCreated, &created, &updated, &deleted, &source, &m.LastEventID,
		&uID, &uDeleted, &uEmail, &uFirst, &uLast, &uImage, &uPhone, &uName, &uBanned, &uDeprovisioned,
		&oID, &oDeleted, &oName, &oSlug, &oImage)
	if err != nil {
		return joined{}, translate(err)
	}
	m.OrgID, m.UserID, m.Role, m.RoleName = orgID.String, userID.String, role.String, roleName.String
	if err := json.Unmarshal([]byte(perms), &m.Permissions); err != nil {
		return joined{}, fmt.Errorf("membership %q permissions: %w", m.MembershipID, errDamaged)
	}
	if m.Metadata, err = damagedJSON(fmt.Sprintf("membership %q metadata", m.MembershipID), meta); err != nil {
		return joined{}, err
	}
	m.Member = models.Member{
		FirstName: first.String, LastName: last.String, ImageURL: image.String, Identifier: identifier.String,
		Username: username.String, Banned: banned, Deprovisioned: deprovisioned,
	}
	m.SourceCreatedAt, m.DeletedAt = timePtr(sourceCreated), timePtr(deleted)
	m.CreatedAt, m.UpdatedAt, m.SourceUpdatedAt = fromMS(created), fromMS(updated), fromMS(source)
	j.userDeleted, j.orgDeleted = uDeleted.Valid, oDeleted.Valid
	if uID.Valid && !uDeleted.Valid && !m.Deleted() {
		m.Member = models.MemberOf(models.User{UserID: uID.String, Email: uEmail.String, Profile: models.Profile{
			FirstName: uFirst.String, LastName: uLast.String, ImageURL: uImage.String, PhoneNumber: uPhone.String,
			Username: uName.String, Banned: uBanned.Bool, Deprovisioned: uDeprovisioned.Bool,
		}})
		m.MemberFromUser = true
	}
	if oID.Valid && !oDeleted.Valid {
		m.Organization = &models.OrganizationSummary{OrgID: oID.String, Name: oName.String, Slug: oSlug.String, ImageURL: oImage.String}
	}
	j.m = m
	return j, nil
}

// cascadeMemberships turns the active memberships that q selects by id
// (of an organization, qCascadeOrg, or of a user, qCascadeUser) into
// tombstones, deleted at at by the event eventID.
func cascadeMemberships(t *wtx, q, id string, at time.Time, eventID string, now time.Time) error {
	_, err := t.exec(q, ms(at), ms(at), eventID, ms(now), id)
	return err
}

// Apply applies, in one transaction, the organization state ch nests (as
// Organizations.Apply does), then ch to its membership as models.Decide
// says: a state of a membership whose organization or user is a tombstone
// is written as a tombstone; an active membership of the same
// (organization, user) is made a tombstone when its state is older than
// ch, and makes ch one when it is newer (memberships_pair keeps one active
// per pair). Errors wrap models.ErrInvalid for metadata that is not a JSON
// object.
func (mb *Memberships) Apply(ctx context.Context, ch models.MembershipChange, now time.Time) (models.Outcome, error) {
	return mb.s.apply(ctx, ch, now)
}

// applyMembership is Apply within the transaction t.
func applyMembership(t *wtx, ch models.MembershipChange, now time.Time) (models.Outcome, error) {
	meta, perms := "{}", "[]"
	if !ch.Deleted {
		var err error
		if meta, err = objectJSON(ch.Metadata, "membership "+ch.MembershipID); err != nil {
			return "", err
		}
		if ch.Permissions != nil {
			b, _ := json.Marshal(ch.Permissions) // strings always encode
			perms = string(b)
		}
	}
	if ch.Organization != nil {
		if _, err := applyOrg(t, *ch.Organization, now); err != nil {
			return "", err
		}
	}
	goneAt, err := parentDeletedAt(t, ch.OrgID, ch.UserID)
	if err != nil {
		return "", err
	}
	cur, _, err := readVersion(t, `SELECT source_updated_at, last_event_id, deleted_at FROM memberships WHERE membership_id = ?`, ch.MembershipID)
	if err != nil {
		return "", err
	}
	d := models.Decide(cur, ch.Version())
	outcome := d.Outcome()
	if goneAt != nil {
		outcome = models.OutcomeDeleted
	}
	create := d == models.DecideCreate
	switch {
	case !d.Writes():
		return outcome, nil
	case ch.Deleted:
		return outcome, writeMembershipTombstone(t, ch, ch.SourceTime, now, create)
	case goneAt != nil:
		return outcome, writeMembershipTombstone(t, ch, *goneAt, now, create)
	}
	var (
		holder string
		source int64
		event  string
	)
	err = t.row(qMembershipHolder, ch.OrgID, ch.UserID).Scan(&holder, &source, &event)
	switch {
	case err == sql.ErrNoRows || holder == ch.MembershipID:
	case err != nil:
		return "", translate(err)
	case models.Newer(ch.SourceTime, ch.EventID, fromMS(source), event):
		// The holder was left before ch's membership was made.
		if _, err := t.exec(`UPDATE memberships SET `+membershipTombstone+` WHERE membership_id = ?5`,
			ms(ch.SourceTime), ms(ch.SourceTime), ch.EventID, ms(now), holder); err != nil {
			return "", err
		}
	default:
		// ch's membership was left before the holder was made.
		return models.OutcomeDeleted, writeMembershipTombstone(t, ch, fromMS(source), now, create)
	}
	return outcome, writeMembershipState(t, ch, meta, perms, now, create)
}

// parentDeletedAt returns when the organization or user of a membership
// was deleted (the earlier), or nil when neither is a tombstone.
func parentDeletedAt(t *wtx, orgID, userID string) (*time.Time, error) {
	var gone *time.Time
	for _, q := range []struct{ sql, id string }{
		{`SELECT deleted_at FROM organizations WHERE org_id = ?`, orgID},
		{`SELECT deleted_at FROM users WHERE user_id = ?`, userID},
	} {
		if q.id == "" {
			continue
		}
		var at sql.NullInt64
		err := t.row(q.sql, q.id).Scan(&at)
		if err != nil && err != sql.ErrNoRows {
			return nil, translate(err)
		}
		if at.Valid && (gone == nil || fromMS(at.Int64).Before(*gone)) {
			gone = new(fromMS(at.Int64))
		}
	}
	return gone, nil
}

func writeMembershipTombstone(t *wtx, ch models.MembershipChange, deletedAt, now time.Time, create bool) error {
	if create {
		_, err := t.exec(`INSERT INTO memberships (membership_id, org_id, user_id, permissions, metadata, created_at,
			updated_at, deleted_at, erase_after, source_updated_at, last_event_id) VALUES (?1, ?2, ?3, '[]', '{}', ?4, ?4, ?5, ?5, ?6, ?7)`,
			ch.MembershipID, text(ch.OrgID), text(ch.UserID), ms(now), ms(deletedAt), ms(ch.SourceTime), ch.EventID)
		return err
	}
	_, err := t.exec(`UPDATE memberships SET `+membershipTombstone+` WHERE membership_id = ?5`,
		ms(deletedAt), ms(ch.SourceTime), ch.EventID, ms(now), ch.MembershipID)
	return err
}

func writeMembershipState(t *wtx, ch models.MembershipChange, meta, perms string, now time.Time, create bool) error {
	u := ch.Member
	args := []any{ch.OrgID, ch.UserID, text(ch.Role), text(ch.RoleName), perms, meta, text(u.FirstName), text(u.LastName),
		text(u.ImageURL), text(u.Identifier), text(u.Username), u.Banned, u.Deprovisioned, msPtr(ch.SourceCreatedAt),
		ms(now), ms(ch.SourceTime), ch.EventID, ch.MembershipID}
	if create {
		_, err := t.exec(`INSERT INTO memberships (org_id, user_id, role, role_name, permissions, metadata, first_name,
			last_name, image_url, identifier, username, banned, deprovisioned, source_created_at, updated_at,
			source_updated_at, last_event_id, membership_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, ms(now))...)
		return err
	}
	_, err := t.exec(`UPDATE memberships SET org_id = ?, user_id = ?, role = ?, role_name = ?, permissions = ?,
		metadata = ?, first_name = ?, last_name = ?, image_url = ?, identifier = ?, username = ?, banned = ?,
		deprovisioned = ?, source_created_at = ?, updated_at = ?, source_updated_at = ?, last_event_id = ?
		WHERE membership_id = ?`, args...)
	return err
}

// Get returns the membership with membershipID, deleted or not, or an
// error wrapping models.ErrNotFound.
func (mb *Memberships) Get(ctx context.Context, membershipID string) (models.Membership, error) {
	j, err := scanMembership(mb.s.r.QueryRowContext(ctx, qMembershipGet, membershipID))
	if err != nil {
		return models.Membership{}, fmt.Errorf("membership %q: %w", membershipID, err)
	}
	return j.m, nil
}

// WalkActive calls fn with the id of every membership that is not a
// tombstone and was first written before writtenBefore, in (organization,
// user) order, a batch at a time (memberships_pair, which holds exactly
// them), and stops at fn's first error, which it returns.
func (mb *Memberships) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(membershipID string) error) error {
	return mb.s.walk(ctx, "memberships", qMembershipsWalk, []any{"", ""}, writtenBefore, fn)
}

// List returns one page of the memberships of f.OrgID (memberships_org)
// or of f.UserID (memberships_user) in membership id order after f.After,
// the last id of the previous page in hex: the active ones
// (models.ActiveMember), or all with f.IncludeDeleted.
func (mb *Memberships) List(ctx context.Context, f models.MembershipFilter) (models.MembershipPage, error) {
	start, err := hex.DecodeString(f.After)
	if err != nil {
		return models.MembershipPage{}, models.ErrBadCursor()
	}
	q, key := qOrgMemberships, f.OrgID
	if f.OrgID == "" {
		q, key = qUserMemberships, f.UserID
	}
	read := func(after string, n int) ([]joined, error) {
		return mb.query(ctx, q, key, after, f.IncludeDeleted, n)
	}
	keep := func(j joined) bool {
		return f.IncludeDeleted || models.ActiveMember(j.m, j.orgDeleted, j.userDeleted)
	}
	items, next, err := repository.Page(f.Limit, string(start), read, keep, func(j joined) string { return j.m.MembershipID })
	if err != nil {
		return models.MembershipPage{}, fmt.Errorf("list memberships: %w", err)
	}
	page := models.MembershipPage{Memberships: make([]models.Membership, 0, len(items))}
	for _, j := range items {
		if f.UserID == "" {
			j.m.Organization = nil // the organization asked for
		}
		page.Memberships = append(page.Memberships, j.m)
	}
	if next != "" {
		page.NextCursor = hex.EncodeToString([]byte(next))
	}
	return page, nil
}

func (mb *Memberships) query(ctx context.Context, q string, args ...any) ([]joined, error) {
	return readAll(ctx, mb.s.r, q, scanMembership, args...)
}

// Changes returns the memberships whose row changed within [f.Since,
// f.Until], oldest change first (memberships_changes), after the cursor
// f.After ("<ms>_<membershipId>"), tombstones included. A user's change
// does not move its memberships: the users' feed carries it.
func (mb *Memberships) Changes(ctx context.Context, f models.ChangeFilter) (models.MembershipPage, error) {
	from, at, after, next, err := feedWindow(f)
	if err != nil {
		return models.MembershipPage{}, err
	}
	rows, err := mb.query(ctx, qMembershipChanges, from, f.Until.UnixMilli(), at, after, f.Limit)
	if err != nil {
		return models.MembershipPage{}, fmt.Errorf("list changed memberships: %w", err)
	}
	page := models.MembershipPage{Memberships: make([]models.Membership, 0, len(rows))}
	for _, j := range rows {
		page.Memberships = append(page.Memberships, j.m)
		next = feedCursor(j.m.UpdatedAt, j.m.MembershipID)
	}
	page.NextCursor = next
	return page, nil
}
