package models

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Clerk Billing: subscriptions, subscription items and payment attempts.
//
// Their kinds are described here (BillingKindSpecs, the last rows of the
// kinds table) and decoded here (DecodeBilling).

// Kinds of Clerk Billing objects.
const (
	KindSubscription     Kind = "subscription"
	KindSubscriptionItem Kind = "subscription_item"
	KindPaymentAttempt   Kind = "payment_attempt"
)

// Clerk's billing event types: every type of Clerk's webhook catalog, with
// the names the pastDue types had before Clerk renamed them (stored events
// and older senders carry them).
const (
	TypeSubscriptionCreated       = "subscription.created"
	TypeSubscriptionUpdated       = "subscription.updated" // any change but the status
	TypeSubscriptionActive        = "subscription.active"
	TypeSubscriptionPastDue       = "subscription.pastDue"
	TypeSubscriptionPastDueLegacy = "subscription.past_due"

	TypeSubscriptionItemCreated         = "subscriptionItem.created" // in Clerk's changelog and SDK types
	TypeSubscriptionItemUpdated         = "subscriptionItem.updated"
	TypeSubscriptionItemActive          = "subscriptionItem.active"
	TypeSubscriptionItemCanceled        = "subscriptionItem.canceled"
	TypeSubscriptionItemUpcoming        = "subscriptionItem.upcoming"
	TypeSubscriptionItemEnded           = "subscriptionItem.ended"
	TypeSubscriptionItemAbandoned       = "subscriptionItem.abandoned"
	TypeSubscriptionItemIncomplete      = "subscriptionItem.incomplete"
	TypeSubscriptionItemPastDue         = "subscriptionItem.pastDue"
	TypeSubscriptionItemPastDueLegacy   = "subscriptionItem.past_due"
	TypeSubscriptionItemFreeTrialEnding = "subscriptionItem.freeTrialEnding"

	TypePaymentAttemptCreated = "paymentAttempt.created" // a pending attempt
	TypePaymentAttemptUpdated = "paymentAttempt.updated" // paid or failed
)

// Short types of the billing events, beyond created and updated. A short
// type is the Clerk type without its object; a camel-case name is written
// as the status it names (pastDue and its older name past_due are both
// past_due).
const (
	EventActive          EventType = "active"
	EventPastDue         EventType = "past_due"
	EventCanceled        EventType = "canceled"
	EventUpcoming        EventType = "upcoming"
	EventEnded           EventType = "ended"
	EventAbandoned       EventType = "abandoned"
	EventIncomplete      EventType = "incomplete"
	EventFreeTrialEnding EventType = "free_trial_ending"
	// EventOther is the short type of every billing event of a type
	// usersync does not know (IsUnknownBillingType): one bounded value,
	// whatever type a body names.
	EventOther EventType = "other"
)

// IsBillingType reports whether t is a type of Clerk Billing's objects
// (subscription.*, subscriptionItem.*, paymentAttempt.*), known to
// usersync or not: an event of a billing type usersync does not know is
// recognised as billing, to be acknowledged and recorded as such rather
// than taken for some other object's.
func IsBillingType(t string) bool { return billingPrefixKind(t) != "" }

// billingPrefixes are the prefixes of Clerk Billing's types, and the kind
// of each.
var billingPrefixes = []struct {
	prefix string
	kind   Kind
}{
	{"subscription.", KindSubscription}, {"subscriptionItem.", KindSubscriptionItem}, {"paymentAttempt.", KindPaymentAttempt},
}

// maxBillingType bounds a billing type usersync does not know but stores
// (IsUnknownBillingType): Clerk's are under 40 bytes; a longer type is no
// billing type, and is never written to the event log and its indexes.
const maxBillingType = 64

// billingPrefixKind returns the billing kind of t's prefix ("" when t is
// no billing type).
func billingPrefixKind(t string) Kind {
	if len(t) > maxBillingType {
		return ""
	}
	for _, p := range billingPrefixes {
		if rest, ok := strings.CutPrefix(t, p.prefix); ok && rest != "" {
			return p.kind
		}
	}
	return ""
}

// IsUnknownBillingType reports whether t is a billing type (IsBillingType)
// that the kinds table does not have: subscriptionItem.somethingNew. Such
// an event is stored, of the billing kind of its prefix and short type
// EventOther, and processed at once with OutcomeIgnored: never applied,
// never failed, never left stored.
func IsUnknownBillingType(t string) bool {
	return KindOf(t) == "" && billingPrefixKind(t) != ""
}

