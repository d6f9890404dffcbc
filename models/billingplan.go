package models

import "time"

// PlanStatus says what a payer's subscription items make of its plan.
type PlanStatus string

// Plan statuses.
const (
	// PlanActive: an active item gives the plan.
	PlanActive PlanStatus = "active"
	// PlanPastDue: a past_due item gives the plan: a payment failed, and
	// the payer keeps the plan while Clerk retries it.
	PlanPastDue PlanStatus = "past_due"
	// PlanCanceled: a canceled item gives the plan until its period_end
	// (CanceledAtPeriodEnd); no item is active or past_due.
	PlanCanceled PlanStatus = "canceled"
	// PlanPending: the payer has items, but none gives a plan now: the
	// moment between a plan change's two events (the old item ended, the
	// new one not arrived yet), or a first checkout not paid yet. Plan is
	// the last plan that was in force (that of the most recently ended
	// item), nil when there was none. It is never read as the free plan.
	PlanPending PlanStatus = "pending"
	// PlanNone: the payer has no item at all.
	PlanNone PlanStatus = "none"
)

// PayerPlan is a payer's plan as its subscription items say it (PlanOf).
type PayerPlan struct {
	// Payer is the payer the items belong to (its Kind and ID); zero when
	// there are no items.
	Payer  Payer
	Status PlanStatus
	// Plan is the plan in force (active, past_due, canceled), or the last
	// one that was (pending); nil when there is none.
	Plan *BillingPlan
	// ItemID is the item Plan comes from; "" when Plan is nil.
	ItemID string
	// FreeTrial: the plan in force is a free trial.
	FreeTrial bool
	// PeriodEnd is the end of the current period of the plan in force; nil
	// when it has none (the default free plan) and when pending.
	PeriodEnd *time.Time
	// CanceledAtPeriodEnd: the plan in force is canceled, and ends at
	// PeriodEnd (Status is PlanCanceled).
	CanceledAtPeriodEnd bool
	// Seats is the seats' quantity of Plan; nil: unlimited.
	Seats *int64
	// Upcoming is the plan queued to follow the current period (a deferred
	// downgrade, or the free plan after a canceled paid one); nil when
	// none.
	Upcoming *UpcomingPlan
}

// UpcomingPlan is a plan queued by an upcoming item.
type UpcomingPlan struct {
	Plan        BillingPlan
	ItemID      string
	PeriodStart *time.Time // when it starts; nil when Clerk did not say
	Seats       *int64     // nil: unlimited
	FreeTrial   bool
}

// PlanOf returns a payer's plan as its items say it: items are the newest
// stored state of each of one payer's subscription items (each item once),
// in any order. It is a pure function of the items: it reads no clock, and
// the order of items does not change it, so that every order of arrival of
// the same events gives the same plan.
//
// Clerk's rules, as PlanOf applies them:
//   - an active or past_due item gives the plan (there is at most one
//     active item per payer and plan);
//   - a canceled item still gives its plan until period_end, and is the
//     plan when no item is active or past_due (CanceledAtPeriodEnd);
//   - an upcoming item is the plan that follows (Upcoming), not the
//     current one; an abandoned item is an upcoming one dropped, and
//     counts for nothing; an incomplete item is not a plan yet;
//   - ended (or expired) items are history; when no item gives a plan but there are
//     items, the plan is pending with that of the most recently ended
//     item.
//
// Ties, which Clerk's rules leave open (two items of different plans
// active at once, between a plan change's two events), are broken the
// same way everywhere: the item with the newest updated_at, then the
// larger item id, then the larger event id. Active and past_due rank
// together; a canceled item only counts when neither exists. The payer is
// that of the item so chosen (of the newest item when none gives a plan).
func PlanOf(items []SubscriptionItem) PayerPlan {
	var current, canceled, ended, upcoming, newest *SubscriptionItem
	for i := range items {
		it := &items[i]
		newest = later(newest, it)
		switch it.Status {
		case ItemActive, ItemPastDue:
			current = later(current, it)
		case ItemCanceled:
			canceled = later(canceled, it)
		case ItemEnded, ItemExpired:
			ended = later(ended, it)
		case ItemUpcoming:
			upcoming = later(upcoming, it)
		}
	}
	if newest == nil {
		return PayerPlan{Status: PlanNone}
	}
	if current == nil {
		current = canceled
	}
	var p PayerPlan
	switch {
	case current != nil:
		plan := current.Plan.clone()
		p = PayerPlan{
			Payer: current.Payer, Status: PlanStatus(current.Status), Plan: &plan, ItemID: current.ItemID,
			FreeTrial: current.IsFreeTrial, PeriodEnd: clone(current.PeriodEnd), Seats: clone(current.Seats),
			CanceledAtPeriodEnd: current.Status == ItemCanceled,
		}
	case ended != nil:
		plan := ended.Plan.clone()
		p = PayerPlan{Payer: ended.Payer, Status: PlanPending, Plan: &plan, ItemID: ended.ItemID, Seats: clone(ended.Seats)}
	default:
		p = PayerPlan{Payer: newest.Payer, Status: PlanPending}
	}
	if upcoming != nil {
		p.Upcoming = &UpcomingPlan{Plan: upcoming.Plan.clone(), ItemID: upcoming.ItemID, PeriodStart: clone(upcoming.PeriodStart),
			Seats: clone(upcoming.Seats), FreeTrial: upcoming.IsFreeTrial}
	}
	return p
}

// later returns whichever of a (nil: none) and b ranks first by PlanOf's
// tie-breaks: the newest updated_at, then the larger item id, then the
// larger event id.
func later(a, b *SubscriptionItem) *SubscriptionItem {
	switch {
	case a == nil:
		return b
	case !a.SourceUpdatedAt.Equal(b.SourceUpdatedAt):
		if b.SourceUpdatedAt.After(a.SourceUpdatedAt) {
			return b
		}
		return a
	case a.ItemID != b.ItemID:
		if b.ItemID > a.ItemID {
			return b
		}
		return a
	case b.LastEventID > a.LastEventID:
		return b
	}
	return a
}

// clone returns a copy of *v (nil for nil): a plan shares nothing with
// the items it was read from.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}

func (p BillingPlan) clone() BillingPlan {
	p.Amount = clone(p.Amount)
	return p
}
