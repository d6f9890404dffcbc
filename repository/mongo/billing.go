package mongo

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Clerk Billing: subscriptions, their items, payment attempts, and each
// payer's plan, in four collections. Each object's document has the _id
// derived from its Clerk id (docID), and is written as the other kinds'
// are: one conditional upsert per state, by _id, that goes through only
// over an older state (explained, when it does not, by the stored
// version and models.Decide). Clerk deletes none of them.
//
// A payer's plan (billing_plans, _id derived from the payer) is
// models.PlanOf of the payer's stored items, recomputed after every item
// write, before the event is marked: a crash between the two leaves the
// event unmarked, and its next delivery (or the sweep) recomputes it.
// There are no transactions, so the plan's write is a compare-and-swap
// (see recomputePlan).

// Collection names of Clerk Billing, before Options.CollectionPrefix.
const (
	SubscriptionsCollection     = "subscriptions"
	SubscriptionItemsCollection = "subscription_items"
	PaymentAttemptsCollection   = "payment_attempts"
	BillingPlansCollection      = "billing_plans"
)

// billingCollections are the base names of the billing collections.
var billingCollections = []string{SubscriptionsCollection, SubscriptionItemsCollection, PaymentAttemptsCollection, BillingPlansCollection}

// Billing is the billing collections (repository.Billing).
type Billing struct {
	subs, items, attempts, plans *mongo.Collection
	// The same collections read from the primary: reads that decide a
	// write.
	subsP, itemsP, attemptsP, plansP *mongo.Collection
	// density sizes the windows of the pages of subscriptions not of one
	// payer and of the plans' change feed, and oldest keeps the oldest
	// sourceUpdatedAt of a subscription once read: their floor (see
	// subscriptionDocs).
	density densities
	oldest  oldestCache
	// beforePlanWrite, if set, runs between a recomputation's reads and
	// its write: tests make a concurrent delivery happen there.
	beforePlanWrite func()
}

// itemIndexes are the indexes of subscription_items: a payer's items,
// newest first (the plan's recomputation, Items).
var itemIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "payerKind", Value: 1}, {Key: "payerId", Value: 1}, {Key: "sourceUpdatedAt", Value: -1}}},
}

// attemptIndexes are the indexes of payment_attempts: the attempts of a
// payment, of a payer, and all of them, newest Clerk time first (the
// pages of PaymentAttempts).
var attemptIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "paymentId", Value: 1}, {Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "payerKind", Value: 1}, {Key: "payerId", Value: 1}, {Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
}

