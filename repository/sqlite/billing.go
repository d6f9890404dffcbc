package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Billing is the Clerk Billing tables: subscriptions, subscription_items,
// payment_attempts and billing_plans (schema 9).
type Billing struct{ s *Store }

var _ repository.Billing = (*Billing)(nil)

// payerKey is a payer as the tables key it: its kind and its user or
// organization id.
type payerKey struct{ kind, id string }

func keyOf(p models.Payer) payerKey { return payerKey{string(p.Kind), p.ID} }

// payers is the payers whose plan a write changes, each once, in the
// order met.
type payers []payerKey

func (ps *payers) add(k payerKey) {
	for _, p := range *ps {
		if p == k {
			return
		}
	}
	*ps = append(*ps, k)
}

// applySubscription applies ch in t: the subscription by its version,
// then each item it lists through the write of a standalone item event
// (writeItem), then the plan of each payer an item write touched, once.
// The outcome is applied when the subscription or any item was written
// or found written by this very event (a retry), stale when every state
// was older than the stored one.
func applySubscription(t *wtx, ch models.SubscriptionChange, now time.Time) (models.Outcome, error) {
	cur, err := billingVersion(t, qSubscriptionVersion, ch.SubscriptionID)
	if err != nil {
		return "", err
	}
	d := models.Decide(cur, ch.Version())
	applied := d != models.DecideStale
	if d.Writes() {
		p := ch.Payer
		_, err := t.exec(qSubscriptionUpsert, ch.SubscriptionID, string(p.Kind), p.ID, text(p.PayerID), ch.Status,
			msPtr(ch.ActiveAt), msPtr(ch.CanceledAt), msPtr(ch.EndedAt), msPtr(ch.PastDueAt), text(ch.LatestPaymentID),
			text(ch.PaymentSourceID), msPtr(ch.SourceCreatedAt), ms(ch.SourceTime), ch.EventID, ms(now))
		if err != nil {
			return "", err
		}
	}
	var touched payers
	for _, it := range ch.Items {
		d, err := writeItem(t, it, now, &touched)
		if err != nil {
			return "", err
		}
		applied = applied || d != models.DecideStale
	}
	if err := recomputePlans(t, touched, now); err != nil {
		return "", err
	}
	if !applied {
		return models.OutcomeStale, nil
	}
	return models.OutcomeApplied, nil
}

// applyItem applies a standalone item state in t, and recomputes the plan
// of its payer (of both, when the item changed payer).
func applyItem(t *wtx, ch models.SubscriptionItemChange, now time.Time) (models.Outcome, error) {
	var touched payers
	d, err := writeItem(t, ch, now, &touched)
	if err != nil {
		return "", err
	}
	if err := recomputePlans(t, touched, now); err != nil {
		return "", err
	}
	return d.Outcome(), nil
}

// writeItem writes one item's state in t as models.Decide says, and adds
// to touched the payers whose plan the write may change: the item's, and
// its previous payer's when the stored state had another.
func writeItem(t *wtx, ch models.SubscriptionItemChange, now time.Time, touched *payers) (models.Decision, error) {
	var (
		source         int64
		eventID        string
		oldKind, oldID string
		cur            *models.Version
	)
	switch err := t.row(qItemVersion, ch.ItemID).Scan(&source, &eventID, &oldKind, &oldID); {
	case err == nil:
		cur = &models.Version{SourceTime: fromMS(source), EventID: eventID}
	case err != sql.ErrNoRows:
		return 0, translate(err)
	}
	d := models.Decide(cur, ch.Version())
	if !d.Writes() {
		return d, nil
	}
	it := ch.SubscriptionItem
	_, err := t.exec(qItemUpsert, it.ItemID, text(it.SubscriptionID), string(it.Payer.Kind), it.Payer.ID, text(it.Payer.PayerID),
		string(it.Status), it.IsFreeTrial, msPtr(it.PeriodStart), msPtr(it.PeriodEnd), text(it.Interval),
		it.Plan.ID, it.Plan.Slug, text(it.Plan.Name), nullInt(it.Plan.Amount), text(it.Plan.Currency), it.Plan.IsRecurring,
		nullInt(it.Seats), msPtr(it.SourceCreatedAt), ms(it.SourceUpdatedAt), it.LastEventID, ms(now))
	if err != nil {
		return 0, err
	}
	touched.add(keyOf(it.Payer))
	if cur != nil {
		touched.add(payerKey{oldKind, oldID})
	}
	return d, nil
}