// IgnoredChange is the change of an event of a billing type usersync does
// not know: it carries no state. A store applies it by writing nothing,
// with OutcomeIgnored.
type IgnoredChange struct {
	Of         Kind // the billing kind of the type's prefix
	EventID    string
	SourceTime time.Time // data.updated_at when it has a usable one, else when it was received
	UserID     string    // the payer, when it is a user, as far as it can be read
	ObjectID   string    // data.id, as far as it can be read
}

// Kind is the billing kind of the event's type.
func (ch IgnoredChange) Kind() Kind { return ch.Of }

// Version is the event's: nothing orders by it.
func (ch IgnoredChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID}
}

// IDs are the payer (a user) and data.id, read as a failed event's are.
func (ch IgnoredChange) IDs() (userID, objectID string) { return ch.UserID, ch.ObjectID }

// ignoredChange returns the IgnoredChange of an event of a billing type
// usersync does not know. Only the body's limits are checked (its error
// wraps ErrInvalid, as for every event): nothing else of the data is read
// but its ids and updated_at, each only when it is usable.
func (e ClerkEvent) ignoredChange(eventID string, now time.Time) (Change, error) {
	if err := e.checkLimits(); err != nil {
		return nil, err
	}
	ch := IgnoredChange{Of: billingPrefixKind(e.Type), EventID: eventID, SourceTime: now.UTC().Truncate(time.Millisecond),
		UserID: e.UserID(), ObjectID: e.ObjectID()}
	var d struct {
		UpdatedAt json.RawMessage `json:"updated_at"`
	}
	var ms int64
	if json.Unmarshal(e.Data, &d) == nil && json.Unmarshal(d.UpdatedAt, &ms) == nil && ms > 0 {
		if t := time.UnixMilli(ms).UTC(); !t.After(now.Add(MaxFutureSkew)) {
			ch.SourceTime = t
		}
	}
	return ch, nil
}

// BillingKindSpecs returns the rows of the kinds table of Clerk Billing's
// three kinds, in the table's order (each decoded by DecodeBilling).
//
// The rows name their events' user (the payer, when it is a user: the
// event is found among the user's and erased with them) and object
// (data.id). None has a deletion: Clerk ends, cancels and abandons
// billing objects, and never deletes them, so none has parents whose
// deletions cascade to it either.
func BillingKindSpecs() []KindSpec {
	return []KindSpec{
		{
			Kind: KindSubscription, Plural: "subscriptions", IDPrefix: "csub_", Object: "commerce_subscription",
			Types: []TypeSpec{
				{TypeSubscriptionCreated, EventCreated}, {TypeSubscriptionUpdated, EventUpdated},
				{TypeSubscriptionActive, EventActive}, {TypeSubscriptionPastDue, EventPastDue},
				{TypeSubscriptionPastDueLegacy, EventPastDue},
			},
			Nests:  []Kind{KindSubscriptionItem}, // data.items
			userID: ClerkEvent.payerUserID, objectID: ClerkEvent.dataID,
		},
		{
			Kind: KindSubscriptionItem, Plural: "subscription_items", IDPrefix: "csub_item_", Object: "subscription_item",
			Types: []TypeSpec{
				{TypeSubscriptionItemCreated, EventCreated}, {TypeSubscriptionItemUpdated, EventUpdated},
				{TypeSubscriptionItemActive, EventActive}, {TypeSubscriptionItemCanceled, EventCanceled},
				{TypeSubscriptionItemUpcoming, EventUpcoming}, {TypeSubscriptionItemEnded, EventEnded},
				{TypeSubscriptionItemAbandoned, EventAbandoned}, {TypeSubscriptionItemIncomplete, EventIncomplete},
				{TypeSubscriptionItemPastDue, EventPastDue}, {TypeSubscriptionItemPastDueLegacy, EventPastDue},
				{TypeSubscriptionItemFreeTrialEnding, EventFreeTrialEnding},
			},
			userID: ClerkEvent.payerUserID, objectID: ClerkEvent.dataID,
		},
		{
			// A payment attempt is keyed by data.id, whose prefix Clerk does
			// not document (the decoder takes letters, digits and
			// underscores); its payment_id (cpa_…) is what a subscription's
			// latest_payment_id names. With no prefix, Kind.IsID refuses
			// every attempt id: set it before a route or reconcile checks
			// one.
			Kind: KindPaymentAttempt, Plural: "payment_attempts", IDPrefix: "", Object: "commerce_payment_attempt",
			Types: []TypeSpec{
				{TypePaymentAttemptCreated, EventCreated}, {TypePaymentAttemptUpdated, EventUpdated},
			},
			userID: ClerkEvent.payerUserID, objectID: ClerkEvent.dataID,
		},
	}
}