// subIndexes are the indexes of subscriptions: the pages of
// Subscriptions, newest Clerk time first, of a payer, in a status, all.
var subIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "payerKind", Value: 1}, {Key: "payerId", Value: 1}, {Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "status", Value: 1}, {Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
	{Keys: bson.D{{Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}},
}

// planIndexes are the indexes of billing_plans: the plans' change feed
// (PlanChanges), oldest change first, then the _id derived from the payer.
var planIndexes = []mongo.IndexModel{
	{Keys: changesOrder},
}

// subOrder is the order of the pages of subscriptions.
var subOrder = bson.D{{Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}

// attemptOrder is the order of the pages of payment attempts.
var attemptOrder = bson.D{{Key: "sourceUpdatedAt", Value: -1}, {Key: "_id", Value: -1}}

// itemOrder is the order of a payer's items as they are read.
var itemOrder = bson.D{{Key: "sourceUpdatedAt", Value: -1}}

// billingVersionProjection is what a write reads of a billing object to
// explain a write that did not go through.
var billingVersionProjection = bson.D{{Key: "sourceUpdatedAt", Value: 1}, {Key: "lastEventId", Value: 1}}

// versionDoc is the version of a stored billing object.
type versionDoc struct {
	SourceUpdatedAt time.Time `bson:"sourceUpdatedAt"`
	LastEventID     string    `bson:"lastEventId"`
}

// planTries bounds the compare-and-swaps of one recomputation of a plan:
// each one refused means another recomputation went through meanwhile.
const planTries = 4 * maxApplyTries

// subDoc is a subscriptions document.
type subDoc struct {
	ID              bson.ObjectID `bson:"_id"`
	SubscriptionID  string        `bson:"subscriptionId"`
	PayerKind       string        `bson:"payerKind"`
	PayerID         string        `bson:"payerId"`
	PayerClerkID    *string       `bson:"payerClerkId"`
	Status          string        `bson:"status"`
	ActiveAt        *time.Time    `bson:"activeAt"`
	CanceledAt      *time.Time    `bson:"canceledAt"`
	EndedAt         *time.Time    `bson:"endedAt"`
	PastDueAt       *time.Time    `bson:"pastDueAt"`
	LatestPaymentID *string       `bson:"latestPaymentId"`
	PaymentSourceID *string       `bson:"paymentSourceId"`
	SourceCreatedAt *time.Time    `bson:"sourceCreatedAt"`
	SourceUpdatedAt time.Time     `bson:"sourceUpdatedAt"`
	LastEventID     string        `bson:"lastEventId"`
	CreatedAt       time.Time     `bson:"createdAt"`
	UpdatedAt       time.Time     `bson:"updatedAt"`
}

func (d subDoc) model() models.Subscription {
	return models.Subscription{
		SubscriptionID: d.SubscriptionID, Payer: payerOf(d.PayerKind, d.PayerID, d.PayerClerkID), Status: d.Status,
		ActiveAt: utc(d.ActiveAt), CanceledAt: utc(d.CanceledAt), EndedAt: utc(d.EndedAt), PastDueAt: utc(d.PastDueAt),
		LatestPaymentID: deref(d.LatestPaymentID), PaymentSourceID: deref(d.PaymentSourceID),
		SourceCreatedAt: utc(d.SourceCreatedAt), SourceUpdatedAt: d.SourceUpdatedAt.UTC(), LastEventID: d.LastEventID,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
}

// planSpecDoc is a plan as an item names it.
type planSpecDoc struct {
	ID          string  `bson:"id"`
	Slug        string  `bson:"slug"`
	Name        *string `bson:"name"`
	Amount      *int64  `bson:"amount"`
	Currency    *string `bson:"currency"`
	IsRecurring bool    `bson:"isRecurring"`
}

func planSpecOf(p models.BillingPlan) planSpecDoc {
	return planSpecDoc{ID: p.ID, Slug: p.Slug, Name: str(p.Name), Amount: p.Amount, Currency: str(p.Currency), IsRecurring: p.IsRecurring}
}

func (d planSpecDoc) model() models.BillingPlan {
	return models.BillingPlan{ID: d.ID, Slug: d.Slug, Name: deref(d.Name), Amount: d.Amount, Currency: deref(d.Currency), IsRecurring: d.IsRecurring}
}

// itemDoc is a subscription_items document.
type itemDoc struct {
	ID              bson.ObjectID `bson:"_id"`
	ItemID          string        `bson:"itemId"`
	SubscriptionID  *string       `bson:"subscriptionId"`
	PayerKind       string        `bson:"payerKind"`
	PayerID         string        `bson:"payerId"`
	PayerClerkID    *string       `bson:"payerClerkId"`
	Status          string        `bson:"status"`
	IsFreeTrial     bool          `bson:"isFreeTrial"`
	PeriodStart     *time.Time    `bson:"periodStart"`
	PeriodEnd       *time.Time    `bson:"periodEnd"`
	Interval        *string       `bson:"interval"`
	Plan            planSpecDoc   `bson:"plan"`
	Seats           *int64        `bson:"seats"`
	SourceCreatedAt *time.Time    `bson:"sourceCreatedAt"`
	SourceUpdatedAt time.Time     `bson:"sourceUpdatedAt"`
	LastEventID     string        `bson:"lastEventId"`
	CreatedAt       time.Time     `bson:"createdAt"`
	UpdatedAt       time.Time     `bson:"updatedAt"`
}

func (d itemDoc) model() models.SubscriptionItem {
	return models.SubscriptionItem{
		ItemID: d.ItemID, SubscriptionID: deref(d.SubscriptionID), Payer: payerOf(d.PayerKind, d.PayerID, d.PayerClerkID),
		Status: models.ItemStatus(d.Status), IsFreeTrial: d.IsFreeTrial, PeriodStart: utc(d.PeriodStart), PeriodEnd: utc(d.PeriodEnd),
		Interval: deref(d.Interval), Plan: d.Plan.model(), Seats: d.Seats,
		SourceCreatedAt: utc(d.SourceCreatedAt), SourceUpdatedAt: d.SourceUpdatedAt.UTC(), LastEventID: d.LastEventID,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
}

// attemptDoc is a payment_attempts document.
type attemptDoc struct {
	ID                  bson.ObjectID `bson:"_id"`
	AttemptID           string        `bson:"attemptId"`
	PaymentID           string        `bson:"paymentId"`
	PayerKind           string        `bson:"payerKind"`
	PayerID             string        `bson:"payerId"`
	PayerClerkID        *string       `bson:"payerClerkId"`
	Status              string        `bson:"status"`
	ChargeType          *string       `bson:"chargeType"`
	PaidAt              *time.Time    `bson:"paidAt"`
	FailedAt            *time.Time    `bson:"failedAt"`
	FailedCode          *string       `bson:"failedCode"`
	FailedDeclineCode   *string       `bson:"failedDeclineCode"`
	Totals              bson.D        `bson:"totals"`
	SubscriptionItemIDs []string      `bson:"subscriptionItemIds"`
	SourceCreatedAt     *time.Time    `bson:"sourceCreatedAt"`
	SourceUpdatedAt     time.Time     `bson:"sourceUpdatedAt"`
	LastEventID         string        `bson:"lastEventId"`
	CreatedAt           time.Time     `bson:"createdAt"`
	UpdatedAt           time.Time     `bson:"updatedAt"`
}

func (d attemptDoc) model() (models.PaymentAttempt, error) {
	a := models.PaymentAttempt{
		AttemptID: d.AttemptID, PaymentID: d.PaymentID, Payer: payerOf(d.PayerKind, d.PayerID, d.PayerClerkID),
		Status: d.Status, ChargeType: deref(d.ChargeType), PaidAt: utc(d.PaidAt), FailedAt: utc(d.FailedAt),
		FailedCode: deref(d.FailedCode), FailedDeclineCode: deref(d.FailedDeclineCode),
		SubscriptionItemIDs: d.SubscriptionItemIDs, SourceCreatedAt: utc(d.SourceCreatedAt),
		SourceUpdatedAt: d.SourceUpdatedAt.UTC(), LastEventID: d.LastEventID,
		CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
	if d.Totals != nil {
		totals, err := docToJSON(d.Totals)
		if err != nil {
			return models.PaymentAttempt{}, fmt.Errorf("payment attempt %s totals: %w", d.AttemptID, err)
		}
		a.Totals = totals
	}
	return a, nil
}

// planDoc is a billing_plans document: a payer's plan, the fingerprint
// of the items it was computed from, and a revision that each write of
// it moves (the compare-and-swap's token).
type planDoc struct {
	ID        bson.ObjectID `bson:"_id"`
	PayerKind string        `bson:"payerKind"`
	PayerID   string        `bson:"payerId"`
	Plan      bson.Raw      `bson:"plan"`  // a planBody
	Items     string        `bson:"items"` // itemsFingerprint of the items it was computed from
	Rev       int64         `bson:"rev"`
	UpdatedAt time.Time     `bson:"updatedAt"` // the last write that changed plan
}

// planBody is a models.PayerPlan as billing_plans keeps it.
type planBody struct {
	PayerKind           string       `bson:"payerKind"`
	PayerID             string       `bson:"payerId"`
	PayerClerkID        *string      `bson:"payerClerkId"`
	Status              string       `bson:"status"`
	Plan                *planSpecDoc `bson:"plan"`
	ItemID              *string      `bson:"itemId"`
	FreeTrial           bool         `bson:"freeTrial"`
	PeriodEnd           *time.Time   `bson:"periodEnd"`
	CanceledAtPeriodEnd bool         `bson:"canceledAtPeriodEnd"`
	Seats               *int64       `bson:"seats"`
	Upcoming            *upcomingDoc `bson:"upcoming"`
}

type upcomingDoc struct {
	Plan        planSpecDoc `bson:"plan"`
	ItemID      string      `bson:"itemId"`
	PeriodStart *time.Time  `bson:"periodStart"`
	Seats       *int64      `bson:"seats"`
	FreeTrial   bool        `bson:"freeTrial"`
}

func planBodyOf(p models.PayerPlan) planBody {
	b := planBody{
		PayerKind: string(p.Payer.Kind), PayerID: p.Payer.ID, PayerClerkID: str(p.Payer.PayerID), Status: string(p.Status),
		ItemID: str(p.ItemID), FreeTrial: p.FreeTrial, PeriodEnd: utc(p.PeriodEnd), CanceledAtPeriodEnd: p.CanceledAtPeriodEnd,
		Seats: p.Seats,
	}
	if p.Plan != nil {
		spec := planSpecOf(*p.Plan)
		b.Plan = &spec
	}
	if u := p.Upcoming; u != nil {
		b.Upcoming = &upcomingDoc{Plan: planSpecOf(u.Plan), ItemID: u.ItemID, PeriodStart: utc(u.PeriodStart), Seats: u.Seats, FreeTrial: u.FreeTrial}
	}
	return b
}

func (b planBody) model() models.PayerPlan {
	p := models.PayerPlan{
		Payer: payerOf(b.PayerKind, b.PayerID, b.PayerClerkID), Status: models.PlanStatus(b.Status), ItemID: deref(b.ItemID),
		FreeTrial: b.FreeTrial, PeriodEnd: utc(b.PeriodEnd), CanceledAtPeriodEnd: b.CanceledAtPeriodEnd, Seats: b.Seats,
	}
	if b.Plan != nil {
		plan := b.Plan.model()
		p.Plan = &plan
	}
	if u := b.Upcoming; u != nil {
		p.Upcoming = &models.UpcomingPlan{Plan: u.Plan.model(), ItemID: u.ItemID, PeriodStart: utc(u.PeriodStart), Seats: u.Seats, FreeTrial: u.FreeTrial}
	}
	return p
}

func payerOf(kind, id string, clerkID *string) models.Payer {
	return models.Payer{Kind: models.Kind(kind), ID: id, PayerID: deref(clerkID)}
}

// payerKey is what a payer's plan document's _id is derived from.
func payerKey(p models.Payer) string { return string(p.Kind) + "/" + p.ID }

// payerFilter selects the documents of payer.
func payerFilter(p models.Payer) bson.D {
	return bson.D{{Key: "payerKind", Value: string(p.Kind)}, {Key: "payerId", Value: p.ID}}
}

func payerFields(p models.Payer) bson.D {
	return bson.D{{Key: "payerKind", Value: string(p.Kind)}, {Key: "payerId", Value: p.ID}, {Key: "payerClerkId", Value: str(p.PayerID)}}
}

// stateWrite is the conditional upsert of one state of the billing object
// with _id id: over a stored state older than v (and not v's own event:
// DecideUnchanged, a retry), set sets the object as the state says.
func stateWrite(id bson.ObjectID, v models.Version, set bson.D, now time.Time) (filter, update bson.D) {
	filter = bson.D{{Key: "_id", Value: id}, {Key: "lastEventId", Value: bson.D{{Key: "$ne", Value: v.EventID}}}, olderThan(v)}
	set = append(set, bson.D{
		{Key: "sourceUpdatedAt", Value: v.SourceTime.UTC()}, {Key: "lastEventId", Value: v.EventID}, {Key: "updatedAt", Value: now},
	}...)
	return filter, bson.D{{Key: "$set", Value: set}, {Key: "$setOnInsert", Value: bson.D{{Key: "createdAt", Value: now}}}}
}

// writeState makes the write of stateWrite, as Organizations.apply makes
// an organization's: an upsert refused by _id (the object is stored in a
// state the filter rejects) is explained by the stored version, through
// models.Decide; one whose object changed between the write and the read
// is made again.
func writeState(ctx context.Context, coll, primary *mongo.Collection, id bson.ObjectID, v models.Version, set bson.D, now time.Time) (models.Decision, error) {
	filter, update := stateWrite(id, v, set, now)
	for try := 1; try <= maxApplyTries; try++ {
		res, err := updateOne(ctx, coll, filter, update, options.UpdateOne().SetUpsert(true))
		if err == nil {
			if res.UpsertedCount > 0 {
				return models.DecideCreate, nil
			}
			return models.DecideUpdate, nil
		}
		if err = translate(err); !errors.Is(err, errDuplicate) {
			return 0, err
		}
		var cur versionDoc
		err = findByID(ctx, primary, id, &cur, billingVersionProjection)
		if errors.Is(err, models.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("read the stored state: %w", err)
		}
		if d := models.Decide(&models.Version{SourceTime: cur.SourceUpdatedAt, EventID: cur.LastEventID}, v); !d.Writes() {
			return d, nil
		}
	}
	return 0, fmt.Errorf("concurrent writes kept winning: %w", models.ErrRetryLater)
}

// applySubscription writes ch's subscription, then each of its items by
// the item's own version (writeItem: the very write of a standalone item
// event), then the plan of the payers of the items not found stale (once
// per payer, not once per item: a subscription lists every item it ever
// had). The outcome is applied when the subscription or any item was
// written (or found written by this very event), stale when none was.
func (b *Billing) applySubscription(ctx context.Context, ch models.SubscriptionChange, now time.Time) (models.Outcome, error) {
	fail := func(err error) (models.Outcome, error) {
		return "", fmt.Errorf("apply event %s to subscription %s: %w", ch.EventID, ch.SubscriptionID, err)
	}
	set := append(bson.D{{Key: "subscriptionId", Value: ch.SubscriptionID}}, payerFields(ch.Payer)...)
	set = append(set, bson.D{
		{Key: "status", Value: ch.Status}, {Key: "activeAt", Value: utc(ch.ActiveAt)}, {Key: "canceledAt", Value: utc(ch.CanceledAt)},
		{Key: "endedAt", Value: utc(ch.EndedAt)}, {Key: "pastDueAt", Value: utc(ch.PastDueAt)},
		{Key: "latestPaymentId", Value: str(ch.LatestPaymentID)}, {Key: "paymentSourceId", Value: str(ch.PaymentSourceID)},
		{Key: "sourceCreatedAt", Value: utc(ch.SourceCreatedAt)},
	}...)
	d, err := writeState(ctx, b.subs, b.subsP, docID(ch.SubscriptionID), ch.Version(), set, now)
	if err != nil {
		return fail(err)
	}
	outcome := d.Outcome()
	var payers []models.Payer
	for _, it := range ch.Items {
		d, err := b.writeItem(ctx, it, now)
		if err != nil {
			return fail(err)
		}
		if d.Outcome() == models.OutcomeApplied {
			outcome = models.OutcomeApplied
			if !slices.Contains(payers, it.Payer) {
				payers = append(payers, it.Payer)
			}
		}
	}
	for _, p := range payers {
		if err := b.recomputePlan(ctx, p, now); err != nil {
			return fail(err)
		}
	}
	return outcome, nil
}

// applyItem writes ch's item (writeItem), then, unless the item's state
// was stale, recomputes its payer's plan: also for a retry of this very
// event, whose plan a crash may have left unwritten.
func (b *Billing) applyItem(ctx context.Context, ch models.SubscriptionItemChange, now time.Time) (models.Outcome, error) {
	d, err := b.writeItem(ctx, ch, now)
	if err == nil && d.Outcome() == models.OutcomeApplied {
		err = b.recomputePlan(ctx, ch.Payer, now)
	}
	if err != nil {
		return "", fmt.Errorf("apply event %s to subscription item %s: %w", ch.LastEventID, ch.ItemID, err)
	}
	return d.Outcome(), nil
}

// writeItem is the write of one item state, standalone or of a
// subscription's event.
func (b *Billing) writeItem(ctx context.Context, ch models.SubscriptionItemChange, now time.Time) (models.Decision, error) {
	set := append(bson.D{{Key: "itemId", Value: ch.ItemID}, {Key: "subscriptionId", Value: str(ch.SubscriptionID)}}, payerFields(ch.Payer)...)
	set = append(set, bson.D{
		{Key: "status", Value: string(ch.Status)}, {Key: "isFreeTrial", Value: ch.IsFreeTrial},
		{Key: "periodStart", Value: utc(ch.PeriodStart)}, {Key: "periodEnd", Value: utc(ch.PeriodEnd)},
		{Key: "interval", Value: str(ch.Interval)}, {Key: "plan", Value: planSpecOf(ch.Plan)}, {Key: "seats", Value: ch.Seats},
		{Key: "sourceCreatedAt", Value: utc(ch.SourceCreatedAt)},
	}...)
	d, err := writeState(ctx, b.items, b.itemsP, docID(ch.ItemID), ch.Version(), set, now)
	if err != nil {
		return 0, fmt.Errorf("item %s: %w", ch.ItemID, err)
	}
	return d, nil
}

// applyAttempt writes ch's payment attempt.
func (b *Billing) applyAttempt(ctx context.Context, ch models.PaymentAttemptChange, now time.Time) (models.Outcome, error) {
	fail := func(err error) (models.Outcome, error) {
		return "", fmt.Errorf("apply event %s to payment attempt %s: %w", ch.EventID, ch.AttemptID, err)
	}
	var totals bson.D
	if len(ch.Totals) > 0 {
		var err error
		if totals, err = jsonToDoc(ch.Totals); err != nil {
			return fail(fmt.Errorf("totals: %w: %v", models.ErrInvalid, err))
		}
	}
	items := ch.SubscriptionItemIDs
	if items == nil {
		items = []string{}
	}
	set := append(bson.D{{Key: "attemptId", Value: ch.AttemptID}, {Key: "paymentId", Value: ch.PaymentID}}, payerFields(ch.Payer)...)
	set = append(set, bson.D{
		{Key: "status", Value: ch.Status}, {Key: "chargeType", Value: str(ch.ChargeType)},
		{Key: "paidAt", Value: utc(ch.PaidAt)}, {Key: "failedAt", Value: utc(ch.FailedAt)},
		{Key: "failedCode", Value: str(ch.FailedCode)}, {Key: "failedDeclineCode", Value: str(ch.FailedDeclineCode)},
		{Key: "totals", Value: totals}, {Key: "subscriptionItemIds", Value: items},
		{Key: "sourceCreatedAt", Value: utc(ch.SourceCreatedAt)},
	}...)
	d, err := writeState(ctx, b.attempts, b.attemptsP, docID(ch.AttemptID), ch.Version(), set, now)
	if err != nil {
		return fail(err)
	}
	return d.Outcome(), nil
}

// recomputePlan writes the plan of payer as its stored items make it
// (models.PlanOf).
//
// The write is a compare-and-swap on the plan document's revision, with
// the plan read before the items: read the plan (its revision r and the
// fingerprint of the items it was computed from), then the items; if
// their fingerprint is the plan's, the plan is theirs and nothing is
// written; else write the new plan only where the revision is still r
// (or insert it where there was none), and start again when that is
// refused. So a plan is only written over the very one whose read came
// before the items were read: when two deliveries for one payer race,
// the one whose items read missed the other's item either loses its
// swap (and reads again, the item now included) or wins it before the
// other's swap, which then fails and recomputes from both. The last
// write is computed from items read after every item write whose
// recomputation had ended, and the plan ends as that of all the payer's
// items whatever the order. A version carried in the plan (the newest
// item's) would not do: an older item's state arriving late does not
// move the newest version, yet changes the plan.
func (b *Billing) recomputePlan(ctx context.Context, payer models.Payer, now time.Time) error {
	id := docID(payerKey(payer))
	for try := 1; try <= planTries; try++ {
		var cur planDoc
		err := findByID(ctx, b.plansP, id, &cur, nil)
		found := err == nil
		if err != nil && !errors.Is(err, models.ErrNotFound) {
			return fmt.Errorf("read the plan of %s: %w", payerKey(payer), err)
		}
		items, err := b.readItems(ctx, b.itemsP, payer)
		if err != nil {
			return err
		}
		fp := itemsFingerprint(items)
		if found && cur.Items == fp {
			return nil
		}
		body, err := bson.Marshal(planBodyOf(models.PlanOf(items)))
		if err != nil {
			return fmt.Errorf("plan of %s: %w", payerKey(payer), err)
		}
		if b.beforePlanWrite != nil {
			b.beforePlanWrite()
		}
		if !found {
			doc := planDoc{ID: id, PayerKind: string(payer.Kind), PayerID: payer.ID, Plan: body, Items: fp, Rev: 1, UpdatedAt: now}
			err := translate(insertOne(ctx, b.plansP, doc))
			if errors.Is(err, errDuplicate) {
				continue // another delivery wrote it first
			}
			if err != nil {
				return fmt.Errorf("write the plan of %s: %w", payerKey(payer), err)
			}
			return nil
		}
		set := bson.D{{Key: "plan", Value: bson.Raw(body)}, {Key: "items", Value: fp}}
		if !bytes.Equal(cur.Plan, body) {
			set = append(set, bson.E{Key: "updatedAt", Value: now})
		}
		res, err := updateOne(ctx, b.plansP, bson.D{{Key: "_id", Value: id}, {Key: "rev", Value: cur.Rev}},
			bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "rev", Value: int64(1)}}}})
		if err != nil {
			return fmt.Errorf("write the plan of %s: %w", payerKey(payer), translate(err))
		}
		if res.MatchedCount > 0 {
			return nil
		}
	}
	return fmt.Errorf("plan of %s: concurrent recomputations kept winning: %w", payerKey(payer), models.ErrRetryLater)
}

// itemsFingerprint names the set of item states items are: each item's
// id and version, in item id order.
func itemsFingerprint(items []models.SubscriptionItem) string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = fmt.Sprintf("%s\x00%d\x00%s", it.ItemID, it.SourceUpdatedAt.UnixMilli(), it.LastEventID)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0xff})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// itemsQuery is the read of a payer's items: payerKind_1_payerId_1_sourceUpdatedAt_-1.
func itemsQuery(payer models.Payer) (filter, sort bson.D) { return payerFilter(payer), itemOrder }

