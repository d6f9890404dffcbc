package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Invitations is the invitations table (schema 18).
type Invitations struct{ s *Store }

// invitationColumns are the columns an invitation is read from, in
// scanInvitation's order.
const invitationColumns = `invitation_id, org_id, email_address, role, role_name, status, metadata, user_id,
	expires_at, source_created_at, created_at, updated_at, deleted_at, source_updated_at, last_event_id, erased_at`

// invitationTombstone is the SET of an invitation deleted with its
// organization; its arguments are ?1 deleted_at (also erase_after: its
// events' bodies are due for erasure from then), ?2 source_updated_at,
// ?3 last_event_id, ?4 updated_at; the statement's WHERE takes ?5.
const invitationTombstone = `email_address = NULL, metadata = '{}', deleted_at = ?1, erase_after = ?1,
	source_updated_at = ?2, last_event_id = ?3, updated_at = ?4`

func scanInvitation(r scanner) (models.Invitation, error) {
	var (
		i                                       models.Invitation
		email, role, roleName, userID           sql.NullString
		meta                                    string
		expires, sourceCreated, deleted, erased sql.NullInt64
		created, updated, sourceUpdated         int64
	)
	err := r.Scan(&i.InvitationID, &i.OrgID, &email, &role, &roleName, &i.Status, &meta, &userID,
		&expires, &sourceCreated, &created, &updated, &deleted, &sourceUpdated, &i.LastEventID, &erased)
	if err != nil {
		return models.Invitation{}, translate(err)
	}
	i.EmailAddress, i.Role, i.RoleName, i.UserID = email.String, role.String, roleName.String, userID.String
	if i.Metadata, err = damagedJSON(fmt.Sprintf("invitation %q metadata", i.InvitationID), meta); err != nil {
		return models.Invitation{}, err
	}
	i.ExpiresAt, i.SourceCreatedAt, i.DeletedAt, i.ErasedAt = timePtr(expires), timePtr(sourceCreated), timePtr(deleted), timePtr(erased)
	i.CreatedAt, i.UpdatedAt, i.SourceUpdatedAt = fromMS(created), fromMS(updated), fromMS(sourceUpdated)
	return i, nil
}

// Apply writes ch to its invitation as models.Decide says, in one
// transaction: a state of an invitation whose organization is deleted is
// written as a tombstone. Errors wrap models.ErrInvalid for metadata that
// is not a JSON object.
func (iv *Invitations) Apply(ctx context.Context, ch models.InvitationChange, now time.Time) (models.Outcome, error) {
	return iv.s.apply(ctx, ch, now)
}

// applyInvitation is Apply within the transaction t.
func applyInvitation(t *wtx, ch models.InvitationChange, now time.Time) (models.Outcome, error) {
	meta, err := objectJSON(ch.Metadata, "invitation "+ch.InvitationID)
	if err != nil {
		return "", err
	}
	goneAt, err := parentDeletedAt(t, ch.OrgID, "")
	if err != nil {
		return "", err
	}
	cur, _, err := readVersion(t, qInvitationVersion, ch.InvitationID)
	if err != nil {
		return "", err
	}
	d := models.Decide(cur, ch.Version())
	outcome := d.Outcome()
	if goneAt != nil {
		outcome = models.OutcomeDeleted
	}
	if !d.Writes() {
		return outcome, nil
	}
	args := []any{ch.InvitationID, ch.OrgID, text(ch.EmailAddress), text(ch.Role), text(ch.RoleName), ch.Status, meta,
		text(ch.UserID), msPtr(ch.ExpiresAt), msPtr(ch.SourceCreatedAt), ms(now), ms(ch.SourceTime), ch.EventID,
		msPtr(models.InvitationEraseAfter(ch.Status, ch.SourceTime, ch.ExpiresAt, nil))}
	if _, err := t.exec(qInvitationUpsert, args...); err != nil {
		return "", err
	}
	if goneAt != nil {
		// Its organization is deleted: so is it, from the deletion on.
		_, err := t.exec(`UPDATE invitations SET `+invitationTombstone+` WHERE invitation_id = ?5`,
			ms(*goneAt), ms(ch.SourceTime), ch.EventID, ms(now), ch.InvitationID)
		return outcome, err
	}
	return outcome, nil
}

// cascadeInvitations makes every invitation of the deleted organization
// orgID a tombstone, deleted at at by the event eventID
// (qCascadeInvitations).
func cascadeInvitations(t *wtx, orgID string, at time.Time, eventID string, now time.Time) error {
	_, err := t.exec(qCascadeInvitations, ms(at), ms(at), eventID, ms(now), orgID)
	return err
}

// Get returns the invitation, deleted or not, or an error wrapping
// models.ErrNotFound (the primary key).
func (iv *Invitations) Get(ctx context.Context, invitationID string) (models.Invitation, error) {
	i, err := scanInvitation(iv.s.r.QueryRowContext(ctx, qInvitationGet, invitationID))
	if err != nil {
		return models.Invitation{}, fmt.Errorf("invitation %q: %w", invitationID, err)
	}
	return i, nil
}

// List returns one page of the invitations of f.OrgID in invitation id
// order after f.After (the last id of the previous page, in hex), as
// f.KeepInvitation selects them: of a stored status pending, accepted or
// revoked, one range of invitations_status; else (every status, the
// expired ones, tombstones) a range of invitations_org.
func (iv *Invitations) List(ctx context.Context, f models.InvitationFilter) (models.InvitationPage, error) {
	start, err := hex.DecodeString(f.After)
	if err != nil {
		return models.InvitationPage{}, models.ErrBadCursor()
	}
	read := func(after string, n int) ([]models.Invitation, error) {
		return readAll(ctx, iv.s.r, qOrgInvitations, scanInvitation, f.OrgID, after, n)
	}
	if f.Status != "" && f.Status != models.InvitationExpired && !f.IncludeDeleted {
		read = func(after string, n int) ([]models.Invitation, error) {
			return readAll(ctx, iv.s.r, qOrgInvitationsOfStatus, scanInvitation, f.OrgID, f.Status, after, n)
		}
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

// Changes returns the invitations whose row changed within [f.Since,
// f.Until], oldest change first (invitations_changes), after the cursor
// f.After ("<ms>_<invitationId>"), tombstones included.
func (iv *Invitations) Changes(ctx context.Context, f models.ChangeFilter) (models.InvitationPage, error) {
	from, at, after, next, err := feedWindow(f)
	if err != nil {
		return models.InvitationPage{}, err
	}
	rows, err := readAll(ctx, iv.s.r, qInvitationChanges, scanInvitation, from, f.Until.UnixMilli(), at, after, f.Limit)
	if err != nil {
		return models.InvitationPage{}, fmt.Errorf("list changed invitations: %w", err)
	}
	for _, i := range rows {
		next = feedCursor(i.UpdatedAt, i.InvitationID)
	}
	return models.InvitationPage{Invitations: rows, NextCursor: next}, nil
}