// recomputePlans recomputes the plan of each payer in t (recomputePlan).
func recomputePlans(t *wtx, ps payers, now time.Time) error {
	for _, p := range ps {
		if err := recomputePlan(t, p, now); err != nil {
			return err
		}
	}
	return nil
}

// recomputePlan computes the payer's plan from its items, read through
// subscription_items_payer, the newest models.MaxPayerItems of them (each
// plan a payer was ever on is one item: a payer past the bound has its
// plan from its newest items, which hold every item that gives a plan
// now unless it has been on that many plans since), and writes it only
// when it changed: updated_at moves only then. A payer left without items
// (its only item moved to another payer) has no plan any more.
func recomputePlan(t *wtx, p payerKey, now time.Time) error {
	rows, err := t.query(qPayerItems, p.kind, p.id, models.MaxPayerItems)
	if err != nil {
		return err
	}
	var items []models.SubscriptionItem
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			rows.Close()
			return err
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	if len(items) == 0 {
		_, err := t.exec(qPlanDelete, p.kind, p.id)
		return err
	}
	doc, err := json.Marshal(planDocOf(models.PlanOf(items)))
	if err != nil {
		return err
	}
	var stored string
	switch err := t.row(qPlanGet, p.kind, p.id).Scan(&stored, new(int64)); {
	case err == nil && stored == string(doc):
		return nil
	case err != nil && err != sql.ErrNoRows:
		return translate(err)
	}
	_, err = t.exec(qPlanUpsert, p.kind, p.id, string(doc), ms(now))
	return err
}

// applyPaymentAttempt writes ch to its attempt in t as models.Decide says.
func applyPaymentAttempt(t *wtx, ch models.PaymentAttemptChange, now time.Time) (models.Outcome, error) {
	var totals any
	if len(ch.Totals) > 0 {
		s, err := objectJSON(ch.Totals, "payment attempt "+ch.AttemptID+" totals")
		if err != nil {
			return "", err
		}
		totals = s
	}
	ids := ch.SubscriptionItemIDs
	if ids == nil {
		ids = []string{}
	}
	itemIDs, err := json.Marshal(ids)
	if err != nil {
		return "", err
	}
	cur, err := billingVersion(t, qAttemptVersion, ch.AttemptID)
	if err != nil {
		return "", err
	}
	d := models.Decide(cur, ch.Version())
	if !d.Writes() {
		return d.Outcome(), nil
	}
	p := ch.Payer
	_, err = t.exec(qAttemptUpsert, ch.AttemptID, ch.PaymentID, string(p.Kind), p.ID, text(p.PayerID), ch.Status,
		text(ch.ChargeType), msPtr(ch.PaidAt), msPtr(ch.FailedAt), text(ch.FailedCode), text(ch.FailedDeclineCode),
		totals, string(itemIDs), msPtr(ch.SourceCreatedAt), ms(ch.SourceTime), ch.EventID, ms(now))
	return d.Outcome(), err
}

// billingVersion reads the stored version of one billing object with q,
// which selects source_updated_at and last_event_id by id; nil when the
// object is unknown.
func billingVersion(t *wtx, q, id string) (*models.Version, error) {
	var (
		source  int64
		eventID string
	)
	switch err := t.row(q, id).Scan(&source, &eventID); {
	case err == sql.ErrNoRows:
		return nil, nil
	case err != nil:
		return nil, translate(err)
	}
	return &models.Version{SourceTime: fromMS(source), EventID: eventID}, nil
}

// Plan returns the payer's stored plan, or an error wrapping
// models.ErrNotFound when the payer has no item (the primary key of
// billing_plans).
func (b *Billing) Plan(ctx context.Context, payer models.Payer) (models.StoredPlan, error) {
	var (
		doc     string
		updated int64
	)
	if err := b.s.r.QueryRowContext(ctx, qPlanGet, string(payer.Kind), payer.ID).Scan(&doc, &updated); err != nil {
		return models.StoredPlan{}, fmt.Errorf("plan of %s %q: %w", payer.Kind, payer.ID, translate(err))
	}
	var d planDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return models.StoredPlan{}, fmt.Errorf("plan of %s %q: %w", payer.Kind, payer.ID, errDamaged)
	}
	return models.StoredPlan{PayerPlan: d.plan(), UpdatedAt: fromMS(updated)}, nil
}