// readItems reads payer's items from coll, the newest Clerk time first
// (then the larger item id, as models.PlanOf breaks ties), at most
// models.MaxPayerItems.
func (b *Billing) readItems(ctx context.Context, coll *mongo.Collection, payer models.Payer) ([]models.SubscriptionItem, error) {
	filter, sort := itemsQuery(payer)
	docs, err := findDocs[itemDoc](ctx, coll, filter, options.Find().SetSort(sort).SetLimit(models.MaxPayerItems))
	if err != nil {
		return nil, fmt.Errorf("read the items of %s: %w", payerKey(payer), err)
	}
	items := make([]models.SubscriptionItem, len(docs))
	for i, d := range docs {
		items[i] = d.model()
	}
	slices.SortFunc(items, func(a, b models.SubscriptionItem) int {
		if c := b.SourceUpdatedAt.Compare(a.SourceUpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ItemID, a.ItemID)
	})
	return items, nil
}

// Plan returns the payer's stored plan, or an error wrapping
// models.ErrNotFound when the payer has no item.
func (b *Billing) Plan(ctx context.Context, payer models.Payer) (models.StoredPlan, error) {
	var d planDoc
	if err := findByID(ctx, b.plans, docID(payerKey(payer)), &d, nil); err != nil {
		return models.StoredPlan{}, fmt.Errorf("plan of %s: %w", payerKey(payer), err)
	}
	var body planBody
	if err := bson.Unmarshal(d.Plan, &body); err != nil {
		return models.StoredPlan{}, fmt.Errorf("plan of %s: %w", payerKey(payer), err)
	}
	return models.StoredPlan{PayerPlan: body.model(), UpdatedAt: d.UpdatedAt.UTC()}, nil
}

