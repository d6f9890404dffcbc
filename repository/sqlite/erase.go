package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// Erasure of deleted users' and memberships' personal data.
//
// A tombstone carries erase_after (its deletion time) while some of its
// events may still hold a body; the users_erase and memberships_erase
// indexes find the due ones without reading others, and their events are
// found by the events_user and events_object indexes. Erasing one
// tombstone is one transaction: the events that can be erased lose their
// body (secure_delete overwrites the freed pages), and when none is left
// pending the tombstone trades erase_after for erased_at. An event that
// arrives for an erased user or membership is erased as soon as it is
// processed or given up (eraseIfErased), in the transaction that marks it.

// eraseBatch is how many due tombstones one read of a pass lists.
const eraseBatch = 100

// subject is a kind of tombstone whose events erasure erases: a deleted
// user (its events by user_id, membership events included), or a deleted
// membership (its events by object_id: they hold the member's
// public_user_data while the member's user may stay active). Each
// statement takes the tombstone's id last.
type subject struct {
	name    string
	due     string // qEraseDue: (cutoff, after, last id, n) → (id, erase_after)
	events  string // erase the events: (now, id)
	pending string // count the events left: (id)
	done    string // erased: (now, id)
	soon    string // due at the next pass: (id)
	// deliveries are the outbound deliveries of the tombstone (id), as a
	// condition on the deliveries table: erasure deletes those that are
	// not deletions, and keeps the deletions, which an endpoint may still
	// have to be told (pending, or failed for a replay), without the
	// fingerprints of what it was told before.
	deliveries string
	// object, when set, erases what the object's own row holds of a
	// person: (id).
	object string
	// stillDue, when set, tells in the erasing transaction whether the
	// object is still due as the pass read it: (id, its erase_after) → a
	// row. An object that is not a tombstone may take a newer state
	// meanwhile, which holds personal data again, due on its own schedule.
	stillDue string
	count    func(*models.Erasure)
}

var (
	userSubject = subject{name: "user", due: qEraseDue, events: qEraseEvents, pending: qErasePending,
		done:       `UPDATE users SET erase_after = NULL, erased_at = ? WHERE user_id = ?`,
		soon:       `UPDATE users SET erase_after = 0 WHERE user_id = ?`,
		deliveries: `user_id = ?1`,
		count:      func(e *models.Erasure) { e.Users++ }}
	membershipSubject = subject{name: "membership", due: qMembershipsEraseDue, events: qEraseMembershipEvents,
		pending: qMembershipErasePending,
		done:    `UPDATE memberships SET erase_after = NULL, erased_at = ? WHERE membership_id = ?`,
		soon:    `UPDATE memberships SET erase_after = 0 WHERE membership_id = ?`,
		deliveries: `user_id IN (SELECT user_id FROM memberships WHERE membership_id = ?1)
			AND kind = 'membership' AND object_id = ?1`,
		count: func(e *models.Erasure) { e.Memberships++ }}
	// An invitation that ended (accepted, revoked, expired, deleted with
	// its organization) holds the email of someone who may never be a
	// user: its row's email and metadata are erased with its events.
	invitationSubject = subject{name: "invitation", due: qInvitationsEraseDue, events: qEraseMembershipEvents,
		pending:    qMembershipErasePending,
		done:       `UPDATE invitations SET erase_after = NULL, erased_at = ? WHERE invitation_id = ?`,
		soon:       `UPDATE invitations SET erase_after = 0 WHERE invitation_id = ?`,
		deliveries: `endpoint_id IN (SELECT id FROM endpoints) AND kind = 'invitation' AND object_id = ?1`,
		object:     `UPDATE invitations SET email_address = NULL, metadata = '{}' WHERE invitation_id = ?`,
		stillDue:   `SELECT 1 FROM invitations WHERE invitation_id = ? AND erase_after = ?`,
		count:      func(e *models.Erasure) { e.Invitations++ }}
)

// EraseDeletedBefore erases the events of every user and membership
// tombstone, and the email and events of every invitation, due for
// erasure since before cutoff. Events still stored, or
// failed and to be retried, are left (Pending) until they are processed or
// given up; the tombstone stays due until then.
func (s *Store) EraseDeletedBefore(ctx context.Context, cutoff, now time.Time) (models.Erasure, error) {
	var total models.Erasure
	for _, subj := range []subject{userSubject, membershipSubject, invitationSubject} {
		if err := s.eraseDue(ctx, subj, cutoff, now, &total); err != nil {
			return total, err
		}
	}
	return total, nil
}

