package outbound

import (
	"context"
	"errors"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// A derivation is one rule of the fan-out: the changes an outbox entry's
// change of kind From made to objects of kind To, which are sent in
// their own right but have no entry of their own (a store records one
// entry per event, the change of the event's own object). The relations
// between kinds are the kinds table's (models.KindSpec's Parents and
// Nests; a payer's plan is no kind of it); the reads are here.
type derivation struct {
	From, To models.Kind
	Read     deriveFunc
}

// deriveFunc walks the changes the change p made to objects of one kind,
// giving them to queue a batch at a time. An object usersync no longer has
// (erased) has no change to give.
type deriveFunc func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error

// derivations are every rule of the fan-out, one row per (From, To): a
// kind whose change changes objects of another kind adds a row.
var derivations = []derivation{
	// A deletion's cascade: the memberships deleted with their user or
	// organization (models.KindSpec.Parents).
	{From: models.KindUser, To: models.KindMembership,
		Read: cascaded(func(id string) models.MembershipFilter { return models.MembershipFilter{UserID: id} })},
	{From: models.KindOrganization, To: models.KindMembership,
		Read: cascaded(func(id string) models.MembershipFilter { return models.MembershipFilter{OrgID: id} })},
	{From: models.KindOrganization, To: models.KindInvitation, Read: cascadedInvitations},
	// Nested states (models.KindSpec.Nests): the organization a
	// membership's event carries, the items a subscription's event lists.
	{From: models.KindMembership, To: models.KindOrganization, Read: nestedOrganization},
	{From: models.KindSubscription, To: models.KindSubscriptionItem, Read: nestedItems},
	// The payer's plan, of a subscription's or an item's change.
	{From: models.KindSubscription, To: models.KindPlan, Read: payerPlan(func(ctx context.Context, s repository.Store, id string) (models.Payer, error) {
		sub, err := s.Billing().Subscription(ctx, id)
		return sub.Payer, err
	})},
	{From: models.KindSubscriptionItem, To: models.KindPlan, Read: payerPlan(func(ctx context.Context, s repository.Store, id string) (models.Payer, error) {
		it, err := s.Billing().Item(ctx, id)
		return it.Payer, err
	})},
}

// derive queues the changes p's change made to other objects
// (derivations), of the kinds some endpoint wants.
func (d *Dispatcher) derive(ctx context.Context, p models.Pending, queue func(...models.Pending) error) error {
	for _, r := range derivations {
		if r.From != p.Kind || !d.wantsKind(r.To) {
			continue
		}
		if err := r.Read(ctx, d.o.Store, p, queue); err != nil {
			return err
		}
	}
	return nil
}

// gone is nil for an error that says the object is not there (erased):
// it has nothing to send.
func gone(err error) error {
	if errors.Is(err, models.ErrNotFound) {
		return nil
	}
	return err
}

// payerPlan walks the plan of the payer of p's object (payerOf), which
// p's change may have changed. Its version is the time the change applied
// (a plan has no Clerk time of its own), and it is queued even when not
// newer (models.Delivery.Queue): whether the plan changed is for its
// render to say.
func payerPlan(payerOf func(ctx context.Context, s repository.Store, id string) (models.Payer, error)) deriveFunc {
	return func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
		payer, err := payerOf(ctx, s, p.ObjectID)
		if err != nil || payer.ID == "" {
			return gone(err)
		}
		plan := models.Pending{Kind: models.KindPlan, ObjectID: payer.ID, UserID: payer.UserID(), Change: models.EventUpdated,
			Origin: p.Origin, At: p.At, Version: models.Version{SourceTime: p.At, EventID: p.Version.EventID}}
		return queue(plan)
	}
}