// billingKindOf returns the billing kind of Clerk type t and the short
// type of its events; false for any other type.
func billingKindOf(t string) (Kind, EventType, bool) {
	for _, spec := range BillingKindSpecs() {
		for _, ts := range spec.Types {
			if ts.Type == t {
				return spec.Kind, ts.Change, true
			}
		}
	}
	return "", "", false
}

// Bounds of what a billing object may carry, beyond the bounds of names
// (MaxName).
const (
	// MaxSubscriptionItems bounds the items of a subscription, and the
	// items a payment attempt pays for. A subscription lists every item it
	// ever had (one per plan it was on, the ended ones too); Clerk's 256
	// KiB webhook bodies hold fewer than this.
	MaxSubscriptionItems = 500
	// MaxBillingObjectBytes bounds an object usersync keeps as Clerk sent
	// it (a payment attempt's totals), compacted JSON.
	MaxBillingObjectBytes = 8 << 10
)

// The validate tags bound the other strings a billing object keeps, in
// characters: a status, an interval, a currency or a charge type to 32, a
// slug (MaxSlug) and a failed payment's codes to 256, ids to 128 bytes.

// ItemStatus is the status of a subscription item.
type ItemStatus string

// Statuses of a subscription item, as Clerk names them.
const (
	// ItemActive: the item gives the payer its plan.
	ItemActive ItemStatus = "active"
	// ItemPastDue: a payment failed; the item still gives the plan.
	ItemPastDue ItemStatus = "past_due"
	// ItemCanceled: canceled at the end of its period; the item gives the
	// plan until period_end.
	ItemCanceled ItemStatus = "canceled"
	// ItemUpcoming: a plan queued to start at the end of the current
	// period (a deferred downgrade, or the free plan after a canceled
	// paid one).
	ItemUpcoming ItemStatus = "upcoming"
	// ItemEnded: history; the item gives nothing any more.
	ItemEnded ItemStatus = "ended"
	// ItemExpired: in Clerk's schema of an item's status beside ended
	// (no event of its own is named for it); read as ended.
	ItemExpired ItemStatus = "expired"
	// ItemAbandoned: an upcoming item dropped before it started.
	ItemAbandoned ItemStatus = "abandoned"
	// ItemIncomplete: a checkout not paid yet; not a plan yet.
	ItemIncomplete ItemStatus = "incomplete"
)

// Payer is who pays for a subscription: a user or an organization.
type Payer struct {
	Kind    Kind   // KindUser or KindOrganization
	ID      string // the user's (user_…) or the organization's (org_…) id
	PayerID string // Clerk's id of the payer (cpayer_…); "" when not given
}

// UserID is the payer's user id, "" when the payer is an organization.
func (p Payer) UserID() string {
	if p.Kind == KindUser {
		return p.ID
	}
	return ""
}

// BillingPlan is a plan as a subscription item names it.
type BillingPlan struct {
	ID   string // cplan_…
	Slug string // the application's name of the plan ("pro-plan")
	Name string // for display, cut to MaxName characters
	// Amount is Clerk's plan.amount as sent, in the currency's smallest
	// unit; nil when not given. Clerk's schema gives it no lower bound: a
	// negative one is kept and served as it is, never refused (the item's
	// state would be lost, as Clerk sends no better one) and never read
	// to decide a plan. It is Clerk's price, not a credit.
	Amount      *int64
	Currency    string // "USD"
	IsRecurring bool
}

// SubscriptionItem is one state of one subscription item: the period of
// time a payer's subscription was, is or will be on one plan, in one
// status. The newest state of each of a payer's items is what PlanOf
// reads.
type SubscriptionItem struct {
	ItemID         string // csub_item_…
	SubscriptionID string // csub_…; "" when the event did not name it
	Payer          Payer
	Status         ItemStatus
	IsFreeTrial    bool
	PeriodStart    *time.Time
	PeriodEnd      *time.Time // nil: no end (the default free plan)
	Interval       string     // "month", "annual"; "" when not given
	Plan           BillingPlan
	// Seats is the seats' quantity; nil: unlimited (or a plan without
	// seats).
	Seats           *int64
	SourceCreatedAt *time.Time
	SourceUpdatedAt time.Time // Clerk's updated_at: orders the states
	LastEventID     string    // the event of this state
	// CreatedAt and UpdatedAt are usersync's first and last writes of the
	// item, as a store's read returns it; zero in a change.
	CreatedAt, UpdatedAt time.Time
}

