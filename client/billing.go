package client

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// Payer is who pays in Clerk Billing: a user or an organization.
type Payer struct {
	Kind string `json:"kind"` // "user" or "organization"
	ID   string `json:"id"`
}

// BillingPayer is the payer of a billing read.
type BillingPayer struct {
	Payer
	// InCopy is false when the copy holds the payer's billing but not the
	// user or organization itself: its subscription came before its
	// user.created, or no backfill brought it in yet.
	InCopy bool `json:"inCopy"`
}

// BillingPlan is a plan of Clerk Billing.
type BillingPlan struct {
	ID       string `json:"id"`
	Slug     string `json:"slug"`
	Name     string `json:"name"`
	Amount   *int64 `json:"amount"`
	Currency string `json:"currency,omitempty"`
}

// Plan is a payer's plan, as usersync computes it from the payer's
// subscription items.
type Plan struct {
	// Status is active, past_due, canceled, pending (between a plan
	// change's two events) or ended.
	Status            string        `json:"status"`
	Plan              *BillingPlan  `json:"plan"`
	ItemID            string        `json:"itemId,omitempty"`
	FreeTrial         bool          `json:"freeTrial"`
	PeriodEnd         *time.Time    `json:"periodEnd"`
	CancelAtPeriodEnd bool          `json:"cancelAtPeriodEnd"`
	Seats             *int64        `json:"seats"` // nil: unlimited
	Upcoming          *UpcomingPlan `json:"upcoming"`
	// UpdatedAt is when usersync last changed the plan.
	UpdatedAt time.Time `json:"updatedAt"`
}

// UpcomingPlan is the plan a payer moves to at the end of its period.
type UpcomingPlan struct {
	Plan        BillingPlan `json:"plan"`
	ItemID      string      `json:"itemId"`
	PeriodStart *time.Time  `json:"periodStart"`
	Seats       *int64      `json:"seats"`
	FreeTrial   bool        `json:"freeTrial"`
}

// SubscriptionItem is one item of a payer's subscription, as its billing
// read lists it.
type SubscriptionItem struct {
	ID             string      `json:"id"`
	SubscriptionID string      `json:"subscriptionId,omitempty"`
	Status         string      `json:"status"`
	Plan           BillingPlan `json:"plan"`
	FreeTrial      bool        `json:"freeTrial"`
	PeriodStart    *time.Time  `json:"periodStart"`
	PeriodEnd      *time.Time  `json:"periodEnd"`
	Interval       string      `json:"interval,omitempty"`
	Seats          *int64      `json:"seats"`
	// SourceUpdatedAt is Clerk's updated_at of the item.
	SourceUpdatedAt time.Time `json:"sourceUpdatedAt"`
}

// Billing is a payer's Clerk Billing: its plan (nil: none) and the newest
// state of each of its items, the newest first.
type Billing struct {
	Payer BillingPayer       `json:"payer"`
	Plan  *Plan              `json:"plan"`
	Items []SubscriptionItem `json:"items"`
}