// eraseDue erases the tombstones of subj due since before cutoff, a batch
// at a time, adding what it did to total.
func (s *Store) eraseDue(ctx context.Context, subj subject, cutoff, now time.Time, total *models.Erasure) error {
	after, last := int64(-1<<63), ""
	for {
		type due struct {
			id    string
			after int64
		}
		batch, err := readAll(ctx, s.r, subj.due, func(r scanner) (d due, err error) {
			return d, r.Scan(&d.id, &d.after)
		}, ms(cutoff), after, last, eraseBatch)
		if err != nil {
			return fmt.Errorf("find %ss to erase: %w", subj.name, err)
		}
		for _, d := range batch {
			last, after = d.id, d.after
			err := s.write(ctx, func(t *wtx) error {
				if subj.stillDue != "" {
					var one int
					err := t.row(subj.stillDue, d.id, d.after).Scan(&one)
					if err == sql.ErrNoRows {
						return nil // a newer state came: due on its own schedule
					}
					if err != nil {
						return translate(err)
					}
				}
				res, err := s.eraseEvents(t, subj, d.id, now, false)
				if err == nil {
					total.Users += res.Users
					total.Memberships += res.Memberships
					total.Invitations += res.Invitations
					total.Events += res.Events
					total.Pending += res.Pending
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		if len(batch) < eraseBatch {
			return nil
		}
	}
}

// EraseUser erases the events of the deleted user userID now. Events that
// cannot be erased yet are erased by the next pass after they are
// processed or given up. It returns an error wrapping models.ErrNotFound
// for an unknown user and models.ErrConflict for an active one.
func (s *Store) EraseUser(ctx context.Context, userID string, now time.Time) (models.Erasure, error) {
	var res models.Erasure
	err := s.write(ctx, func(t *wtx) error {
		cur, err := readState(t, userID)
		switch {
		case err != nil:
			return err
		case cur == nil:
			return fmt.Errorf("user %q: %w", userID, models.ErrNotFound)
		case !cur.Deleted:
			return fmt.Errorf("%w: user %q is active; only a deleted user's events are erased", models.ErrConflict, userID)
		}
		res, err = s.eraseEvents(t, userSubject, userID, now, true)
		return err
	})
	return res, err
}

// eraseEvents erases, in t, the events of the tombstone id of subj that
// can be erased, and marks the tombstone erased when none is left; else,
// when an admin asked (asked), due at the next pass.
func (s *Store) eraseEvents(t *wtx, subj subject, id string, now time.Time, asked bool) (models.Erasure, error) {
	var res models.Erasure
	if _, err := t.exec(`DELETE FROM deliveries WHERE `+subj.deliveries+` AND deleted = 0`, id); err != nil {
		return res, err
	}
	if _, err := t.exec(`UPDATE deliveries SET fields = NULL, sent = NULL WHERE `+subj.deliveries+` AND deleted = 1
		AND (fields IS NOT NULL OR sent IS NOT NULL)`, id); err != nil {
		return res, err
	}
	if subj.object != "" {
		if _, err := t.exec(subj.object, id); err != nil {
			return res, err
		}
	}
	n, err := t.execN(subj.events, ms(now), id)
	if err != nil {
		return res, err
	}
	res.Events = int(n)
	if n > 0 {
		s.noteErased()
	}
	var pending int64
	if err := t.row(subj.pending, id).Scan(&pending); err != nil {
		return res, translate(err)
	}
	res.Pending = int(pending)
	switch {
	case pending == 0:
		subj.count(&res)
		_, err = t.exec(subj.done, ms(now), id)
	case asked:
		// Due at the next pass, whatever the schedule says.
		_, err = t.exec(subj.soon, id)
	}
	return res, err
}

// eraseIfErased erases the event id if its user, or the membership it
// changes, is a tombstone whose events were all erased already: its body
// would otherwise outlive them.
func (s *Store) eraseIfErased(t *wtx, id int64, now time.Time) error {
	n, err := t.execN(`UPDATE events SET raw_body = NULL, erased_at = ? WHERE id = ? AND erased_at IS NULL
		AND (EXISTS (SELECT 1 FROM users WHERE users.user_id = events.user_id AND users.erased_at IS NOT NULL)
		OR EXISTS (SELECT 1 FROM memberships WHERE memberships.membership_id = events.object_id
			AND memberships.erased_at IS NOT NULL)
		OR EXISTS (SELECT 1 FROM invitations WHERE invitations.invitation_id = events.object_id
			AND invitations.erased_at IS NOT NULL))`, ms(now), id)
	if n > 0 {
		s.noteErased()
	}
	return err
}

// noteErased tells the writer that its transaction erased data: after
// the commit it empties the write-ahead log (checkpointErased).
func (s *Store) noteErased() {
	s.erased.Store(true)
	s.erasedNow.Store(true)
}