// Version returns the version of the item's state.
func (it SubscriptionItem) Version() Version {
	return Version{SourceTime: it.SourceUpdatedAt, EventID: it.LastEventID}
}

// SubscriptionItemChange is one Clerk state of one subscription item,
// ready to be applied: from a subscriptionItem.* event, or one of the
// items of a subscription.* event (stamped with that event, its payer and
// subscription id filled from the subscription). Its version is the
// item's own updated_at and its event.
type SubscriptionItemChange struct {
	SubscriptionItem
}

// Kind returns KindSubscriptionItem.
func (SubscriptionItemChange) Kind() Kind { return KindSubscriptionItem }

// IDs returns the payer's user id ("" for an organization) and the item's.
func (ch SubscriptionItemChange) IDs() (userID, objectID string) {
	return ch.Payer.UserID(), ch.ItemID
}

// SubscriptionChange is one Clerk state of one subscription, ready to be
// applied, and the states of the items it lists. A store applies the
// subscription by its version, and each item as a SubscriptionItemChange
// by the item's own version, through the same write as a standalone item
// event: an item's state in a subscription event may be older, or newer,
// than one a subscriptionItem.* event carried.
type SubscriptionChange struct {
	SubscriptionID  string // csub_…
	EventID         string
	SourceTime      time.Time // Clerk's updated_at
	Status          string    // Clerk's status of the subscription
	Payer           Payer
	ActiveAt        *time.Time
	CanceledAt      *time.Time
	EndedAt         *time.Time
	PastDueAt       *time.Time
	SourceCreatedAt *time.Time
	LatestPaymentID string // cpa_…: a payment attempt's payment_id; "" when none
	PaymentSourceID string // "" when none
	// Items are every item the subscription lists, in Clerk's order.
	Items []SubscriptionItemChange
}

// Kind returns KindSubscription.
func (SubscriptionChange) Kind() Kind { return KindSubscription }

// Version returns the version of the subscription's state.
func (ch SubscriptionChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID}
}

// IDs returns the payer's user id ("" for an organization) and the
// subscription's.
func (ch SubscriptionChange) IDs() (userID, objectID string) {
	return ch.Payer.UserID(), ch.SubscriptionID
}

// PaymentAttemptChange is one Clerk state of one payment attempt, ready to
// be applied.
type PaymentAttemptChange struct {
	AttemptID  string // data.id
	PaymentID  string // cpa_…
	EventID    string
	SourceTime time.Time // Clerk's updated_at
	// Status is Clerk's: "pending", then "paid" or "failed".
	Status     string
	ChargeType string // "checkout", "recurring"; "" when not given
	Payer      Payer
	PaidAt     *time.Time
	FailedAt   *time.Time
	// FailedCode and FailedDeclineCode are failed_reason's; "" when none.
	FailedCode        string
	FailedDeclineCode string
	// Totals is Clerk's totals object, normalised (NormalizeJSON), at most
	// MaxBillingObjectBytes; nil when not given.
	Totals json.RawMessage
	// SubscriptionItemIDs are the items the attempt pays for.
	SubscriptionItemIDs []string
	SourceCreatedAt     *time.Time
}

// Kind returns KindPaymentAttempt.
func (PaymentAttemptChange) Kind() Kind { return KindPaymentAttempt }

// Version returns the version of the attempt's state.
func (ch PaymentAttemptChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID}
}

// IDs returns the payer's user id ("" for an organization) and the
// attempt's.
func (ch PaymentAttemptChange) IDs() (userID, objectID string) {
	return ch.Payer.UserID(), ch.AttemptID
}

// ClerkPayer is Clerk's payer of a billing object. Exactly one of user_id
// and organization_id is an id; the other is "" (or null). Its names,
// email and image are not kept.
type ClerkPayer struct {
	ID             string `json:"id" validate:"omitempty,clerkid=cpayer_"`
	UserID         string `json:"user_id" validate:"omitempty,clerkid=user_"`
	OrganizationID string `json:"organization_id" validate:"omitempty,clerkid=org_"`
}