// PlanChange is a payer whose plan changed, in the plans' change feed.
type PlanChange struct {
	Payer Payer `json:"payer"`
	Plan  *Plan `json:"plan"`
	// UpdatedAt is when usersync last changed the plan: the feed's order.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Subscription is a Clerk Billing subscription (an admin's read).
type Subscription struct {
	ID              string     `json:"id"`
	Payer           Payer      `json:"payer"`
	Status          string     `json:"status"`
	ActiveAt        *time.Time `json:"activeAt"`
	CanceledAt      *time.Time `json:"canceledAt"`
	EndedAt         *time.Time `json:"endedAt"`
	PastDueAt       *time.Time `json:"pastDueAt"`
	LatestPaymentID string     `json:"latestPaymentId,omitempty"`
	PaymentSourceID string     `json:"paymentSourceId,omitempty"`
	SourceCreatedAt *time.Time `json:"sourceCreatedAt"`
	SourceUpdatedAt time.Time  `json:"sourceUpdatedAt"`
	LastEventID     string     `json:"lastEventId"`
	CreatedAt       time.Time  `json:"createdAt"`
	UpdatedAt       time.Time  `json:"updatedAt"`
}

// PaymentAttempt is a Clerk Billing payment attempt (an admin's read).
type PaymentAttempt struct {
	ID                string     `json:"id"`
	PaymentID         string     `json:"paymentId"`
	Payer             Payer      `json:"payer"`
	Status            string     `json:"status"`
	ChargeType        string     `json:"chargeType,omitempty"`
	PaidAt            *time.Time `json:"paidAt"`
	FailedAt          *time.Time `json:"failedAt"`
	FailedCode        string     `json:"failedCode,omitempty"`
	FailedDeclineCode string     `json:"failedDeclineCode,omitempty"`
	// Totals are Clerk's, as it sent them; null when it sent none.
	Totals              json.RawMessage `json:"totals"`
	SubscriptionItemIDs []string        `json:"subscriptionItemIds"`
	SourceCreatedAt     *time.Time      `json:"sourceCreatedAt"`
	SourceUpdatedAt     time.Time       `json:"sourceUpdatedAt"`
	LastEventID         string          `json:"lastEventId"`
	CreatedAt           time.Time       `json:"createdAt"`
	UpdatedAt           time.Time       `json:"updatedAt"`
}

// SubscriptionQuery filters the list of subscriptions.
type SubscriptionQuery struct {
	Payer  *Payer // one payer's
	Status string // Clerk's status: active, past_due…
	// Limit is the subscriptions per page, 1 to 200; 0: 200.
	Limit int
}

// PaymentAttemptQuery filters the list of payment attempts.
type PaymentAttemptQuery struct {
	PaymentID string // one payment's (cpa_…)
	Payer     *Payer // one payer's
	// Limit is the attempts per page, 1 to 200; 0: 200.
	Limit int
}

// UserBilling returns a user's Clerk Billing; IsNotFound(err) when
// usersync knows no such user.
func (c *Client) UserBilling(ctx context.Context, userID string) (Billing, error) {
	return get[Billing](ctx, c, "/v1/users/"+url.PathEscape(userID)+"/billing", nil)
}

// OrganizationBilling returns an organization's Clerk Billing.
func (c *Client) OrganizationBilling(ctx context.Context, orgID string) (Billing, error) {
	return get[Billing](ctx, c, "/v1/organizations/"+url.PathEscape(orgID)+"/billing", nil)
}

// PlanChanges is the plans' change feed: each payer whose plan changed,
// oldest change first.
func (c *Client) PlanChanges(o FeedOptions) *Feed[PlanChange] {
	return newFeed[PlanChange](c, "/v1/billing/plans", o)
}

// Subscription returns a subscription (an admin key).
func (c *Client) Subscription(ctx context.Context, subscriptionID string) (Subscription, error) {
	return get[Subscription](ctx, c, "/v1/billing/subscriptions/"+url.PathEscape(subscriptionID), nil)
}

// Subscriptions is the list of subscriptions (an admin key).
func (c *Client) Subscriptions(q SubscriptionQuery) *List[Subscription] {
	v := q.Payer.values()
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	return newList[Subscription](c, "/v1/billing/subscriptions", v, q.Limit)
}

// PaymentAttempts is the list of payment attempts (an admin key).
func (c *Client) PaymentAttempts(q PaymentAttemptQuery) *List[PaymentAttempt] {
	v := q.Payer.values()
	if q.PaymentID != "" {
		v.Set("paymentId", q.PaymentID)
	}
	return newList[PaymentAttempt](c, "/v1/billing/payment-attempts", v, q.Limit)
}

// values are the query parameters of a filter by p (none when nil).
func (p *Payer) values() url.Values {
	v := url.Values{}
	if p != nil {
		v.Set("payerKind", p.Kind)
		v.Set("payerId", p.ID)
	}
	return v
}