func (d planDoc) pageID() bson.ObjectID { return d.ID }
func (d planDoc) changedAt() time.Time  { return d.UpdatedAt }

// PlanChanges returns one page of the plans' change feed: the payers'
// plans whose updatedAt is within [f.Since, f.Until], oldest change
// first, then the _id derived from the payer (payerKey), after the cursor
// f.After, read as the users' change feed is (changesPage: the
// updatedAt_1__id_1 index, walked in windows of updatedAt). NextCursor is
// always set; a malformed cursor wraps models.ErrInvalid.
func (b *Billing) PlanChanges(ctx context.Context, f models.ChangeFilter) (models.PlanPage, error) {
	docs, next, err := changesPage(ctx, collSource[planDoc]{b.plans}, &b.density, "plans", f)
	if err != nil {
		return models.PlanPage{}, err
	}
	page := models.PlanPage{Plans: make([]models.StoredPlan, 0, len(docs)), NextCursor: next}
	for _, d := range docs {
		var body planBody
		if err := bson.Unmarshal(d.Plan, &body); err != nil {
			return models.PlanPage{}, fmt.Errorf("plan of %s/%s: %w", d.PayerKind, d.PayerID, err)
		}
		p := models.StoredPlan{PayerPlan: body.model(), UpdatedAt: d.UpdatedAt.UTC()}
		p.Payer.Kind, p.Payer.ID = models.Kind(d.PayerKind), d.PayerID
		page.Plans = append(page.Plans, p)
	}
	return page, nil
}

