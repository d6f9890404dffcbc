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

// Users is the users table.
type Users struct{ s *Store }

// userColumns are the columns a user is read from, in scanUser's order.
const userColumns = `user_id, email, display_name, metadata, created_at, updated_at, deleted_at,
	source_updated_at, last_event_id, first_name, last_name, username, image_url, phone_number,
	external_id, last_sign_in_at, banned, locked, deprovisioned, source_created_at, last_active_at`

type scanner interface{ Scan(dest ...any) error }

func scanUser(r scanner) (models.User, error) {
	var (
		u                                          models.User
		email, first, last, username, image, phone sql.NullString
		external                                   sql.NullString
		meta                                       string
		created, updated, source                   int64
		deleted, lastSignIn, sourceCreated         sql.NullInt64
		lastActive                                 sql.NullInt64
		banned, locked, deprovisioned              bool
	)
	err := r.Scan(&u.UserID, &email, &u.DisplayName, &meta, &created, &updated, &deleted,
		&source, &u.LastEventID, &first, &last, &username, &image, &phone, &external, &lastSignIn, &banned, &locked,
		&deprovisioned, &sourceCreated, &lastActive)
	if err != nil {
		return models.User{}, translate(err)
	}
	u.Email = email.String
	if u.Metadata, err = damagedJSON(fmt.Sprintf("user %q metadata", u.UserID), meta); err != nil {
		return models.User{}, err
	}
	u.CreatedAt, u.UpdatedAt, u.SourceUpdatedAt = fromMS(created), fromMS(updated), fromMS(source)
	u.DeletedAt, u.LastActiveAt = timePtr(deleted), timePtr(lastActive)
	u.Profile = models.Profile{
		FirstName: first.String, LastName: last.String, Username: username.String, ImageURL: image.String,
		PhoneNumber: phone.String, ExternalID: external.String, LastSignInAt: timePtr(lastSignIn),
		Banned: banned, Locked: locked, Deprovisioned: deprovisioned, SourceCreatedAt: timePtr(sourceCreated),
	}
	return u, nil
}

// state is what Apply reads of a user to decide: its version, and its
// erasure marks.
type state struct {
	models.Version
	lastActive sql.NullInt64
	deletedAt  sql.NullInt64
	eraseAfter sql.NullInt64
	erasedAt   sql.NullInt64
}

func readState(t *wtx, userID string) (*state, error) {
	var (
		st     state
		source int64
	)
	err := t.row(`SELECT source_updated_at, last_event_id, deleted_at, erase_after, erased_at, last_active_at
		FROM users WHERE user_id = ?`, userID).Scan(&source, &st.EventID, &st.deletedAt, &st.eraseAfter, &st.erasedAt, &st.lastActive)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err)
	}
	st.SourceTime, st.Deleted = fromMS(source), st.deletedAt.Valid
	return &st, nil
}

// Apply writes ch to its user as models.Decide says, in one transaction:
// read the user's version, decide, and write. A change that claims an
// email takes it from another active user whose state is older
// (models.TakesEmailFrom); when that user's state is newer, the change is
// written without the email (its user has given the email up since). So a
// taken email never blocks a change: swaps and longer chains converge in
// any order of arrival. It returns the outcome of the decision; errors wrap
// models.ErrInvalid for metadata that is not a JSON object.
func (u *Users) Apply(ctx context.Context, ch models.UserChange, now time.Time) (models.Outcome, error) {
	return u.s.apply(ctx, ch, now)
}

// changeMetadata is the metadata a change writes: a JSON object.
func changeMetadata(ch models.UserChange) ([]byte, error) {
	if ch.Deleted || len(ch.Metadata) == 0 {
		return []byte("{}"), nil
	}
	if !json.Valid(ch.Metadata) || !strings.HasPrefix(strings.TrimSpace(string(ch.Metadata)), "{") {
		return nil, fmt.Errorf("user %q metadata: %w: not a JSON object", ch.UserID, models.ErrInvalid)
	}
	return ch.Metadata, nil
}