// ClerkBillingPlan is Clerk's plan of a subscription item. Its unit
// prices and features are not kept.
type ClerkBillingPlan struct {
	ID          string  `json:"id" validate:"required,clerkid=cplan_"`
	Slug        string  `json:"slug" validate:"required,max=256"`
	Name        *string `json:"name"`
	Amount      *int64  `json:"amount"`
	Currency    string  `json:"currency" validate:"max=32"`
	IsRecurring bool    `json:"is_recurring"`
}

// ClerkSeats is a subscription item's seats; a null quantity is unlimited.
// A quantity is kept as Clerk sends it, as amounts are (a negative one
// makes no sense, but refusing the event would lose the item's state).
type ClerkSeats struct {
	Quantity *int64 `json:"quantity"`
}

// ClerkSubscriptionItem is Clerk's subscription item, standalone (the
// data of a subscriptionItem.* event) or in a subscription's items, where
// it has no payer and no subscription_id.
type ClerkSubscriptionItem struct {
	ID             string            `json:"id" validate:"required,clerkid=csub_item_"`
	Status         string            `json:"status" validate:"required,oneof=abandoned active canceled ended expired incomplete past_due upcoming"`
	IsFreeTrial    bool              `json:"is_free_trial"`
	PeriodStart    *int64            `json:"period_start"`
	PeriodEnd      *int64            `json:"period_end"`
	Interval       string            `json:"interval" validate:"max=32"`
	PlanID         string            `json:"plan_id" validate:"omitempty,clerkid=cplan_"`
	Plan           *ClerkBillingPlan `json:"plan" validate:"required"`
	Seats          *ClerkSeats       `json:"seats"`
	Payer          *ClerkPayer       `json:"payer"`
	SubscriptionID string            `json:"subscription_id" validate:"omitempty,clerkid=csub_"`
	CreatedAt      *int64            `json:"created_at"`
	UpdatedAt      int64             `json:"updated_at" validate:"required,gt=0"`
}

// ClerkSubscription is Clerk's subscription (the data of a subscription.*
// event): its payer and every item it has had, has and will have.
type ClerkSubscription struct {
	ID              string                  `json:"id" validate:"required,clerkid=csub_"`
	Status          string                  `json:"status" validate:"required,max=32"`
	PayerID         string                  `json:"payer_id" validate:"omitempty,clerkid=cpayer_"`
	Payer           *ClerkPayer             `json:"payer" validate:"required"`
	Items           []ClerkSubscriptionItem `json:"items" validate:"dive"`
	ActiveAt        *int64                  `json:"active_at"`
	CanceledAt      *int64                  `json:"canceled_at"`
	EndedAt         *int64                  `json:"ended_at"`
	PastDueAt       *int64                  `json:"past_due_at"`
	CreatedAt       *int64                  `json:"created_at"`
	UpdatedAt       int64                   `json:"updated_at" validate:"required,gt=0"`
	LatestPaymentID string                  `json:"latest_payment_id" validate:"omitempty,clerkid=cpa_"`
	PaymentSourceID string                  `json:"payment_source_id" validate:"max=128"`
}

// ClerkPaymentAttempt is Clerk's payment attempt (the data of a
// paymentAttempt.* event). Its payment source and payee are not kept.
type ClerkPaymentAttempt struct {
	ID           string `json:"id" validate:"required,clerkanyid"`
	PaymentID    string `json:"payment_id" validate:"required,clerkid=cpa_"`
	Status       string `json:"status" validate:"required,max=32"`
	PaidAt       *int64 `json:"paid_at"`
	FailedAt     *int64 `json:"failed_at"`
	FailedReason *struct {
		Code        string `json:"code" validate:"max=256"`
		DeclineCode string `json:"decline_code" validate:"max=256"`
	} `json:"failed_reason"`
	ChargeType        string          `json:"charge_type" validate:"max=32"`
	Totals            json.RawMessage `json:"totals"`
	Payer             *ClerkPayer     `json:"payer" validate:"required"`
	SubscriptionItems []struct {
		ID string `json:"id" validate:"omitempty,clerkid=csub_item_"`
	} `json:"subscription_items" validate:"dive"`
	CreatedAt *int64 `json:"created_at"`
	UpdatedAt int64  `json:"updated_at" validate:"required,gt=0"`
}

