package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// The admin's reads of Clerk Billing's objects: a page of payment
// attempts, a page of subscriptions, one subscription.

type listPaymentAttemptsRequest struct {
	PaymentID string `query:"paymentId" validate:"omitempty,clerkid=cpa_"`
	PayerID   string `query:"payerId" validate:"omitempty,max=128"`
	PayerKind string `query:"payerKind" validate:"omitempty,oneof=user organization"`
	Limit     int    `query:"limit" validate:"min=1,max=200"`
	Cursor    string `query:"cursor"` // bounded by the page reader (maxCursor)
}

// payer is the payer the request names: payerId and payerKind go
// together, and the id is a Clerk id of that kind; nil when neither is
// given.
func (r listPaymentAttemptsRequest) payer() (*models.Payer, error) {
	switch {
	case r.PayerID == "" && r.PayerKind == "":
		return nil, nil
	case r.PayerKind == "":
		return nil, models.Public(models.ErrInvalid, "payerId needs payerKind (user or organization)").In("payerKind")
	case r.PayerID == "":
		return nil, models.Public(models.ErrInvalid, "payerKind needs payerId").In("payerId")
	}
	k := models.Kind(r.PayerKind)
	if !k.IsID(r.PayerID) {
		return nil, models.Public(models.ErrInvalid, "payerId must be %s id", k.WithArticle()).In("payerId")
	}
	return &models.Payer{Kind: k, ID: r.PayerID}, nil
}

// listPaymentAttempts answers GET /v1/billing/payment-attempts (admin):
// one page of payment attempts, the newest Clerk time first, of one
// payment (paymentId), of one payer (payerId and payerKind), of both, or
// all.
func (s *server) listPaymentAttempts(c echo.Context) error {
	req := listPaymentAttemptsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	payer, err := req.payer()
	if err != nil {
		return err
	}
	return listPage(s, c, paymentAttemptKind, req.Limit, req.Cursor, false,
		func(ctx context.Context, after string, n int) ([]models.PaymentAttempt, string, error) {
			p, err := s.billing.PaymentAttempts(ctx, models.PaymentAttemptFilter{PaymentID: req.PaymentID, Payer: payer, After: after, Limit: n})
			return p.Attempts, p.NextCursor, err
		})
}

var paymentAttemptKind = pageKind[models.PaymentAttempt]{
	size: paymentAttemptBytes,
	show: func(a models.PaymentAttempt) any { return newPaymentAttemptJSON(a) },
}

// paymentAttemptBytes is about what a holds in memory and in its JSON:
// its totals (up to 8 KiB) and item ids are most of it.
func paymentAttemptBytes(a models.PaymentAttempt) int {
	n := 512 + len(a.AttemptID) + len(a.PaymentID) + len(a.Payer.ID) + len(a.Status) + len(a.ChargeType) +
		len(a.FailedCode) + len(a.FailedDeclineCode) + len(a.Totals) + len(a.LastEventID)
	for _, id := range a.SubscriptionItemIDs {
		n += len(id) + 3
	}
	return n
}

type paymentAttemptJSON struct {
	ID                  string          `json:"id"`
	PaymentID           string          `json:"paymentId"`
	Payer               payerJSON       `json:"payer"`
	Status              string          `json:"status"`
	ChargeType          string          `json:"chargeType,omitempty"`
	PaidAt              *string         `json:"paidAt"`
	FailedAt            *string         `json:"failedAt"`
	FailedCode          string          `json:"failedCode,omitempty"`
	FailedDeclineCode   string          `json:"failedDeclineCode,omitempty"`
	Totals              json.RawMessage `json:"totals"`
	SubscriptionItemIDs []string        `json:"subscriptionItemIds"`
	SourceCreatedAt     *string         `json:"sourceCreatedAt"`
	SourceUpdatedAt     string          `json:"sourceUpdatedAt"`
	LastEventID         string          `json:"lastEventId"`
	CreatedAt           string          `json:"createdAt"`
	UpdatedAt           string          `json:"updatedAt"`
}

func newPaymentAttemptJSON(a models.PaymentAttempt) paymentAttemptJSON {
	j := paymentAttemptJSON{ID: a.AttemptID, PaymentID: a.PaymentID, Payer: payerJSON{Kind: string(a.Payer.Kind), ID: a.Payer.ID},
		Status: a.Status, ChargeType: a.ChargeType, PaidAt: optTime(a.PaidAt), FailedAt: optTime(a.FailedAt),
		FailedCode: a.FailedCode, FailedDeclineCode: a.FailedDeclineCode, Totals: a.Totals,
		SubscriptionItemIDs: a.SubscriptionItemIDs, SourceCreatedAt: optTime(a.SourceCreatedAt),
		SourceUpdatedAt: formatTime(a.SourceUpdatedAt), LastEventID: a.LastEventID,
		CreatedAt: formatTime(a.CreatedAt), UpdatedAt: formatTime(a.UpdatedAt)}
	if j.Totals == nil {
		j.Totals = json.RawMessage("null")
	}
	if j.SubscriptionItemIDs == nil {
		j.SubscriptionItemIDs = []string{}
	}
	return j
}