// cascaded walks the memberships of a deleted parent that its deletion
// deleted: tombstones whose last event is the parent's deletion.
func cascaded(filter func(parentID string) models.MembershipFilter) deriveFunc {
	return func(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
		if p.Change != models.EventDeleted {
			return nil
		}
		f := filter(p.ObjectID)
		f.IncludeDeleted, f.Limit = true, cascadePage
		for {
			page, err := s.Memberships().List(ctx, f)
			if err != nil {
				return err
			}
			var ps []models.Pending
			for _, m := range page.Memberships {
				if m.DeletedAt == nil || m.LastEventID != p.Version.EventID {
					continue
				}
				ps = append(ps, models.Pending{Kind: models.KindMembership, ObjectID: m.MembershipID, UserID: m.UserID,
					Version: models.Version{SourceTime: m.SourceUpdatedAt, EventID: m.LastEventID, Deleted: true},
					Change:  models.EventDeleted, Origin: models.OriginCascade, At: p.At})
			}
			if err := queue(ps...); err != nil {
				return err
			}
			if f.After = page.NextCursor; f.After == "" {
				return nil
			}
		}
	}
}

// cascadedInvitations walks the invitations of a deleted organization
// that its deletion deleted: tombstones whose last event is the
// organization's deletion.
func cascadedInvitations(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	if p.Change != models.EventDeleted {
		return nil
	}
	f := models.InvitationFilter{OrgID: p.ObjectID, IncludeDeleted: true, Limit: cascadePage}
	for {
		page, err := s.Invitations().List(ctx, f)
		if err != nil {
			return err
		}
		var ps []models.Pending
		for _, inv := range page.Invitations {
			if inv.DeletedAt == nil || inv.LastEventID != p.Version.EventID {
				continue
			}
			ps = append(ps, models.Pending{Kind: models.KindInvitation, ObjectID: inv.InvitationID, UserID: inv.UserID,
				Version: inv.Version(), Change: models.EventDeleted, Origin: models.OriginCascade, At: p.At})
		}
		if err := queue(ps...); err != nil {
			return err
		}
		if f.After = page.NextCursor; f.After == "" {
			return nil
		}
	}
}

// nestedOrganization walks the organization state a membership's event
// carried (models.MembershipChange.Organization) when it is what applied
// and is still the organization's newest: the organization's last event
// is the membership's. When a later change overwrote it, that change has
// an entry of its own, which sends the newer state in its place; when it
// was older than the organization's, nothing changed.
func nestedOrganization(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	m, err := s.Memberships().Get(ctx, p.ObjectID)
	if err != nil || m.OrgID == "" {
		return gone(err)
	}
	o, err := s.Organizations().Get(ctx, m.OrgID)
	if err != nil || o.LastEventID != p.Version.EventID {
		return gone(err)
	}
	return queue(nested(p, models.KindOrganization, o.OrgID, "", o.Version(), o.CreatedAt, o.UpdatedAt))
}

// nestedItems walks the items a subscription's event listed whose state
// from it applied and is still the item's newest (as nestedOrganization),
// among the items of the subscription's payer (Billing.Items: its newest
// models.MaxPayerItems; a payer has a few).
func nestedItems(ctx context.Context, s repository.Store, p models.Pending, queue func(...models.Pending) error) error {
	sub, err := s.Billing().Subscription(ctx, p.ObjectID)
	if err != nil {
		return gone(err)
	}
	items, err := s.Billing().Items(ctx, sub.Payer)
	if err != nil {
		return err
	}
	var ps []models.Pending
	for _, it := range items {
		if it.LastEventID == p.Version.EventID && it.SubscriptionID == p.ObjectID {
			ps = append(ps, nested(p, models.KindSubscriptionItem, it.ItemID, it.Payer.UserID(), it.Version(), it.CreatedAt, it.UpdatedAt))
		}
	}
	return queue(ps...)
}

// nested is the change of an object (kind k, id, its user) whose state
// the event of p carried and which applied, at the object's version v,
// with p's origin: created when it created usersync's copy of the object
// (the copy's first write, created, is its last, updated: every write of
// a state moves updated), deleted for a tombstone, updated otherwise.
func nested(p models.Pending, k models.Kind, id, userID string, v models.Version, created, updated time.Time) models.Pending {
	c := models.EventUpdated
	switch {
	case v.Deleted:
		c = models.EventDeleted
	case created.Equal(updated):
		c = models.EventCreated
	}
	return models.Pending{Kind: k, ObjectID: id, UserID: userID, Version: v, Change: c, Origin: p.Origin, At: p.At}
}