// DecodeBilling validates the data of a Clerk Billing event and returns
// the state it carries: a SubscriptionChange, a SubscriptionItemChange or
// a PaymentAttemptChange. It is the billing kinds' decoder, for the kinds
// table (see BillingKindSpecs). now is the server's clock: a Clerk time
// more than MaxFutureSkew ahead of it is refused. Its error wraps
// ErrInvalid: such an event can never be applied.
func DecodeBilling(e ClerkEvent, eventID string, now time.Time) (Change, error) {
	k, _, ok := billingKindOf(e.Type)
	if !ok {
		return nil, Public(ErrInvalid, "%s is not a billing event usersync knows", Quote(e.Type)).In("type")
	}
	switch k {
	case KindSubscription:
		return e.SubscriptionChange(eventID, now)
	case KindSubscriptionItem:
		return e.SubscriptionItemChange(eventID, now)
	default:
		return e.PaymentAttemptChange(eventID, now)
	}
}

// SubscriptionChange validates the data of a subscription.* event and
// returns the subscription's state and its items'. Its error wraps
// ErrInvalid.
func (e ClerkEvent) SubscriptionChange(eventID string, now time.Time) (SubscriptionChange, error) {
	if k, _, _ := billingKindOf(e.Type); k != KindSubscription {
		return SubscriptionChange{}, Public(ErrInvalid, "%s is not a subscription event", Quote(e.Type)).In("type")
	}
	if err := e.checkLimits(); err != nil {
		return SubscriptionChange{}, err
	}
	var s ClerkSubscription
	if err := decodeData(e.Data, &s); err != nil {
		return SubscriptionChange{}, err
	}
	if len(s.Items) > MaxSubscriptionItems {
		return SubscriptionChange{}, Public(ErrInvalid, "data.items has %d items; at most %d are accepted",
			len(s.Items), MaxSubscriptionItems).In("data.items")
	}
	payer, err := s.Payer.payer("data.payer.")
	if err != nil {
		return SubscriptionChange{}, err
	}
	if s.PayerID != "" && payer.PayerID != "" && s.PayerID != payer.PayerID {
		return SubscriptionChange{}, Public(ErrInvalid, "data.payer_id is not data.payer.id").In("data.payer_id")
	}
	if payer.PayerID == "" {
		payer.PayerID = s.PayerID
	}
	ts, err := updatedAt(s.UpdatedAt, "data.", now)
	if err != nil {
		return SubscriptionChange{}, err
	}
	ch := SubscriptionChange{
		SubscriptionID: s.ID, EventID: eventID, SourceTime: ts, Status: s.Status, Payer: payer,
		SourceCreatedAt: optClerkTime(s.CreatedAt),
		LatestPaymentID: s.LatestPaymentID, PaymentSourceID: strings.TrimSpace(s.PaymentSourceID),
	}
	for _, t := range []struct {
		dst   **time.Time
		v     *int64
		field string
	}{
		{&ch.ActiveAt, s.ActiveAt, "data.active_at"}, {&ch.CanceledAt, s.CanceledAt, "data.canceled_at"},
		{&ch.EndedAt, s.EndedAt, "data.ended_at"}, {&ch.PastDueAt, s.PastDueAt, "data.past_due_at"},
	} {
		if *t.dst, err = optTime(t.v, t.field); err != nil {
			return SubscriptionChange{}, err
		}
	}
	seen := make(map[string]bool, len(s.Items))
	for i, it := range s.Items {
		prefix := fmt.Sprintf("data.items[%d].", i)
		if seen[it.ID] {
			return SubscriptionChange{}, Public(ErrInvalid, "%sid %s is listed twice", prefix, Quote(it.ID)).In("data.items[].id")
		}
		seen[it.ID] = true
		// Inside a subscription an item has no payer and no
		// subscription_id: they are the subscription's.
		if it.SubscriptionID != "" && it.SubscriptionID != s.ID {
			return SubscriptionChange{}, Public(ErrInvalid, "%ssubscription_id is not the subscription's id", prefix).
				In("data.items[].subscription_id")
		}
		if it.Payer != nil {
			p, err := it.Payer.payer(prefix + "payer.")
			if err != nil {
				return SubscriptionChange{}, err
			}
			if p.Kind != payer.Kind || p.ID != payer.ID {
				return SubscriptionChange{}, Public(ErrInvalid, "%spayer is not the subscription's payer", prefix).In("data.items[].payer")
			}
		}
		item, err := it.state(prefix, eventID, payer, now)
		if err != nil {
			return SubscriptionChange{}, err
		}
		item.SubscriptionID = s.ID
		ch.Items = append(ch.Items, SubscriptionItemChange{item})
	}
	return ch, nil
}