type listSubscriptionsRequest struct {
	PayerID   string `query:"payerId" validate:"omitempty,max=128"`
	PayerKind string `query:"payerKind" validate:"omitempty,oneof=user organization"`
	Status    string `query:"status"` // checked by status
	Limit     int    `query:"limit" validate:"min=1,max=200"`
	Cursor    string `query:"cursor"` // bounded by the page reader (maxCursor)
}

// maxSubscriptionStatus bounds the status filter: what a subscription's
// status may be when it is stored (models.ClerkSubscription's, 32).
const maxSubscriptionStatus = 32

// status is the status the request filters by: Clerk's value as stored
// (active, past_due, …), 1 to 32 lowercase letters and underscores, or
// "" when none is given. A status no subscription is in lists nothing.
func (r listSubscriptionsRequest) status() (string, error) {
	if len(r.Status) > maxSubscriptionStatus {
		return "", models.Public(models.ErrInvalid, "status must be at most %d characters", maxSubscriptionStatus).In("status")
	}
	for _, c := range r.Status {
		if (c < 'a' || c > 'z') && c != '_' {
			return "", models.Public(models.ErrInvalid, "status must be a Clerk subscription status: lowercase letters and _ (active, past_due, …)").In("status")
		}
	}
	return r.Status, nil
}

// listSubscriptions answers GET /v1/billing/subscriptions (admin): one
// page of subscriptions, the newest Clerk time first, of one payer
// (payerId and payerKind), in one status, of both, or all.
func (s *server) listSubscriptions(c echo.Context) error {
	req := listSubscriptionsRequest{Limit: 50}
	if err := bind(c, &req); err != nil {
		return err
	}
	payer, err := listPaymentAttemptsRequest{PayerID: req.PayerID, PayerKind: req.PayerKind}.payer()
	if err != nil {
		return err
	}
	status, err := req.status()
	if err != nil {
		return err
	}
	return listPage(s, c, subscriptionKind, req.Limit, req.Cursor, false,
		func(ctx context.Context, after string, n int) ([]models.Subscription, string, error) {
			p, err := s.billing.Subscriptions(ctx, models.SubscriptionFilter{Payer: payer, Status: status, After: after, Limit: n})
			return p.Subscriptions, p.NextCursor, err
		})
}

var subscriptionKind = pageKind[models.Subscription]{
	size: subscriptionBytes,
	show: func(sub models.Subscription) any { return newSubscriptionJSON(sub) },
}

// subscriptionBytes is about what sub holds in memory and in its JSON.
func subscriptionBytes(sub models.Subscription) int {
	return 512 + len(sub.SubscriptionID) + len(sub.Payer.ID) + len(sub.Payer.PayerID) + len(sub.Status) +
		len(sub.LatestPaymentID) + len(sub.PaymentSourceID) + len(sub.LastEventID)
}

type getSubscriptionRequest struct {
	SubscriptionID string `param:"subscriptionId" validate:"required,clerkid=csub_"`
}

// getSubscription answers GET /v1/billing/subscriptions/{subscriptionId}
// (admin): the subscription's newest state applied; its items are read
// by payer (GET /v1/users/{userId}/billing).
func (s *server) getSubscription(c echo.Context) error {
	var req getSubscriptionRequest
	if err := bind(c, &req); err != nil {
		return err
	}
	sub, err := s.billing.Subscription(c.Request().Context(), req.SubscriptionID)
	if err != nil {
		return notFound(err, "subscription", req.SubscriptionID)
	}
	return c.JSON(http.StatusOK, newSubscriptionJSON(sub))
}

type subscriptionJSON struct {
	ID              string    `json:"id"`
	Payer           payerJSON `json:"payer"`
	Status          string    `json:"status"`
	ActiveAt        *string   `json:"activeAt"`
	CanceledAt      *string   `json:"canceledAt"`
	EndedAt         *string   `json:"endedAt"`
	PastDueAt       *string   `json:"pastDueAt"`
	LatestPaymentID string    `json:"latestPaymentId,omitempty"`
	PaymentSourceID string    `json:"paymentSourceId,omitempty"`
	SourceCreatedAt *string   `json:"sourceCreatedAt"`
	SourceUpdatedAt string    `json:"sourceUpdatedAt"`
	LastEventID     string    `json:"lastEventId"`
	CreatedAt       string    `json:"createdAt"`
	UpdatedAt       string    `json:"updatedAt"`
}

func newSubscriptionJSON(s models.Subscription) subscriptionJSON {
	return subscriptionJSON{ID: s.SubscriptionID, Payer: payerJSON{Kind: string(s.Payer.Kind), ID: s.Payer.ID}, Status: s.Status,
		ActiveAt: optTime(s.ActiveAt), CanceledAt: optTime(s.CanceledAt), EndedAt: optTime(s.EndedAt), PastDueAt: optTime(s.PastDueAt),
		LatestPaymentID: s.LatestPaymentID, PaymentSourceID: s.PaymentSourceID, SourceCreatedAt: optTime(s.SourceCreatedAt),
		SourceUpdatedAt: formatTime(s.SourceUpdatedAt), LastEventID: s.LastEventID,
		CreatedAt: formatTime(s.CreatedAt), UpdatedAt: formatTime(s.UpdatedAt)}
}