// PlanChanges returns the payers' plans whose updated_at is within
// [f.Since, f.Until], oldest change first, then the payer (its kind, then
// its id): one range of billing_plans_changes from the cursor f.After on.
// The cursor is "<ms>_<kind>/<id>" of the page's last plan, as the other
// change feeds' "<ms>_<id>"; a malformed one wraps models.ErrInvalid.
// NextCursor is always set.
func (b *Billing) PlanChanges(ctx context.Context, f models.ChangeFilter) (models.PlanPage, error) {
	if _, payer, _ := strings.Cut(f.After, "_"); f.After != "" && !strings.Contains(payer, "/") {
		return models.PlanPage{}, models.ErrBadCursor()
	}
	from, at, after, next, err := feedWindow(f)
	if err != nil {
		return models.PlanPage{}, err
	}
	// A kind holds no "/": "<kind>/<id>" orders as (kind, id) does.
	kind, id, _ := strings.Cut(after, "/")
	plans, err := readAll(ctx, b.s.r, qPlanChanges, scanPlanChange, from, f.Until.UnixMilli(), at, kind, id, max(f.Limit, 1))
	if err != nil {
		return models.PlanPage{}, fmt.Errorf("list changed plans: %w", err)
	}
	if n := len(plans); n > 0 {
		last := plans[n-1]
		next = feedCursor(last.UpdatedAt, string(last.Payer.Kind)+"/"+last.Payer.ID)
	}
	return models.PlanPage{Plans: plans, NextCursor: next}, nil
}

// scanPlanChange reads a row of qPlanChanges.
func scanPlanChange(r scanner) (models.StoredPlan, error) {
	var (
		kind, id, doc string
		updated       int64
	)
	if err := r.Scan(&kind, &id, &doc, &updated); err != nil {
		return models.StoredPlan{}, translate(err)
	}
	var d planDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return models.StoredPlan{}, fmt.Errorf("plan of %s %q: %w", kind, id, errDamaged)
	}
	p := models.StoredPlan{PayerPlan: d.plan(), UpdatedAt: fromMS(updated)}
	// The row's key is the payer (the document holds it too).
	p.Payer.Kind, p.Payer.ID = models.Kind(kind), id
	return p, nil
}

// Items returns the payer's stored items, the newest Clerk time first (then
// the larger item id), at most models.MaxPayerItems
// (subscription_items_payer, backwards).
func (b *Billing) Items(ctx context.Context, payer models.Payer) ([]models.SubscriptionItem, error) {
	items, err := readAll(ctx, b.s.r, qPayerItems, scanItem, string(payer.Kind), payer.ID, models.MaxPayerItems)
	if err != nil {
		return nil, fmt.Errorf("items of %s %q: %w", payer.Kind, payer.ID, err)
	}
	return items, nil
}

// Subscription returns one subscription (the primary key), or an error
// wrapping models.ErrNotFound.
func (b *Billing) Subscription(ctx context.Context, subscriptionID string) (models.Subscription, error) {
	sub, err := scanSubscription(b.s.r.QueryRowContext(ctx, qSubscriptionGet, subscriptionID))
	if err != nil {
		return models.Subscription{}, fmt.Errorf("subscription %q: %w", subscriptionID, err)
	}
	return sub, nil
}

// Item returns one subscription item (the primary key), or an error
// wrapping models.ErrNotFound.
func (b *Billing) Item(ctx context.Context, itemID string) (models.SubscriptionItem, error) {
	it, err := scanItem(b.s.r.QueryRowContext(ctx, `SELECT `+itemColumns+` FROM subscription_items WHERE item_id = ?`, itemID))
	if err != nil {
		return it, fmt.Errorf("subscription item %q: %w", itemID, err)
	}
	return it, nil
}

