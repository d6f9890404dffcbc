package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// Erasure of deleted users' personal data.
//
// A tombstone carries erase_after (its deletion time) while some of its
// user's events may still hold a body; the users_erase index finds the due
// ones without reading other users, and a user's events are found by the
// events_user index. Erasing one user is one transaction: the events that
// can be erased lose their body (secure_delete overwrites the freed pages),
// and when none is left pending the tombstone trades erase_after for
// erased_at. An event that arrives for an erased user is erased as soon as
// it is processed or given up (eraseIfUserErased), in the transaction that
// marks it.

// eraseBatch is how many due tombstones one read of a pass lists.
const eraseBatch = 100

// EraseDeletedBefore erases the events of every tombstone due for erasure
// since before cutoff. Events still stored, or failed and to be retried,
// are left (Pending) until they are processed or given up; the tombstone
// stays due until then.
func (s *Store) EraseDeletedBefore(ctx context.Context, cutoff, now time.Time) (models.Erasure, error) {
	var (
		total models.Erasure
		after = int64(-1 << 63)
		last  = ""
	)
	for {
		rows, err := s.r.QueryContext(ctx, qEraseDue,
			ms(cutoff), after, last, eraseBatch)
		if err != nil {
			return total, fmt.Errorf("find users to erase: %w", translate(err))
		}
		var due []string
		for rows.Next() {
			if err := rows.Scan(&last, &after); err != nil {
				rows.Close()
				return total, fmt.Errorf("find users to erase: %w", translate(err))
			}
			due = append(due, last)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return total, fmt.Errorf("find users to erase: %w", translate(err))
		}
		for _, userID := range due {
			res, err := s.eraseUser(ctx, userID, now, false)
			total.Users += res.Users
			total.Events += res.Events
			total.Pending += res.Pending
			if err != nil {
				return total, err
			}
		}
		if len(due) < eraseBatch {
			return total, nil
		}
	}
}

// EraseUser erases the events of the deleted user userID now. Events that
// cannot be erased yet are erased by the next pass after they are
// processed or given up. It returns an error wrapping models.ErrNotFound
// for an unknown user and models.ErrConflict for an active one.
func (s *Store) EraseUser(ctx context.Context, userID string, now time.Time) (models.Erasure, error) {
	return s.eraseUser(ctx, userID, now, true)
}

func (s *Store) eraseUser(ctx context.Context, userID string, now time.Time, asked bool) (models.Erasure, error) {
	var res models.Erasure
	err := s.write(ctx, func(t *wtx) error {
		res = models.Erasure{}
		cur, err := readState(t, userID)
		switch {
		case err != nil:
			return err
		case cur == nil:
			return fmt.Errorf("user %q: %w", userID, models.ErrNotFound)
		case !cur.Deleted:
			return fmt.Errorf("%w: user %q is active; only a deleted user's events are erased", models.ErrConflict, userID)
		}
		n, err := t.execN(qEraseEvents, ms(now), userID)
		if err != nil {
			return err
		}
		res.Events = int(n)
		if n > 0 {
			s.erased.Store(true)
		}
		var pending int64
		if err := t.row(qErasePending, userID).Scan(&pending); err != nil {
			return translate(err)
		}
		res.Pending = int(pending)
		switch {
		case pending == 0:
			res.Users = 1
			_, err = t.exec(`UPDATE users SET erase_after = NULL, erased_at = ? WHERE user_id = ?`, ms(now), userID)
		case asked:
			// Due at the next pass, whatever the schedule says.
			_, err = t.exec(`UPDATE users SET erase_after = 0 WHERE user_id = ?`, userID)
		}
		return err
	})
	return res, err
}

// eraseIfUserErased erases the event id if its user is a tombstone whose
// events were all erased already: its body would otherwise outlive them.
func (s *Store) eraseIfUserErased(t *wtx, id int64, now time.Time) error {
	n, err := t.execN(`UPDATE events SET raw_body = NULL, erased_at = ? WHERE id = ? AND erased_at IS NULL
		AND EXISTS (SELECT 1 FROM users WHERE users.user_id = events.user_id AND users.erased_at IS NOT NULL)`, ms(now), id)
	if n > 0 {
		s.erased.Store(true)
	}
	return err
}
