package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// BillingReader reads a payer's plan and subscription items, one
// subscription, pages of payment attempts and subscriptions, and the
// plans' change feed (repository.Billing).
type BillingReader interface {
	Plan(ctx context.Context, payer models.Payer) (models.StoredPlan, error)
	Items(ctx context.Context, payer models.Payer) ([]models.SubscriptionItem, error)
	Subscription(ctx context.Context, subscriptionID string) (models.Subscription, error)
	PaymentAttempts(ctx context.Context, f models.PaymentAttemptFilter) (models.PaymentAttemptPage, error)
	Subscriptions(ctx context.Context, f models.SubscriptionFilter) (models.SubscriptionPage, error)
	PlanChanges(ctx context.Context, f models.ChangeFilter) (models.PlanPage, error)
}

// PlanEnded is the status a plan reads with when it no longer gives
// anything: its payer is deleted, or it stayed pending (no item in force
// after the old one ended) longer than the grace period.
const PlanEnded models.PlanStatus = "ended"

// DefaultBillingGrace is how long a pending plan (between a plan change's
// two events) reads as pending, with the plan that was in force, before it
// reads as ended.
const DefaultBillingGrace = 5 * time.Minute

type billingRequest struct {
	UserID string `param:"userId" validate:"omitempty,max=128"`
	OrgID  string `param:"orgId" validate:"omitempty,max=128"`
}

// userBilling answers GET /v1/users/{userId}/billing: the user's plan and
// subscription items. A user the copy does not hold is answered from its
// billing when the copy holds some (payer.inCopy false), and is not found
// otherwise; a known one without billing has a null plan.
func (s *server) userBilling(c echo.Context) error {
	var req billingRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	u, err := s.users.Get(c.Request().Context(), req.UserID)
	return s.payerBilling(c, models.Payer{Kind: models.KindUser, ID: req.UserID}, err, err == nil && u.Deleted())
}

// organizationBilling answers GET /v1/organizations/{orgId}/billing, as
// userBilling does for a user.
func (s *server) organizationBilling(c echo.Context) error {
	var req billingRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	o, err := s.orgs.Get(c.Request().Context(), req.OrgID)
	return s.payerBilling(c, models.Payer{Kind: models.KindOrganization, ID: req.OrgID}, err, err == nil && o.Deleted())
}

// payerBilling answers the billing of payer, whose read from the copy
// failed with readErr (nil: the copy holds it); gone says that the payer
// is deleted, whose plan then reads as ended. A payer the copy does not
// hold is answered from its billing alone: its subscription came before
// its user.created (a Svix retry), or it was created before usersync ran
// and no backfill brought it in yet.
func (s *server) payerBilling(c echo.Context, payer models.Payer, readErr error, gone bool) error {
	ctx := c.Request().Context()
	r := billingJSON{Payer: billingPayerJSON{Kind: string(payer.Kind), ID: payer.ID, InCopy: readErr == nil}, Items: []itemJSON{}}
	if readErr != nil && !errors.Is(readErr, models.ErrNotFound) {
		return readErr
	}
	p, err := s.billing.Plan(ctx, payer)
	switch {
	case errors.Is(err, models.ErrNotFound) && readErr != nil:
		return notFound(readErr, string(payer.Kind), payer.ID) // neither the payer nor its billing
	case errors.Is(err, models.ErrNotFound):
		return c.JSON(http.StatusOK, r) // no billing: a null plan
	case err != nil:
		return err
	}
	r.Plan = newPlanJSON(p, gone, s.now(), s.billingGrace)
	items, err := s.billing.Items(ctx, payer)
	if err != nil {
		return err
	}
	for _, it := range items {
		r.Items = append(r.Items, newItemJSON(it))
	}
	return c.JSON(http.StatusOK, r)
}

type billingJSON struct {
	Payer billingPayerJSON `json:"payer"`
	Plan  *planJSON        `json:"plan"`
	Items []itemJSON       `json:"items"`
}

// billingPayerJSON is the payer of a billing read: InCopy is false when
// the copy holds the payer's billing but not the user or organization.
type billingPayerJSON struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	InCopy bool   `json:"inCopy"`
}

type payerJSON struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

type billingPlanJSON struct {
	ID       string `json:"id"`
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	Amount   *int64 `json:"amount"`
	Currency string `json:"currency,omitempty"`
}

func newBillingPlanJSON(p models.BillingPlan) billingPlanJSON {
	return billingPlanJSON{ID: p.ID, Slug: p.Slug, Name: p.Name, Amount: p.Amount, Currency: p.Currency}
}

type planJSON struct {
	Status            models.PlanStatus `json:"status"`
	Plan              *billingPlanJSON  `json:"plan"`
	ItemID            string            `json:"itemId,omitempty"`
	FreeTrial         bool              `json:"freeTrial"`
	PeriodEnd         *string           `json:"periodEnd"`
	CancelAtPeriodEnd bool              `json:"cancelAtPeriodEnd"`
	Seats             *int64            `json:"seats"`
	Upcoming          *upcomingJSON     `json:"upcoming"`
	UpdatedAt         string            `json:"updatedAt"`
}

type upcomingJSON struct {
	Plan        billingPlanJSON `json:"plan"`
	ItemID      string          `json:"itemId"`
	PeriodStart *string         `json:"periodStart"`
	Seats       *int64          `json:"seats"`
	FreeTrial   bool            `json:"freeTrial"`
}

// newPlanJSON is the plan p as read at now: ended when its payer is gone
// (gone) or when it has been pending longer than grace.
func newPlanJSON(p models.StoredPlan, gone bool, now time.Time, grace time.Duration) *planJSON {
	j := &planJSON{Status: p.Status, ItemID: p.ItemID, FreeTrial: p.FreeTrial, PeriodEnd: optTime(p.PeriodEnd),
		CancelAtPeriodEnd: p.CanceledAtPeriodEnd, Seats: p.Seats, UpdatedAt: formatTime(p.UpdatedAt)}
	if p.Plan != nil {
		bp := newBillingPlanJSON(*p.Plan)
		j.Plan = &bp
	}
	if u := p.Upcoming; u != nil {
		j.Upcoming = &upcomingJSON{Plan: newBillingPlanJSON(u.Plan), ItemID: u.ItemID, PeriodStart: optTime(u.PeriodStart),
			Seats: u.Seats, FreeTrial: u.FreeTrial}
	}
	if gone || (p.Status == models.PlanPending && now.Sub(p.UpdatedAt) > grace) {
		j.Status, j.Upcoming = PlanEnded, nil
	}
	return j
}

type itemJSON struct {
	ID             string          `json:"id"`
	SubscriptionID string          `json:"subscriptionId,omitempty"`
	Status         string          `json:"status"`
	Plan           billingPlanJSON `json:"plan"`
	FreeTrial      bool            `json:"freeTrial"`
	PeriodStart    *string         `json:"periodStart"`
	PeriodEnd      *string         `json:"periodEnd"`
	Interval       string          `json:"interval,omitempty"`
	Seats          *int64          `json:"seats"`
	SourceUpdateAt string          `json:"sourceUpdatedAt"`
}

func newItemJSON(it models.SubscriptionItem) itemJSON {
	return itemJSON{ID: it.ItemID, SubscriptionID: it.SubscriptionID, Status: string(it.Status), Plan: newBillingPlanJSON(it.Plan),
		FreeTrial: it.IsFreeTrial, PeriodStart: optTime(it.PeriodStart), PeriodEnd: optTime(it.PeriodEnd),
		Interval: it.Interval, Seats: it.Seats, SourceUpdateAt: formatTime(it.SourceUpdatedAt)}
}