// PaymentAttempt returns one payment attempt (the primary key), or an
// error wrapping models.ErrNotFound.
func (b *Billing) PaymentAttempt(ctx context.Context, attemptID string) (models.PaymentAttempt, error) {
	a, err := scanAttempt(b.s.r.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM payment_attempts WHERE attempt_id = ?`, attemptID))
	if err != nil {
		return a, fmt.Errorf("payment attempt %q: %w", attemptID, err)
	}
	return a, nil
}

// PaymentAttempts returns one page of payment attempts, the newest Clerk
// time (source_updated_at) first, then the larger attempt id: those of
// f.PaymentID (payment_attempts_payment; with a payer too, it is checked
// on the rows), else those of f.Payer (payment_attempts_payer), else all
// (payment_attempts_time), each one range of its index from the cursor
// on. The cursor is "<ms>_<attemptId>" of the page's last attempt; a
// malformed one wraps models.ErrInvalid. A Limit below 1 is read as 1.
func (b *Billing) PaymentAttempts(ctx context.Context, f models.PaymentAttemptFilter) (models.PaymentAttemptPage, error) {
	at, after := int64(math.MaxInt64), ""
	if f.After != "" {
		n, id, ok := strings.Cut(f.After, "_")
		c, err := cursorInt(n)
		if err != nil || !ok || id == "" {
			return models.PaymentAttemptPage{}, models.ErrBadCursor()
		}
		at, after = c, id
	}
	limit := max(f.Limit, 1)
	var q string
	var args []any
	switch {
	case f.PaymentID != "":
		kind, id := "", ""
		if f.Payer != nil {
			kind, id = string(f.Payer.Kind), f.Payer.ID
		}
		q, args = qAttemptsByPayment, []any{f.PaymentID, kind, id, at, after, limit + 1}
	case f.Payer != nil:
		q, args = qAttemptsByPayer, []any{string(f.Payer.Kind), f.Payer.ID, at, after, limit + 1}
	default:
		q, args = qAttemptsAll, []any{at, after, limit + 1}
	}
	attempts, err := readAll(ctx, b.s.r, q, scanAttempt, args...)
	if err != nil {
		return models.PaymentAttemptPage{}, fmt.Errorf("list payment attempts: %w", err)
	}
	page := models.PaymentAttemptPage{Attempts: attempts}
	if len(attempts) > limit {
		page.Attempts = attempts[:limit]
		last := page.Attempts[limit-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.SourceUpdatedAt.UnixMilli(), last.AttemptID)
	}
	return page, nil
}

// Subscriptions returns one page of subscriptions, the newest Clerk time
// (source_updated_at) first, then the larger subscription id: those of
// f.Payer (subscriptions_payer; with a status too, it is checked on the
// rows: a payer has a few), else those in f.Status
// (subscriptions_status), else all (subscriptions_time), each one range
// of its index from the cursor on. The cursor is "<ms>_<subscriptionId>"
// of the page's last subscription; a malformed one wraps
// models.ErrInvalid. A Limit below 1 is read as 1.
func (b *Billing) Subscriptions(ctx context.Context, f models.SubscriptionFilter) (models.SubscriptionPage, error) {
	at, after := int64(math.MaxInt64), ""
	if f.After != "" {
		n, id, ok := strings.Cut(f.After, "_")
		c, err := cursorInt(n)
		if err != nil || !ok || id == "" {
			return models.SubscriptionPage{}, models.ErrBadCursor()
		}
		at, after = c, id
	}
	limit := max(f.Limit, 1)
	var q string
	var args []any
	switch {
	case f.Payer != nil:
		q, args = qSubscriptionsByPayer, []any{string(f.Payer.Kind), f.Payer.ID, f.Status, at, after, limit + 1}
	case f.Status != "":
		q, args = qSubscriptionsByStatus, []any{f.Status, at, after, limit + 1}
	default:
		q, args = qSubscriptionsAll, []any{at, after, limit + 1}
	}
	subs, err := readAll(ctx, b.s.r, q, scanSubscription, args...)
	if err != nil {
		return models.SubscriptionPage{}, fmt.Errorf("list subscriptions: %w", err)
	}
	page := models.SubscriptionPage{Subscriptions: subs}
	if len(subs) > limit {
		page.Subscriptions = subs[:limit]
		last := page.Subscriptions[limit-1]
		page.NextCursor = fmt.Sprintf("%d_%s", last.SourceUpdatedAt.UnixMilli(), last.SubscriptionID)
	}
	return page, nil
}

// subscriptionColumns, itemColumns and attemptColumns are the columns each
// is read from, in its scan's order.
const (
	subscriptionColumns = `subscription_id, payer_kind, payer_id, clerk_payer_id, status, active_at, canceled_at, ended_at,
	past_due_at, latest_payment_id, payment_source_id, source_created_at, source_updated_at, last_event_id, created_at, updated_at`
	itemColumns = `item_id, subscription_id, payer_kind, payer_id, clerk_payer_id, status, is_free_trial, period_start,
	period_end, interval, plan_id, plan_slug, plan_name, plan_amount, plan_currency, plan_is_recurring, seats,
	source_created_at, source_updated_at, last_event_id, created_at, updated_at`
	attemptColumns = `attempt_id, payment_id, payer_kind, payer_id, clerk_payer_id, status, charge_type, paid_at, failed_at,
	failed_code, failed_decline_code, totals, subscription_item_ids, source_created_at, source_updated_at, last_event_id,
	created_at, updated_at`
)

func scanSubscription(r scanner) (models.Subscription, error) {
	var (
		s                                       models.Subscription
		kind                                    string
		clerkPayer, latest, source              sql.NullString
		active, canceled, ended, pastDue, srcCr sql.NullInt64
		srcUp, created, updated                 int64
	)
	err := r.Scan(&s.SubscriptionID, &kind, &s.Payer.ID, &clerkPayer, &s.Status, &active, &canceled, &ended, &pastDue,
		&latest, &source, &srcCr, &srcUp, &s.LastEventID, &created, &updated)
	if err != nil {
		return models.Subscription{}, translate(err)
	}
	s.Payer.Kind, s.Payer.PayerID = models.Kind(kind), clerkPayer.String
	s.ActiveAt, s.CanceledAt, s.EndedAt, s.PastDueAt = timePtr(active), timePtr(canceled), timePtr(ended), timePtr(pastDue)
	s.LatestPaymentID, s.PaymentSourceID, s.SourceCreatedAt = latest.String, source.String, timePtr(srcCr)
	s.SourceUpdatedAt, s.CreatedAt, s.UpdatedAt = fromMS(srcUp), fromMS(created), fromMS(updated)
	return s, nil
}

func scanItem(r scanner) (models.SubscriptionItem, error) {
	var (
		it                                          models.SubscriptionItem
		kind, status                                string
		subID, clerkPayer, interval, name, currency sql.NullString
		start, end, amount, seats, srcCr            sql.NullInt64
		srcUp, created, updated                     int64
	)
	err := r.Scan(&it.ItemID, &subID, &kind, &it.Payer.ID, &clerkPayer, &status, &it.IsFreeTrial, &start, &end, &interval,
		&it.Plan.ID, &it.Plan.Slug, &name, &amount, &currency, &it.Plan.IsRecurring, &seats, &srcCr, &srcUp, &it.LastEventID,
		&created, &updated)
	if err != nil {
		return models.SubscriptionItem{}, translate(err)
	}
	it.SubscriptionID, it.Payer.Kind, it.Payer.PayerID = subID.String, models.Kind(kind), clerkPayer.String
	it.Status, it.PeriodStart, it.PeriodEnd, it.Interval = models.ItemStatus(status), timePtr(start), timePtr(end), interval.String
	it.Plan.Name, it.Plan.Amount, it.Plan.Currency = name.String, intPtr(amount), currency.String
	it.Seats, it.SourceCreatedAt, it.SourceUpdatedAt = intPtr(seats), timePtr(srcCr), fromMS(srcUp)
	it.CreatedAt, it.UpdatedAt = fromMS(created), fromMS(updated)
	return it, nil
}

func scanAttempt(r scanner) (models.PaymentAttempt, error) {
	var (
		a                                         models.PaymentAttempt
		kind, itemIDs                             string
		clerkPayer, charge, code, decline, totals sql.NullString
		paid, failed, srcCr                       sql.NullInt64
		srcUp, created, updated                   int64
	)
	err := r.Scan(&a.AttemptID, &a.PaymentID, &kind, &a.Payer.ID, &clerkPayer, &a.Status, &charge, &paid, &failed,
		&code, &decline, &totals, &itemIDs, &srcCr, &srcUp, &a.LastEventID, &created, &updated)
	if err != nil {
		return models.PaymentAttempt{}, translate(err)
	}
	a.Payer.Kind, a.Payer.PayerID, a.ChargeType = models.Kind(kind), clerkPayer.String, charge.String
	a.PaidAt, a.FailedAt, a.FailedCode, a.FailedDeclineCode = timePtr(paid), timePtr(failed), code.String, decline.String
	what := fmt.Sprintf("payment attempt %q", a.AttemptID)
	if totals.Valid {
		if a.Totals, err = damagedJSON(what+" totals", totals.String); err != nil {
			return models.PaymentAttempt{}, err
		}
	}
	if err := json.Unmarshal([]byte(itemIDs), &a.SubscriptionItemIDs); err != nil {
		return models.PaymentAttempt{}, fmt.Errorf("%s subscription items: %w", what, errDamaged)
	}
	if len(a.SubscriptionItemIDs) == 0 {
		a.SubscriptionItemIDs = nil
	}
	a.SourceCreatedAt, a.SourceUpdatedAt, a.CreatedAt, a.UpdatedAt = timePtr(srcCr), fromMS(srcUp), fromMS(created), fromMS(updated)
	return a, nil
}

// planDoc is models.PayerPlan as billing_plans keeps it, a JSON object:
// times are Unix milliseconds, nil is null. Its keys are the stored
// format: rename none.
type planDoc struct {
	PayerKind           string       `json:"payerKind"`
	PayerID             string       `json:"payerId"`
	ClerkPayerID        string       `json:"clerkPayerId"`
	Status              string       `json:"status"`
	Plan                *planDocPlan `json:"plan"`
	ItemID              string       `json:"itemId"`
	FreeTrial           bool         `json:"freeTrial"`
	PeriodEnd           *int64       `json:"periodEnd"`
	CanceledAtPeriodEnd bool         `json:"canceledAtPeriodEnd"`
	Seats               *int64       `json:"seats"`
	Upcoming            *upcomingDoc `json:"upcoming"`
}

type planDocPlan struct {
	ID          string `json:"id"`
	Slug        string `json:"slug"`
	Name        string `json:"name"`
	Amount      *int64 `json:"amount"`
	Currency    string `json:"currency"`
	IsRecurring bool   `json:"isRecurring"`
}

type upcomingDoc struct {
	Plan        planDocPlan `json:"plan"`
	ItemID      string      `json:"itemId"`
	PeriodStart *int64      `json:"periodStart"`
	Seats       *int64      `json:"seats"`
	FreeTrial   bool        `json:"freeTrial"`
}

func msOf(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	n := t.UnixMilli()
	return &n
}

func timeOf(n *int64) *time.Time {
	if n == nil {
		return nil
	}
	t := fromMS(*n)
	return &t
}

func docOfPlan(p models.BillingPlan) planDocPlan {
	return planDocPlan{p.ID, p.Slug, p.Name, p.Amount, p.Currency, p.IsRecurring}
}

func (d planDocPlan) plan() models.BillingPlan {
	return models.BillingPlan{ID: d.ID, Slug: d.Slug, Name: d.Name, Amount: d.Amount, Currency: d.Currency, IsRecurring: d.IsRecurring}
}

func planDocOf(p models.PayerPlan) planDoc {
	d := planDoc{
		PayerKind: string(p.Payer.Kind), PayerID: p.Payer.ID, ClerkPayerID: p.Payer.PayerID, Status: string(p.Status),
		ItemID: p.ItemID, FreeTrial: p.FreeTrial, PeriodEnd: msOf(p.PeriodEnd), CanceledAtPeriodEnd: p.CanceledAtPeriodEnd,
		Seats: p.Seats,
	}
	if p.Plan != nil {
		plan := docOfPlan(*p.Plan)
		d.Plan = &plan
	}
	if u := p.Upcoming; u != nil {
		d.Upcoming = &upcomingDoc{Plan: docOfPlan(u.Plan), ItemID: u.ItemID, PeriodStart: msOf(u.PeriodStart), Seats: u.Seats,
			FreeTrial: u.FreeTrial}
	}
	return d
}

func (d planDoc) plan() models.PayerPlan {
	p := models.PayerPlan{
		Payer:  models.Payer{Kind: models.Kind(d.PayerKind), ID: d.PayerID, PayerID: d.ClerkPayerID},
		Status: models.PlanStatus(d.Status), ItemID: d.ItemID, FreeTrial: d.FreeTrial, PeriodEnd: timeOf(d.PeriodEnd),
		CanceledAtPeriodEnd: d.CanceledAtPeriodEnd, Seats: d.Seats,
	}
	if d.Plan != nil {
		plan := d.Plan.plan()
		p.Plan = &plan
	}
	if u := d.Upcoming; u != nil {
		p.Upcoming = &models.UpcomingPlan{Plan: u.Plan.plan(), ItemID: u.ItemID, PeriodStart: timeOf(u.PeriodStart), Seats: u.Seats,
			FreeTrial: u.FreeTrial}
	}
	return p
}
