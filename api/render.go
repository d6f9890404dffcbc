package api

import (
	"context"
	"encoding/json"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
)

// renderers render an object of each kind as an admin's read shows it
// (a tombstone too), for outbound webhooks' data: the one place that maps
// a kind to its REST shape for them.
var renderers = map[models.Kind]func(ctx context.Context, s repository.Store, id string) (any, bool, error){
	models.KindUser: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		u, err := s.Users().Get(ctx, id)
		return newUserJSON(u), u.Deleted(), err
	},
	models.KindOrganization: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		o, err := s.Organizations().Get(ctx, id)
		return newOrganizationJSON(o), o.DeletedAt != nil, err
	},
	models.KindMembership: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		m, err := s.Memberships().Get(ctx, id)
		return newMembershipJSON(m, false), m.DeletedAt != nil, err
	},
	models.KindSubscription: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		sub, err := s.Billing().Subscription(ctx, id)
		return newSubscriptionJSON(sub), false, err
	},
	models.KindSubscriptionItem: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		it, err := s.Billing().Item(ctx, id)
		j := newItemJSON(it)
		return struct {
			itemJSON
			Payer payerJSON `json:"payer"`
		}{j, payerJSON{Kind: string(it.Payer.Kind), ID: it.Payer.ID}}, false, err
	},
	models.KindPaymentAttempt: func(ctx context.Context, s repository.Store, id string) (any, bool, error) {
		a, err := s.Billing().PaymentAttempt(ctx, id)
		return newPaymentAttemptJSON(a), false, err
	},
}

// Renderer renders the objects of store for outbound webhooks: each as
// the REST API shows it to an admin. A kind without a renderer is
// models.ErrNotFound, and its deliveries are dropped.
func Renderer(store repository.Store) outbound.Renderer {
	return func(ctx context.Context, k models.Kind, id string) (json.RawMessage, bool, error) {
		render, ok := renderers[k]
		if !ok {
			return nil, false, models.Public(models.ErrNotFound, "usersync has no REST shape of %s", k.Plural())
		}
		v, deleted, err := render(ctx, store, id)
		if err != nil {
			return nil, false, err
		}
		b, err := json.Marshal(v)
		return b, deleted, err
	}
}