// Items returns the payer's stored items, the newest Clerk time first, at
// most models.MaxPayerItems.
func (b *Billing) Items(ctx context.Context, payer models.Payer) ([]models.SubscriptionItem, error) {
	return b.readItems(ctx, b.items, payer)
}

// Subscription returns one subscription, or an error wrapping
// models.ErrNotFound.
func (b *Billing) Subscription(ctx context.Context, subscriptionID string) (models.Subscription, error) {
	var d subDoc
	if err := findByID(ctx, b.subs, docID(subscriptionID), &d, nil); err != nil {
		return models.Subscription{}, fmt.Errorf("subscription %s: %w", subscriptionID, err)
	}
	return d.model(), nil
}

// Item returns one subscription item, or an error wrapping
// models.ErrNotFound.
func (b *Billing) Item(ctx context.Context, itemID string) (models.SubscriptionItem, error) {
	var d itemDoc
	if err := findByID(ctx, b.items, docID(itemID), &d, nil); err != nil {
		return models.SubscriptionItem{}, fmt.Errorf("subscription item %s: %w", itemID, err)
	}
	return d.model(), nil
}

// PaymentAttempt returns one payment attempt, or an error wrapping
// models.ErrNotFound.
func (b *Billing) PaymentAttempt(ctx context.Context, attemptID string) (models.PaymentAttempt, error) {
	var d attemptDoc
	if err := findByID(ctx, b.attempts, docID(attemptID), &d, nil); err != nil {
		return models.PaymentAttempt{}, fmt.Errorf("payment attempt %s: %w", attemptID, err)
	}
	return d.model()
}