// SubscriptionItemChange validates the data of a subscriptionItem.*
// event and returns the item's state. Its error wraps ErrInvalid.
func (e ClerkEvent) SubscriptionItemChange(eventID string, now time.Time) (SubscriptionItemChange, error) {
	if k, _, _ := billingKindOf(e.Type); k != KindSubscriptionItem {
		return SubscriptionItemChange{}, Public(ErrInvalid, "%s is not a subscription item event", Quote(e.Type)).In("type")
	}
	if err := e.checkLimits(); err != nil {
		return SubscriptionItemChange{}, err
	}
	var it ClerkSubscriptionItem
	if err := decodeData(e.Data, &it); err != nil {
		return SubscriptionItemChange{}, err
	}
	if it.Payer == nil {
		return SubscriptionItemChange{}, Public(ErrInvalid, "data.payer is required").In("data.payer")
	}
	payer, err := it.Payer.payer("data.payer.")
	if err != nil {
		return SubscriptionItemChange{}, err
	}
	item, err := it.state("data.", eventID, payer, now)
	if err != nil {
		return SubscriptionItemChange{}, err
	}
	return SubscriptionItemChange{item}, nil
}

// PaymentAttemptChange validates the data of a paymentAttempt.* event and
// returns the attempt's state. Its error wraps ErrInvalid.
func (e ClerkEvent) PaymentAttemptChange(eventID string, now time.Time) (PaymentAttemptChange, error) {
	if k, _, _ := billingKindOf(e.Type); k != KindPaymentAttempt {
		return PaymentAttemptChange{}, Public(ErrInvalid, "%s is not a payment attempt event", Quote(e.Type)).In("type")
	}
	if err := e.checkLimits(); err != nil {
		return PaymentAttemptChange{}, err
	}
	var a ClerkPaymentAttempt
	if err := decodeData(e.Data, &a); err != nil {
		return PaymentAttemptChange{}, err
	}
	if len(a.SubscriptionItems) > MaxSubscriptionItems {
		return PaymentAttemptChange{}, Public(ErrInvalid, "data.subscription_items has %d items; at most %d are accepted",
			len(a.SubscriptionItems), MaxSubscriptionItems).In("data.subscription_items")
	}
	payer, err := a.Payer.payer("data.payer.")
	if err != nil {
		return PaymentAttemptChange{}, err
	}
	ts, err := updatedAt(a.UpdatedAt, "data.", now)
	if err != nil {
		return PaymentAttemptChange{}, err
	}
	ch := PaymentAttemptChange{
		AttemptID: a.ID, PaymentID: a.PaymentID, EventID: eventID, SourceTime: ts,
		Status: strings.TrimSpace(a.Status), ChargeType: strings.TrimSpace(a.ChargeType), Payer: payer,
		SourceCreatedAt: optClerkTime(a.CreatedAt),
	}
	if ch.PaidAt, err = optTime(a.PaidAt, "data.paid_at"); err != nil {
		return PaymentAttemptChange{}, err
	}
	if ch.FailedAt, err = optTime(a.FailedAt, "data.failed_at"); err != nil {
		return PaymentAttemptChange{}, err
	}
	if r := a.FailedReason; r != nil {
		ch.FailedCode, ch.FailedDeclineCode = strings.TrimSpace(r.Code), strings.TrimSpace(r.DeclineCode)
	}
	if ch.Totals, err = billingObject(a.Totals, "data.totals"); err != nil {
		return PaymentAttemptChange{}, err
	}
	for _, it := range a.SubscriptionItems {
		if it.ID != "" {
			ch.SubscriptionItemIDs = append(ch.SubscriptionItemIDs, it.ID)
		}
	}
	return ch, nil
}