// applyUser is Apply within the transaction t.
func applyUser(t *wtx, ch models.UserChange, now time.Time) (models.Outcome, error) {
	meta, err := changeMetadata(ch)
	if err != nil {
		return "", err
	}
	cur, err := readState(t, ch.UserID)
	if err != nil {
		return "", err
	}
	var v *models.Version
	if cur != nil {
		v = &cur.Version
	}
	d := models.Decide(v, ch.Version())
	return d.Outcome(), writeUser(t, ch, cur, d, meta, now)
}

// writeUser writes ch to its user, whose stored state is cur, as the
// decision d says.
func writeUser(t *wtx, ch models.UserChange, cur *state, d models.Decision, meta []byte, now time.Time) error {
	var err error
	if ch.Deleted {
		// The user's memberships go with it, in this transaction.
		if err := cascadeMemberships(t, qCascadeUser, ch.UserID, ch.SourceTime, ch.EventID, now); err != nil {
			return err
		}
	}
	switch {
	case d == models.DecideDeleted && !cur.eraseAfter.Valid && !cur.erasedAt.Valid:
		// A tombstone that lost its mark (written by an earlier
		// version): the event that found it holds personal data.
		_, err = t.exec(`UPDATE users SET erase_after = deleted_at WHERE user_id = ?`, ch.UserID)
	case !d.Writes():
	case ch.Deleted:
		err = writeTombstone(t, ch, now, d == models.DecideCreate)
	default:
		var email string
		if email, err = claimEmail(t, ch, now); err == nil {
			err = writeState(t, ch, email, meta, now, d == models.DecideCreate)
		}
		if err == nil && d == models.DecideCreate {
			err = catchUpActivity(t, ch.UserID)
		}
	}
	return err
}

// catchUpActivity gives a user just created the newest activity of its
// session events stored before it existed (the event log keeps them until
// retention deletes them), so that lastActiveAt is the same in every
// order of arrival.
func catchUpActivity(t *wtx, userID string) error {
	var at sql.NullInt64
	if err := t.row(qUserActivity, userID).Scan(&at); err != nil || !at.Valid {
		return err
	}
	return setActivity(t, userID, at.Int64)
}

// setActivity moves the active user's lastActiveAt to at, never
// backwards; updated_at stays (it is not a change of the user).
func setActivity(t *wtx, userID string, at int64) error {
	_, err := t.exec(`UPDATE users SET last_active_at = ?1 WHERE user_id = ?2 AND deleted_at IS NULL
		AND (last_active_at IS NULL OR last_active_at < ?1)`, at, userID)
	return err
}

// applySession applies a session event to its user in the transaction t,
// as models.DecideSession says: the user state it carries under the user
// rule (strictly newer only), and its activity, never backwards.
func applySession(t *wtx, ch models.SessionChange, now time.Time) (models.Outcome, error) {
	cur, err := readState(t, ch.UserID)
	if err != nil {
		return "", err
	}
	var (
		v      *models.Version
		active *time.Time
	)
	if cur != nil {
		v, active = &cur.Version, timePtr(cur.lastActive)
	}
	d := models.DecideSession(v, active, ch)
	if d.State == models.DecideDeleted {
		u := models.UserChange{UserID: ch.UserID, EventID: ch.EventID}
		return models.OutcomeDeleted, writeUser(t, u, cur, models.DecideDeleted, nil, now)
	}
	if d.State.Writes() {
		meta, err := changeMetadata(*ch.User)
		if err != nil {
			return "", err
		}
		if err := writeUser(t, *ch.User, cur, d.State, meta, now); err != nil {
			return "", err
		}
	}
	if d.Active {
		if err := setActivity(t, ch.UserID, ms(ch.ActiveAt)); err != nil {
			return "", err
		}
	}
	return d.Outcome(cur != nil), nil
}