// attemptsFilter is the filter of one page of payment attempts f: by
// paymentId (paymentId_1_sourceUpdatedAt_-1__id_-1), by payer
// (payerKind_1_payerId_1_sourceUpdatedAt_-1__id_-1) or all
// (sourceUpdatedAt_-1__id_-1), after f's cursor, in attemptOrder. A
// malformed cursor wraps models.ErrInvalid.
func attemptsFilter(f models.PaymentAttemptFilter) (bson.D, error) {
	filter := bson.D{}
	switch {
	case f.PaymentID != "":
		filter = append(filter, bson.E{Key: "paymentId", Value: f.PaymentID})
		if f.Payer != nil {
			filter = append(filter, payerFilter(*f.Payer)...)
		}
	case f.Payer != nil:
		filter = append(filter, payerFilter(*f.Payer)...)
	}
	if f.After != "" {
		// As the event log's cursor (parseEventCursor): sourceUpdatedAt
		// <= at bounds the index range, the $nor leaves out what that
		// millisecond already listed.
		at, id, err := parseEventCursor(f.After)
		if err != nil {
			return nil, err
		}
		filter = append(filter,
			bson.E{Key: "sourceUpdatedAt", Value: bson.D{{Key: "$lte", Value: at}}},
			bson.E{Key: "$nor", Value: bson.A{bson.D{{Key: "sourceUpdatedAt", Value: at}, {Key: "_id", Value: bson.D{{Key: "$gte", Value: id}}}}}})
	}
	return filter, nil
}

