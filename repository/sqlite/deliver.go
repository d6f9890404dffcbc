package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/usersync/usersync/models"
)

// appliers apply a change of each kind in a transaction: the one place
// that maps a kind to its tables.
var appliers = map[models.Kind]func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error){
	models.KindUser: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		if s, ok := ch.(models.SessionChange); ok {
			return applySession(t, s, now)
		}
		return applyUser(t, ch.(models.UserChange), now)
	},
	models.KindOrganization: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		d, err := applyOrg(t, ch.(models.OrganizationChange), now)
		return d.Outcome(), err
	},
	models.KindMembership: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applyMembership(t, ch.(models.MembershipChange), now)
	},
	models.KindInvitation: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applyInvitation(t, ch.(models.InvitationChange), now)
	},
	models.KindSubscription: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applySubscription(t, ch.(models.SubscriptionChange), now)
	},
	models.KindSubscriptionItem: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applyItem(t, ch.(models.SubscriptionItemChange), now)
	},
	models.KindPaymentAttempt: func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applyPaymentAttempt(t, ch.(models.PaymentAttemptChange), now)
	},
}

// applyChange applies ch in t to its kind's tables.
func applyChange(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
	if _, ok := ch.(models.IgnoredChange); ok {
		return models.OutcomeIgnored, nil // a billing type usersync does not know: nothing to write
	}
	apply, ok := appliers[ch.Kind()]
	if !ok {
		return "", fmt.Errorf("%w: the embedded store keeps no %q", models.ErrInvalid, ch.Kind())
	}
	return apply(t, ch, now)
}

// applyFailed wraps the error of ch's apply with what it was applying.
func applyFailed(ch models.Change, err error) error {
	userID, objectID := ch.IDs()
	if objectID == "" {
		objectID = userID
	}
	return fmt.Errorf("apply event %q to %s %q: %w", ch.Version().EventID, ch.Kind(), objectID, err)
}

// apply writes ch to its object in one transaction.
func (s *Store) apply(ctx context.Context, ch models.Change, now time.Time) (models.Outcome, error) {
	var outcome models.Outcome
	err := s.write(ctx, func(t *wtx) error {
		var err error
		outcome, err = applyChange(t, ch, now)
		return err
	})
	if err != nil {
		return "", applyFailed(ch, err)
	}
	return outcome, nil
}

// Deliver stores ev, applies ch to its object and marks ev processed, in
// one transaction, whatever the kind: one sync to disk for a delivery,
// shared with the deliveries that arrive at the same time. An event
// already finished is returned as it is, with no outcome; a change that
// cannot apply leaves the event stored (committed) and returns the error,
// for the caller to mark it failed.
func (s *Store) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	var d models.Delivered
	var applyErr error
	err := s.write(ctx, func(t *wtx) error {
		var err error
		d, applyErr = models.Delivered{}, nil
		if d.Event, d.Created, err = recordTx(t, ev); err != nil || d.Event.Status.Finished() {
			return err
		}
		d.Event.Origin = ev.Origin
		applyErr, err = s.applyAndMark(t, &d, ch, now)
		return err
	})
	if err != nil {
		return models.Delivered{}, fmt.Errorf("deliver event %q: %w", ev.EventID, err)
	}
	if applyErr != nil {
		return d, applyFailed(ch, applyErr)
	}
	return d, nil
}

// Reapply applies ch, the change of the stored event ev, and marks ev
// processed, in one transaction: Deliver for an event stored before (the
// sweep's and a replay's). A change that cannot apply leaves the event as
// it was and returns the error, for the caller to mark it failed.
func (s *Store) Reapply(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	d := models.Delivered{Event: ev}
	var applyErr error
	err := s.write(ctx, func(t *wtx) error {
		var err error
		d.Event, d.Outcome = ev, ""
		applyErr, err = s.applyAndMark(t, &d, ch, now)
		return err
	})
	if err != nil {
		return models.Delivered{Event: ev}, fmt.Errorf("reapply event %q: %w", ev.EventID, err)
	}
	if applyErr != nil {
		return d, applyFailed(ch, applyErr)
	}
	return d, nil
}

// applyAndMark applies ch in t under a savepoint and marks d.Event
// processed. A change that cannot apply is rolled back to the savepoint
// and returned as applyErr, leaving the event as it was; err is the
// transaction's failure.
func (s *Store) applyAndMark(t *wtx, d *models.Delivered, ch models.Change, now time.Time) (applyErr, err error) {
	if _, err := t.exec("SAVEPOINT apply"); err != nil {
		return nil, err
	}
	outcome, applyErr := applyChange(t, ch, now)
	if applyErr != nil {
		if _, err := t.exec("ROLLBACK TO apply"); err != nil {
			return nil, err
		}
		_, err = t.exec("RELEASE apply")
		return applyErr, err
	}
	if _, err := t.exec("RELEASE apply"); err != nil {
		return nil, err
	}
	id, err := eventID(d.Event.ID)
	if err != nil {
		return nil, err
	}
	if _, err := markProcessedTx(s, t, id, outcome, now); err != nil {
		return nil, err
	}
	if err := s.outbound.record(t, d.Event, ch, outcome, now); err != nil {
		return nil, err
	}
	d.Outcome = outcome
	d.Event.Status, d.Event.Outcome, d.Event.Attempts = models.StatusProcessed, outcome, d.Event.Attempts+1
	return nil, nil
}