// claimEmail returns the email ch writes: its own, taken from an active
// user whose state is older; "" when an active user with a newer state
// holds it.
func claimEmail(t *wtx, ch models.UserChange, now time.Time) (string, error) {
	if ch.Email == "" {
		return "", nil
	}
	var (
		holder string
		source int64
		event  string
	)
	err := t.row(qEmailHolder, ch.Email).Scan(&holder, &source, &event)
	switch {
	case err == sql.ErrNoRows || holder == ch.UserID:
		return ch.Email, nil
	case err != nil:
		return "", translate(err)
	case !models.TakesEmailFrom(ch, models.Version{SourceTime: fromMS(source), EventID: event}):
		return "", nil
	}
	_, err = t.exec(`UPDATE users SET email = NULL, updated_at = ? WHERE user_id = ?`, ms(now), holder)
	return ch.Email, err
}

func writeState(t *wtx, ch models.UserChange, email string, meta []byte, now time.Time, create bool) error {
	p := ch.Profile
	args := []any{text(email), ch.DisplayName, string(meta), ms(now), ms(ch.SourceTime), ch.EventID,
		text(p.FirstName), text(p.LastName), text(p.Username), text(p.ImageURL), text(p.PhoneNumber),
		text(p.ExternalID), msPtr(p.LastSignInAt), p.Banned, p.Locked, p.Deprovisioned, msPtr(p.SourceCreatedAt), ch.UserID}
	if create {
		_, err := t.exec(`INSERT INTO users (email, display_name, metadata, updated_at, source_updated_at,
			last_event_id, first_name, last_name, username, image_url, phone_number, external_id,
			last_sign_in_at, banned, locked, deprovisioned, source_created_at, user_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, append(args, ms(now))...)
		return err
	}
	_, err := t.exec(`UPDATE users SET email = ?, display_name = ?, metadata = ?, updated_at = ?,
		source_updated_at = ?, last_event_id = ?, first_name = ?, last_name = ?, username = ?,
		image_url = ?, phone_number = ?, external_id = ?, last_sign_in_at = ?, banned = ?, locked = ?,
		deprovisioned = ?, source_created_at = ? WHERE user_id = ?`, args...)
	return err
}

// writeTombstone turns the user into a tombstone: every order of delivery
// ends in the same row, with no personal data but the id.
func writeTombstone(t *wtx, ch models.UserChange, now time.Time, create bool) error {
	ts := ms(ch.SourceTime)
	if create {
		_, err := t.exec(`INSERT INTO users (user_id, display_name, metadata, created_at, updated_at,
			deleted_at, source_updated_at, last_event_id, erase_after)
			VALUES (?, ?, '{}', ?, ?, ?, ?, ?, ?)`, ch.UserID, ch.UserID, ms(now), ms(now), ts, ts, ch.EventID, ts)
		return err
	}
	_, err := t.exec(`UPDATE users SET email = NULL, display_name = user_id, metadata = '{}', updated_at = ?,
		deleted_at = ?, source_updated_at = ?, last_event_id = ?, first_name = NULL, last_name = NULL,
		username = NULL, image_url = NULL, phone_number = NULL, external_id = NULL, last_sign_in_at = NULL,
		banned = 0, locked = 0, deprovisioned = 0, source_created_at = NULL, last_active_at = NULL, erase_after = ?
		WHERE user_id = ?`, ms(now), ts, ts, ch.EventID, ts, ch.UserID)
	return err
}

// Get returns the user with userID, deleted or not, or an error wrapping
// models.ErrNotFound.
func (u *Users) Get(ctx context.Context, userID string) (models.User, error) {
	usr, err := scanUser(u.s.r.QueryRowContext(ctx, qUserGet, userID))
	if err != nil {
		return models.User{}, fmt.Errorf("user %q: %w", userID, err)
	}
	return usr, nil
}

// List returns one page of users in user id order after f.After (the
// users_active index, or the primary key with deleted users), or, with an
// email, the one active user holding it (users_email). Active users are
// neither deleted nor deprovisioned (few are: they are read from the
// index and passed over). The cursor is the
// last user id of the page, in hex (so that it is one token in a URL).
func (u *Users) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	var (
		q    string
		args []any
	)
	after, err := hex.DecodeString(f.After)
	if err != nil {
		return models.UserPage{}, models.ErrBadCursor()
	}
	f.After = string(after)
	switch {
	case f.Email != "":
		q = qUsersByEmail
		args = []any{models.NormalizeEmail(f.Email), f.IncludeDeleted, f.After, f.Limit + 1}
	case f.IncludeDeleted:
		q = qUsersAll
		args = []any{f.After, f.Limit + 1}
	default:
		q = qUsersActive
		args = []any{f.After, f.Limit + 1}
	}
	users, err := u.query(ctx, q, args...)
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list users: %w", err)
	}
	page := models.UserPage{}
	page.Users, page.NextCursor = cut(users, f.Limit, func(u models.User) string { return u.UserID })
	return page, nil
}

func (u *Users) query(ctx context.Context, q string, args ...any) ([]models.User, error) {
	return readAll(ctx, u.s.r, q, scanUser, args...)
}

// Changes returns the users whose row changed (updated_at) within
// [f.Since, f.Until], oldest change first (updated_at, then user_id: the
// users_changes index), after the cursor f.After ("<ms>_<userId>").
// NextCursor is always set: on the last page it is where the next poll
// starts. A malformed cursor wraps models.ErrInvalid.
func (u *Users) Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error) {
	from, at, after, next, err := feedWindow(f)
	if err != nil {
		return models.UserPage{}, err
	}
	users, err := u.query(ctx, qUserChanges, from, f.Until.UnixMilli(), at, after, f.Limit)
	if err != nil {
		return models.UserPage{}, fmt.Errorf("list changed users: %w", err)
	}
	if n := len(users); n > 0 {
		next = feedCursor(users[n-1].UpdatedAt, users[n-1].UserID)
	}
	return models.UserPage{Users: users, NextCursor: next}, nil
}

// walkBatch is how many ids one query of a WalkActive reads.
const walkBatch = 1000

// WalkActive calls fn with the id of every active user first written
// before writtenBefore, in user id order, a batch at a time (each batch a
// short read of the users_active index, so that no read holds the file for
// the whole walk), and stops at fn's first error, which it returns.
func (u *Users) WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error {
	return u.s.walk(ctx, "users", qUsersWalk, []any{""}, writtenBefore, fn)
}

// walk calls fn with the first column of each row of q first written
// (its second column) before writtenBefore, a batch at a time, and stops
// at fn's first error, which it returns. q reads from the cursor, which
// its arguments before the batch size are (cursor's values at the start),
// and its columns after the second are the next cursor.
func (s *Store) walk(ctx context.Context, what, q string, cursor []any, writtenBefore time.Time, fn func(id string) error) error {
	for {
		rows, err := s.r.QueryContext(ctx, q, append(cursor, walkBatch)...)
		if err != nil {
			return fmt.Errorf("walk %s: %w", what, translate(err))
		}
		var ids []string
		n := 0
		for rows.Next() {
			var (
				id      string
				created int64
				next    = make([]string, len(cursor))
				dest    = []any{&id, &created}
			)
			for i := range next {
				dest = append(dest, &next[i])
			}
			if err := rows.Scan(dest...); err != nil {
				rows.Close()
				return fmt.Errorf("walk %s: %w", what, translate(err))
			}
			n++
			for i := range next {
				cursor[i] = next[i]
			}
			if created < writtenBefore.UnixMilli() {
				ids = append(ids, id)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("walk %s: %w", what, translate(err))
		}
		for _, id := range ids {
			if err := fn(id); err != nil {
				return err
			}
		}
		if n < walkBatch {
			return nil
		}
	}
}

// cut returns the first limit items of a page read with one more, and the
// cursor after the last of them: its key in hex (one token in a URL), ""
// when nothing follows.
func cut[T any](items []T, limit int, key func(T) string) ([]T, string) {
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, hex.EncodeToString([]byte(key(items[limit-1])))
}

// feedCursor is a change feed's cursor after the row changed at updated
// with the key id.
func feedCursor(updated time.Time, id string) string {
	return fmt.Sprintf("%d_%s", updated.UnixMilli(), id)
}