// maxAttemptsPage bounds a page of payment attempts whatever the caller
// asks; a limit of 0 or less asks for defaultAttemptsPage.
const (
	maxAttemptsPage     = 1000
	defaultAttemptsPage = 50
)

// PaymentAttempts returns one page of payment attempts as f selects them,
// the newest Clerk time first; NextCursor is "" on the last page.
func (b *Billing) PaymentAttempts(ctx context.Context, f models.PaymentAttemptFilter) (models.PaymentAttemptPage, error) {
	filter, err := attemptsFilter(f)
	if err != nil {
		return models.PaymentAttemptPage{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultAttemptsPage
	}
	limit = min(limit, maxAttemptsPage)
	docs, err := findDocs[attemptDoc](ctx, b.attempts, filter, options.Find().SetSort(attemptOrder).SetLimit(int64(limit+1)))
	if err != nil {
		return models.PaymentAttemptPage{}, fmt.Errorf("list payment attempts: %w", err)
	}
	var page models.PaymentAttemptPage
	if len(docs) > limit {
		docs = docs[:limit]
		last := docs[len(docs)-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.SourceUpdatedAt.UnixMilli(), last.ID.Hex())
	}
	page.Attempts = make([]models.PaymentAttempt, 0, len(docs))
	for _, d := range docs {
		a, err := d.model()
		if err != nil {
			return models.PaymentAttemptPage{}, err
		}
		page.Attempts = append(page.Attempts, a)
	}
	return page, nil
}

// subsFilter is the filter of one page of subscriptions f, or of one
// window of it when w is not nil: of a payer
// (payerKind_1_payerId_1_sourceUpdatedAt_-1__id_-1; a status too is
// checked on the documents), in a status (status_1_sourceUpdatedAt_-1__id_-1)
// or all (sourceUpdatedAt_-1__id_-1), after f's cursor, in subOrder. A
// window bounds sourceUpdatedAt to its keys. A malformed cursor wraps
// models.ErrInvalid.
func subsFilter(f models.SubscriptionFilter, w *window) (bson.D, error) {
	filter := bson.D{}
	if f.Payer != nil {
		filter = append(filter, payerFilter(*f.Payer)...)
	}
	if f.Status != "" {
		filter = append(filter, bson.E{Key: "status", Value: f.Status})
	}
	r := bson.D{}
	var nor bson.E
	if f.After != "" {
		// As the payment attempts' cursor: sourceUpdatedAt <= at bounds
		// the index range, the $nor leaves out what that millisecond
		// already listed.
		at, id, err := parseEventCursor(f.After)
		if err != nil {
			return nil, err
		}
		r = append(r, bson.E{Key: "$lte", Value: at})
		nor = bson.E{Key: "$nor", Value: bson.A{bson.D{{Key: "sourceUpdatedAt", Value: at}, {Key: "_id", Value: bson.D{{Key: "$gte", Value: id}}}}}}
	}
	if w != nil {
		if !w.noHi {
			r = append(r, bson.E{Key: "$lt", Value: keyTime(w.hi)})
		}
		if !w.noLo {
			r = append(r, bson.E{Key: "$gte", Value: keyTime(w.lo)})
		}
	}
	if len(r) > 0 {
		filter = append(filter, bson.E{Key: "sourceUpdatedAt", Value: r})
	}
	if nor.Key != "" {
		filter = append(filter, nor)
	}
	return filter, nil
}

// subsWindowed reports whether a page of subscriptions f is walked in
// windows of sourceUpdatedAt (window.go): unless it is one payer's, whose
// index range holds a few.
func subsWindowed(f models.SubscriptionFilter) bool { return f.Payer == nil }

// defaultSubsWidth is the first window of a kind of page no walk has
// measured yet: a day of subscriptions' Clerk times.
const defaultSubsWidth = uint64(24 * time.Hour / time.Millisecond)

// Subscriptions returns one page of subscriptions as f selects them, the
// newest Clerk time first, then the larger _id; NextCursor is "" on the
// last page. A payer's page is one range of its index; the others walk
// their index down from the cursor (or now) in windows of
// sourceUpdatedAt, each sorted and limited as the page, so that a
// DocumentDB engine sorts a window's matches, not the collection's.
func (b *Billing) Subscriptions(ctx context.Context, f models.SubscriptionFilter) (models.SubscriptionPage, error) {
	if _, err := subsFilter(f, nil); err != nil {
		return models.SubscriptionPage{}, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultAttemptsPage
	}
	limit = min(limit, maxAttemptsPage)
	docs, err := b.subscriptionDocs(ctx, f, limit+1)
	if err != nil {
		return models.SubscriptionPage{}, fmt.Errorf("list subscriptions: %w", err)
	}
	var page models.SubscriptionPage
	if len(docs) > limit {
		docs = docs[:limit]
		last := docs[len(docs)-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.SourceUpdatedAt.UnixMilli(), last.ID.Hex())
	}
	page.Subscriptions = make([]models.Subscription, len(docs))
	for i, d := range docs {
		page.Subscriptions[i] = d.model()
	}
	return page, nil
}

// subscriptionDocs reads the first want subscriptions of f in subOrder.
func (b *Billing) subscriptionDocs(ctx context.Context, f models.SubscriptionFilter, want int) ([]subDoc, error) {
	query := func(w *window, n int) ([]subDoc, error) {
		filter, err := subsFilter(f, w)
		if err != nil {
			return nil, err
		}
		return findDocs[subDoc](ctx, b.subs, filter, options.Find().SetSort(subOrder).SetLimit(int64(n)))
	}
	if !subsWindowed(f) {
		return query(nil, want)
	}
	kind := "subs:" + f.Status
	top := time.Now()
	if f.After != "" {
		top, _, _ = parseEventCursor(f.After)
		top = top.Add(time.Millisecond) // the cursor's millisecond is in the first window
	}
	plan := windowPlan{start: timeKey(top), desc: true, width: defaultSubsWidth}
	if d, ok := b.density.get(kind); ok {
		plan.width = firstWidth(want, d, math.MaxUint64)
	}
	floor := func() error {
		oldest, ok, err := b.oldestSubscription(ctx)
		if err != nil {
			return err
		}
		if !ok {
			oldest = top // none at all: the next window is the last
		}
		plan.end = timeKey(oldest)
		return nil
	}
	docs, _, err := walkWindows(&plan, want, floor, func(w window, n int) ([]subDoc, error) { return query(&w, n) })
	if err != nil {
		return nil, err
	}
	reach := plan.end
	if len(docs) >= want {
		reach = timeKey(docs[len(docs)-1].SourceUpdatedAt)
	}
	b.density.note(kind, len(docs), covered(spanStart(plan, len(docs) > 0, func() uint64 { return timeKey(docs[0].SourceUpdatedAt) }), reach, true))
	return docs, nil
}

// oldestSubscription returns the oldest sourceUpdatedAt of the
// subscriptions, read once through sourceUpdatedAt_-1__id_-1 and kept
// (a subscription stored later with an older time is still found: a
// walk's last window is unbounded below); ok is false when there is none.
func (b *Billing) oldestSubscription(ctx context.Context) (time.Time, bool, error) {
	b.oldest.mu.Lock()
	defer b.oldest.mu.Unlock()
	if !b.oldest.at.IsZero() {
		return b.oldest.at, true, nil
	}
	var d versionDoc
	err := b.subs.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "sourceUpdatedAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetProjection(billingVersionProjection)).Decode(&d)
	if err = translate(err); errors.Is(err, models.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the oldest subscription: %w", err)
	}
	b.oldest.at = d.SourceUpdatedAt.UTC()
	return b.oldest.at, true, nil
}

var _ repository.Billing = (*Billing)(nil)
