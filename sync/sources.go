package sync

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// source is what a reconcile does differently for each kind of object.
type source struct {
	kind models.Kind
	// list reads a page of Clerk's list.
	list func(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	// check asks Clerk for one object absent from the list: its state, or
	// an error wrapping models.ErrNotFound when Clerk no longer has it.
	check func(ctx context.Context, id string) (json.RawMessage, error)
	// stored is the version of the object here; nil when it is unknown.
	stored func(ctx context.Context, id string) (*models.Version, error)
	// storedOf, if set, is used instead of stored: the version here of
	// the object ch changes (a subscription item is found among its
	// payer's).
	storedOf func(ctx context.Context, ch models.Change) (*models.Version, error)
	// walk is the stores' WalkActive; nil for a kind Clerk never deletes
	// (subscription items): a run looks for no deletion of it, and check
	// and deletion are unused.
	walk func(ctx context.Context, writtenBefore time.Time, fn func(id string) error) error
	// deletion is the delivery that deletes the object as a webhook would.
	deletion func(ctx context.Context, id, runID string, at time.Time) (Delivery, error)
}

// sourceOf is each kind's Clerk list and local store: the kinds a
// reconcile and a backfill know.
var sourceOf = map[models.Kind]func(r *Reconciler) *source{
	models.KindUser:         (*Reconciler).userSource,
	models.KindOrganization: (*Reconciler).orgSource,
	models.KindMembership:   (*Reconciler).membershipSource,
	models.KindInvitation:   (*Reconciler).invitationSource,
	// Subscriptions and payment attempts are not read from Clerk: a
	// payer's plan is computed from its items alone.
	models.KindSubscriptionItem: (*Reconciler).subscriptionItemSource,
}

// has reports whether r has what a reconcile of kind k reads.
func (r *Reconciler) has(k models.Kind) bool {
	switch k {
	case models.KindUser:
		return true
	case models.KindSubscriptionItem:
		return r.Billing != nil
	}
	return r.Orgs != nil
}

// version is the version here of the object id that ch changes.
func (s *source) version(ctx context.Context, id string, ch models.Change) (*models.Version, error) {
	if s.storedOf != nil {
		return s.storedOf(ctx, ch)
	}
	return s.stored(ctx, id)
}

// ReconcileKinds are the kinds a reconcile reads from Clerk's lists, in
// the order of the kinds table (users, organizations, memberships,
// subscription items).
func ReconcileKinds() []models.Kind {
	var kinds []models.Kind
	for _, k := range models.Kinds {
		if sourceOf[k] != nil {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// sources returns the sources of the kinds asked for (nil: all the
// reconciler has), in the order of the kinds table.
func (r *Reconciler) sources(kinds []models.Kind) ([]*source, error) {
	if kinds == nil {
		for _, k := range ReconcileKinds() {
			if r.has(k) {
				kinds = append(kinds, k)
			}
		}
	}
	for _, k := range kinds {
		if sourceOf[k] == nil {
			return nil, fmt.Errorf("%q is not a kind a reconcile knows (%s)", k, kindNames(ReconcileKinds()))
		}
		switch {
		case r.has(k):
		case k == models.KindSubscriptionItem:
			return nil, fmt.Errorf("this reconcile has no billing to reconcile %s", k.Plural())
		default:
			return nil, fmt.Errorf("this reconcile has no organizations and memberships to reconcile %s", k.Plural())
		}
	}
	var out []*source
	for _, k := range ReconcileKinds() {
		if slices.Contains(kinds, k) {
			out = append(out, sourceOf[k](r))
		}
	}
	return out, nil
}

// kindNames are kinds, comma-separated.
func kindNames(kinds []models.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func (r *Reconciler) userSource() *source {
	return &source{
		kind:  models.KindUser,
		list:  r.Clerk.ListUsers,
		check: r.Clerk.GetUser,
		stored: func(ctx context.Context, id string) (*models.Version, error) {
			return models.VersionOf(r.Users.Get(ctx, id))
		},
		walk: r.Users.WalkActive,
		deletion: func(_ context.Context, id, runID string, at time.Time) (Delivery, error) {
			return clerkDeletion(models.KindUser, id, "", "", runID, at)
		},
	}
}

func (r *Reconciler) orgSource() *source {
	o := r.Orgs
	return &source{
		kind:  models.KindOrganization,
		list:  o.Clerk.ListOrganizations,
		check: o.Clerk.GetOrganization,
		stored: func(ctx context.Context, id string) (*models.Version, error) {
			return models.VersionOf(o.Organizations.Get(ctx, id))
		},
		walk: o.Organizations.WalkActive,
		deletion: func(_ context.Context, id, runID string, at time.Time) (Delivery, error) {
			return clerkDeletion(models.KindOrganization, id, "", "", runID, at)
		},
	}
}

// userMembershipsPage is the page of a user's memberships a re-check
// reads: Clerk's largest, so that nearly every user's fit in one.
const userMembershipsPage = 500

func (r *Reconciler) membershipSource() *source {
	o := r.Orgs
	local := func(ctx context.Context, id string) (models.Membership, error) {
		m, err := o.Memberships.Get(ctx, id)
		if err != nil {
			// Not ErrNotFound: that would say Clerk no longer has it.
			return models.Membership{}, fmt.Errorf("read membership %q here: %v", id, err)
		}
		return m, nil
	}
	return &source{
		kind: models.KindMembership,
		list: o.Clerk.ListMemberships,
		// Clerk has no GET of one membership: it is looked for among its
		// user's (GET /users/{id}/organization_memberships).
		check: func(ctx context.Context, id string) (json.RawMessage, error) {
			m, err := local(ctx, id)
			if err != nil {
				return nil, err
			}
			if m.UserID == "" {
				return nil, fmt.Errorf("membership %q has no user to ask Clerk about", id)
			}
			for offset := 0; ; offset += userMembershipsPage {
				page, err := o.Clerk.UserMemberships(ctx, m.UserID, offset, userMembershipsPage)
				if err != nil {
					// ErrNotFound too: Clerk does not know the user, nor its memberships.
					return nil, err
				}
				for _, raw := range page {
					var got struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(raw, &got) == nil && got.ID == id {
						return raw, nil
					}
				}
				switch {
				case len(page) == userMembershipsPage:
				case offset > 0:
					// Offset paging is not a snapshot: a membership of the
					// user deleted meanwhile may have hidden this one.
					return nil, fmt.Errorf("user %q has more than %d memberships: membership %q is not checked", m.UserID, userMembershipsPage, id)
				default:
					return nil, fmt.Errorf("membership %q is not among its user's: %w", id, models.ErrNotFound)
				}
			}
		},
		stored: func(ctx context.Context, id string) (*models.Version, error) {
			return models.VersionOf(o.Memberships.Get(ctx, id))
		},
		walk: o.Memberships.WalkActive,
		deletion: func(ctx context.Context, id, runID string, at time.Time) (Delivery, error) {
			m, err := local(ctx, id)
			if err != nil {
				return Delivery{}, err
			}
			return clerkDeletion(models.KindMembership, id, m.OrgID, m.UserID, runID, at)
		},
	}
}

// invitationSource is the organization invitations: their states are
// applied, as the webhook of each one's status would carry them, and none
// is deleted: Clerk never deletes one (its organization's deletion does,
// here, as a webhook's). Clerk's list is in creation order: an invitation
// sent during the listing comes last.
func (r *Reconciler) invitationSource() *source {
	o := r.Orgs
	return &source{
		kind: models.KindInvitation,
		list: o.Clerk.ListInvitations,
		stored: func(ctx context.Context, id string) (*models.Version, error) {
			return models.VersionOf(o.Invitations.Get(ctx, id))
		},
	}
}

// subscriptionItemSource is Clerk Billing's subscription items: their
// states are applied, as subscriptionItem.updated webhooks carrying them
// would be (each payer's plan recomputed), and none is deleted: Clerk
// never deletes one (it ends, cancels or abandons it). Clerk's list is
// the newest first: an item created during the listing shifts the pages
// after it and makes an item be read twice (the second time a
// duplicate), never skipped.
func (r *Reconciler) subscriptionItemSource() *source {
	b := r.Billing
	return &source{
		kind: models.KindSubscriptionItem,
		list: b.Clerk.ListSubscriptionItems,
		// The store reads items by payer: the item is looked for among
		// the payer's newest models.MaxPayerItems. One that moved from
		// another payer, or a payer's beyond those, is taken for unknown
		// here: a dry run counts it as would create.
		storedOf: func(ctx context.Context, ch models.Change) (*models.Version, error) {
			it, ok := ch.(models.SubscriptionItemChange)
			if !ok {
				return nil, fmt.Errorf("%T is not a subscription item's state", ch)
			}
			items, err := b.Billing.Items(ctx, it.Payer)
			if err != nil {
				return nil, err
			}
			for _, stored := range items {
				if stored.ItemID == it.ItemID {
					v := stored.Version()
					return &v, nil
				}
			}
			return nil, nil
		},
	}
}