// state is the item's state as the event eventID carries it, paid for by
// payer; prefix names the item in errors.
func (it ClerkSubscriptionItem) state(prefix, eventID string, payer Payer, now time.Time) (SubscriptionItem, error) {
	if it.PlanID != "" && it.PlanID != it.Plan.ID {
		return SubscriptionItem{}, Public(ErrInvalid, "%splan_id is not %splan.id", prefix, prefix).In(schemaField(prefix + "plan_id"))
	}
	ts, err := updatedAt(it.UpdatedAt, prefix, now)
	if err != nil {
		return SubscriptionItem{}, err
	}
	item := SubscriptionItem{
		ItemID: it.ID, SubscriptionID: it.SubscriptionID, Payer: payer,
		Status: ItemStatus(it.Status), IsFreeTrial: it.IsFreeTrial,
		Interval: strings.TrimSpace(it.Interval),
		Plan: BillingPlan{
			ID: it.Plan.ID, Slug: strings.TrimSpace(it.Plan.Slug),
			Name:   truncate(strings.TrimSpace(deref(it.Plan.Name)), MaxName),
			Amount: it.Plan.Amount, Currency: strings.TrimSpace(it.Plan.Currency), IsRecurring: it.Plan.IsRecurring,
		},
		SourceCreatedAt: optClerkTime(it.CreatedAt),
		SourceUpdatedAt: ts, LastEventID: eventID,
	}
	if item.Plan.Slug == "" {
		return SubscriptionItem{}, Public(ErrInvalid, "%splan.slug is required", prefix).In(schemaField(prefix + "plan.slug"))
	}
	if item.PeriodStart, err = optTime(it.PeriodStart, prefix+"period_start"); err != nil {
		return SubscriptionItem{}, err
	}
	if item.PeriodEnd, err = optTime(it.PeriodEnd, prefix+"period_end"); err != nil {
		return SubscriptionItem{}, err
	}
	if it.Seats != nil && it.Seats.Quantity != nil {
		q := *it.Seats.Quantity
		item.Seats = &q
	}
	return item, nil
}

// payer reads Clerk's payer: a user or an organization, by whichever of
// user_id and organization_id is an id (never by data.object, on which
// Clerk's sources disagree). prefix names it in errors.
func (p *ClerkPayer) payer(prefix string) (Payer, error) {
	switch {
	case p.UserID != "" && p.OrganizationID != "":
		return Payer{}, Public(ErrInvalid, "%suser_id and %sorganization_id are both set; a payer is one of them", prefix, prefix).
			In(schemaField(prefix + "organization_id"))
	case p.UserID != "":
		return Payer{Kind: KindUser, ID: p.UserID, PayerID: p.ID}, nil
	case p.OrganizationID != "":
		return Payer{Kind: KindOrganization, ID: p.OrganizationID, PayerID: p.ID}, nil
	}
	return Payer{}, Public(ErrInvalid, "%suser_id or %sorganization_id is required: a payer is a user or an organization", prefix, prefix).
		In(schemaField(prefix + "user_id"))
}

// payerUserID reads data.payer.user_id as UserID does: the user of a
// billing event whose payer is a user.
func (e ClerkEvent) payerUserID() string {
	var d struct {
		Payer struct {
			UserID string `json:"user_id"`
		} `json:"payer"`
	}
	return readID(e.Data, &d, func() string { return d.Payer.UserID })
}

// updatedAt reads the updated_at of the object prefix names: a Clerk time
// not ahead of now by more than MaxFutureSkew.
func updatedAt(v int64, prefix string, now time.Time) (time.Time, error) {
	field := prefix + "updated_at"
	ts, err := clerkTime(json.RawMessage(fmt.Sprint(v)))
	if err != nil {
		return time.Time{}, Public(ErrInvalid, "%s %v", field, err).In(schemaField(field))
	}
	if ts.After(now.Add(MaxFutureSkew)) {
		return time.Time{}, Public(ErrInvalid, "%s (%s) is more than a day ahead of the server's clock",
			field, ts.UTC().Format(time.RFC3339)).In(schemaField(field))
	}
	return ts, nil
}

// optTime reads an optional Clerk time that usersync keeps (a period's
// bounds, a payment's time): nil when absent or null, refused when it is
// not a Clerk time (a wrong period_end must not read as "no end").
func optTime(v *int64, field string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := clerkTime(json.RawMessage(fmt.Sprint(*v)))
	if err != nil {
		return nil, Public(ErrInvalid, "%s %v", field, err).In(schemaField(field))
	}
	return &t, nil
}

// billingObject checks and normalises an object usersync keeps as Clerk
// sent it: absent or null is nil; anything but an object, or an object
// of more than MaxBillingObjectBytes, is refused.
func billingObject(raw json.RawMessage, field string) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if !isObject(raw) {
		return nil, Public(ErrInvalid, "%s must be an object", field).In(field)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, Public(ErrInvalid, "%s is not valid JSON", field).In(field)
	}
	if buf.Len() > MaxBillingObjectBytes {
		return nil, Public(ErrInvalid, "%s is %d bytes; at most %d are accepted", field, buf.Len(), MaxBillingObjectBytes).In(field)
	}
	out, err := NormalizeJSON(buf.Bytes())
	if err != nil {
		return nil, Public(ErrInvalid, "%s is not valid JSON", field).In(field).Because(err)
	}
	return out, nil
}
