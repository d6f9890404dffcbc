package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Leases is the leases table.
type Leases struct{ s *Store }

// Acquire takes the lease name for owner until until if it is free: it
// never existed, or it expired by now. It reports whether owner holds it.
func (l *Leases) Acquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error) {
	var ok bool
	err := l.s.write(ctx, func(t *wtx) error {
		n, err := t.execN(`INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leases.expires_at <= ?`, name, owner, ms(until), ms(now))
		ok = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	return ok, nil
}

// Extend moves the expiry of the lease owner holds to until; false when
// owner no longer holds it.
func (l *Leases) Extend(ctx context.Context, name, owner string, until time.Time) (bool, error) {
	var ok bool
	err := l.s.write(ctx, func(t *wtx) error {
		n, err := t.execN(`UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ?`, ms(until), name, owner)
		ok = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("extend lease %q: %w", name, err)
	}
	return ok, nil
}

// Reclaim takes the lease name for owner until until if it expires after
// horizon: later than any schedule sets it, so it is stale. It reports
// whether owner holds it now.
func (l *Leases) Reclaim(ctx context.Context, name, owner string, horizon, until time.Time) (bool, error) {
	var ok bool
	err := l.s.write(ctx, func(t *wtx) error {
		n, err := t.execN(`UPDATE leases SET owner = ?, expires_at = ? WHERE name = ? AND expires_at > ?`,
			owner, ms(until), name, ms(horizon))
		ok = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reclaim lease %q: %w", name, err)
	}
	return ok, nil
}

// Release deletes the lease name if owner holds it.
func (l *Leases) Release(ctx context.Context, name, owner string) error {
	err := l.s.write(ctx, func(t *wtx) error {
		_, err := t.exec(`DELETE FROM leases WHERE name = ? AND owner = ?`, name, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release lease %q: %w", name, err)
	}
	return nil
}

// releaseAll deletes every lease: Open's, for a process that holds the
// data dir's lock (Options.SoleProcess). No other process can hold one
// then, so each left is a dead process's, which would otherwise keep its
// work from starting again until the lease ran out.
func releaseAll(ctx context.Context, w *sql.DB) error {
	if _, err := w.ExecContext(ctx, `DELETE FROM leases`); err != nil {
		return fmt.Errorf("release the leases of a process that ended: %w", translate(err))
	}
	return nil
}
