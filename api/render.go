package api

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
)

// renderers render an object of each kind as an admin's read shows it
// (a tombstone too), for outbound webhooks' data: the one place that maps
// a kind to its REST shape for them.
var renderers = map[models.Kind]func(ctx context.Context, env renderEnv, id string) (any, bool, error){
	models.KindUser: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		u, err := env.s.Users().Get(ctx, id)
		return newUserJSON(u), u.Deleted(), err
	},
	models.KindOrganization: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		o, err := env.s.Organizations().Get(ctx, id)
		return newOrganizationJSON(o), o.DeletedAt != nil, err
	},
	models.KindMembership: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		m, err := env.s.Memberships().Get(ctx, id)
		return newMembershipJSON(m, false), m.DeletedAt != nil, err
	},
	models.KindInvitation: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		i, err := env.s.Invitations().Get(ctx, id)
		return newInvitationJSON(i, env.now().UTC()), i.DeletedAt != nil, err
	},
	models.KindSubscription: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		sub, err := env.s.Billing().Subscription(ctx, id)
		return newSubscriptionJSON(sub), false, err
	},
	models.KindSubscriptionItem: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		it, err := env.s.Billing().Item(ctx, id)
		j := newItemJSON(it)
		return struct {
			itemJSON
			Payer payerJSON `json:"payer"`
		}{j, payerJSON{Kind: string(it.Payer.Kind), ID: it.Payer.ID}}, false, err
	},
	models.KindPaymentAttempt: func(ctx context.Context, env renderEnv, id string) (any, bool, error) {
		a, err := env.s.Billing().PaymentAttempt(ctx, id)
		return newPaymentAttemptJSON(a), false, err
	},
	models.KindPlan: renderPlan,
}

// renderEnv is what renderers read: the store, the clock, and the grace
// of a pending plan.
type renderEnv struct {
	s     repository.Store
	now   func() time.Time
	grace time.Duration
}

// planChangeJSON is a plan.changed's data: the payer and its plan as GET
// /v1/users/{id}/billing shows it (null: no billing), and the plan the
// endpoint received before (null: none), which the dispatcher adds.
type planChangeJSON struct {
	Payer payerJSON `json:"payer"`
	Plan  *planJSON `json:"plan"`
}

// renderPlan renders the plan of the payer id (a user_… or org_… id). A
// plan pending between a plan change's two events is not settled: it is
// rendered once an item settles it, or the grace has passed.
func renderPlan(ctx context.Context, env renderEnv, id string) (any, bool, error) {
	payer := models.Payer{Kind: models.KindUser, ID: id}
	var gone bool
	if models.KindOrganization.IsID(id) {
		payer.Kind = models.KindOrganization
		o, err := env.s.Organizations().Get(ctx, id)
		gone = err == nil && o.Deleted()
	} else {
		u, err := env.s.Users().Get(ctx, id)
		gone = err == nil && u.Deleted()
	}
	j := planChangeJSON{Payer: payerJSON{Kind: string(payer.Kind), ID: payer.ID}}
	p, err := env.s.Billing().Plan(ctx, payer)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return j, false, nil
	case err != nil:
		return nil, false, err
	}
	j.Plan = newPlanJSON(p, gone, env.now(), env.grace)
	if j.Plan.Status == models.PlanPending {
		return nil, false, &outbound.WaitError{Until: p.UpdatedAt.Add(env.grace + time.Millisecond)}
	}
	return j, false, nil
}

// Renderer renders the objects of store for outbound webhooks: each as
// the REST API shows it to an admin, a payer's plan as its billing read
// does at now (pending for billingGrace; 0: DefaultBillingGrace). A kind without a renderer is
// models.ErrNotFound, and its deliveries are dropped.
func Renderer(store repository.Store, now func() time.Time, billingGrace time.Duration) outbound.Renderer {
	if now == nil {
		now = time.Now
	}
	if billingGrace <= 0 {
		billingGrace = DefaultBillingGrace
	}
	env := renderEnv{s: store, now: now, grace: billingGrace}
	return func(ctx context.Context, k models.Kind, id string) (json.RawMessage, bool, error) {
		render, ok := renderers[k]
		if !ok {
			return nil, false, models.Public(models.ErrNotFound, "usersync has no REST shape of %s", k.Plural())
		}
		v, deleted, err := render(ctx, env, id)
		if err != nil {
			return nil, false, err
		}
		b, err := json.Marshal(v)
		return b, deleted, err
	}
}
