package models

import (
	"encoding/json"
	"time"
)

// What a store keeps of Clerk Billing, and what its reads return.

// MaxPayerItems bounds the items a read of one payer returns (the newest
// first): each plan a payer was ever on is one item, so a payer has few.
const MaxPayerItems = 200

// Subscription is a store's copy of one Clerk subscription, as its newest
// state applied says it (its items are kept as items).
type Subscription struct {
	SubscriptionID  string
	Payer           Payer
	Status          string
	ActiveAt        *time.Time
	CanceledAt      *time.Time
	EndedAt         *time.Time
	PastDueAt       *time.Time
	LatestPaymentID string
	PaymentSourceID string
	SourceCreatedAt *time.Time
	SourceUpdatedAt time.Time
	LastEventID     string
	CreatedAt       time.Time // usersync's first write of it
	UpdatedAt       time.Time // usersync's last write of it
}

// Version returns the version of the subscription's stored state.
func (s Subscription) Version() Version {
	return Version{SourceTime: s.SourceUpdatedAt, EventID: s.LastEventID}
}

// PaymentAttempt is a store's copy of one Clerk payment attempt.
type PaymentAttempt struct {
	AttemptID           string
	PaymentID           string
	Payer               Payer
	Status              string
	ChargeType          string
	PaidAt              *time.Time
	FailedAt            *time.Time
	FailedCode          string
	FailedDeclineCode   string
	Totals              json.RawMessage // nil when Clerk sent none
	SubscriptionItemIDs []string
	SourceCreatedAt     *time.Time
	SourceUpdatedAt     time.Time
	LastEventID         string
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Version returns the version of the attempt's stored state.
func (a PaymentAttempt) Version() Version {
	return Version{SourceTime: a.SourceUpdatedAt, EventID: a.LastEventID}
}

// StoredPlan is a payer's plan as a store keeps it: PlanOf of the payer's
// stored items, recomputed in the write that applies one of them, and
// when it last changed.
type StoredPlan struct {
	PayerPlan
	// UpdatedAt is usersync's time of the last write that changed the
	// plan (not of every item write: one that leaves the plan as it was
	// does not move it).
	UpdatedAt time.Time
}

// PlanPage is one page of the plans' change feed (Billing.PlanChanges):
// payers' plans, oldest change (UpdatedAt) first, then the payer.
type PlanPage struct {
	Plans      []StoredPlan
	NextCursor string // always set: where the next poll starts
}

// PaymentAttemptFilter selects payment attempts: those of one payment
// (PaymentID), or of one payer, or all, newest Clerk time first.
type PaymentAttemptFilter struct {
	PaymentID string
	Payer     *Payer
	After     string // cursor
	Limit     int
}

// PaymentAttemptPage is one page of payment attempts.
type PaymentAttemptPage struct {
	Attempts   []PaymentAttempt
	NextCursor string // "" on the last page
}

// SubscriptionFilter selects subscriptions: those of one payer (Payer),
// in one status (Status, Clerk's value as stored), both, or all, newest
// Clerk time first.
type SubscriptionFilter struct {
	Payer  *Payer
	Status string
	After  string // cursor
	Limit  int
}

// SubscriptionPage is one page of subscriptions.
type SubscriptionPage struct {
	Subscriptions []Subscription
	NextCursor    string // "" on the last page
}
