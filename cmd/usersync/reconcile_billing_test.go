package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/usersync/usersync/models"
)

// The items of the billing tests: a user's pro plan, ended when the user
// moved to the team plan (a new item), and another user's free plan.
const (
	billingPayer  = "user_billing000"
	freePayer     = "user_billing001"
	proItemID     = "csub_item_recProPlan0000000000"
	teamItemID    = "csub_item_recTeamPlan000000000"
	freeItemID    = "csub_item_recFreePlan000000000"
	proPlanID     = "cplan_recProPlan00000000000000"
	teamPlanID    = "cplan_recTeamPlan0000000000000"
	freePlanID    = "cplan_recFreePlan0000000000000"
	proEndedAt    = baseUpdatedAt + 500_000
	teamStartedAt = proEndedAt + 3
)

// clerkItemData is a subscription item as Clerk's API serves it (the data
// of a subscriptionItem.* event): of payer userID, on plan planID (slug)
// costing amount, in status, last changed at updatedAt.
func clerkItemData(itemID, userID, planID, slug string, amount int64, status string, updatedAt int64) map[string]any {
	return map[string]any{
		"object": "subscription_item", "id": itemID, "status": status, "is_free_trial": false,
		"created_at": baseUpdatedAt, "updated_at": updatedAt, "period_start": baseUpdatedAt, "period_end": nil,
		"interval": "month", "plan_id": planID,
		"plan":  map[string]any{"id": planID, "slug": slug, "name": slug, "is_recurring": amount > 0, "amount": amount, "currency": "USD"},
		"seats": map[string]any{"quantity": 5},
		"payer": map[string]any{
			"object": "commerce_payer", "id": "cpayer_" + userID[len("user_"):], "user_id": userID, "organization_id": "",
			"first_name": "Person", "email": "person@example.org",
		},
		"subscription_id": "csub_rec" + userID[len("user_"):],
	}
}

func proEnded() map[string]any {
	return clerkItemData(proItemID, billingPayer, proPlanID, "pro-plan", 2000, "ended", proEndedAt)
}
func teamActive() map[string]any {
	return clerkItemData(teamItemID, billingPayer, teamPlanID, "team-plan", 5000, "active", teamStartedAt)
}
func freeActive() map[string]any {
	return clerkItemData(freeItemID, freePayer, freePlanID, "free-plan", 0, "active", baseUpdatedAt+10)
}

// clerkHasItems gives the fake Clerk these items, newest first, as its
// list serves them.
func (e *backfillEnv) clerkHasItems(t *testing.T, items ...map[string]any) {
	t.Helper()
	raws := make([]json.RawMessage, len(items))
	for i, it := range items {
		raws[i] = rawJSON(t, it)
	}
	e.clerk.SetSubscriptionItems(raws)
}

// plan returns the stored plan of user payer; ok is false when it has none.
func (e *backfillEnv) plan(t *testing.T, userID string) (p models.StoredPlan, ok bool) {
	t.Helper()
	p, err := e.store.Billing().Plan(context.Background(), models.Payer{Kind: models.KindUser, ID: userID})
	if err != nil {
		return p, false
	}
	return p, true
}

func planSlug(p models.StoredPlan) string {
	if p.Plan == nil {
		return "(none)"
	}
	return p.Plan.Slug
}

func TestReconcile_RepairsAPlanWhoseWebhooksWereLost(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, nil)
	// The pro item's end arrived; the team item's webhooks were lost: the
	// plan is pending with pro.
	e.ingest(t, "msg_pro_ended", webhook(t, models.TypeSubscriptionItemEnded, proEndedAt, proEnded()))
	if p, ok := e.plan(t, billingPayer); !ok || p.Status != models.PlanPending || planSlug(p) != "pro-plan" {
		t.Fatalf("before the reconcile: plan %+v (%v), want pending with pro-plan", p.PayerPlan, ok)
	}
	e.clerkHasItems(t, teamActive(), proEnded())

	out := e.mustCommand(t, "reconcile", "-dry-run", "-kinds", "subscription_items")
	wantLine(t, out, "reconcile: subscription_items offset 0: subscription_item "+teamItemID+": would create")
	wantLine(t, out, "reconcile: dry run, nothing changed: subscription_items in Clerk 2, local subscription_items not read, applied 1, stale 0, deleted 0, unchanged 1, failed 0")
	if p, _ := e.plan(t, billingPayer); p.Status != models.PlanPending {
		t.Fatalf("a dry run changed the plan: %+v", p.PayerPlan)
	}

	out = e.mustCommand(t, "reconcile")
	wantLine(t, out, "reconcile: subscription_items offset 0: 2 subscription_items (applied 1, stale 0, unchanged 1, failed 0)")
	wantLine(t, out, "reconcile: done: subscription_items in Clerk 2, local subscription_items not read, applied 1, stale 0, deleted 0, unchanged 1, failed 0")
	p, ok := e.plan(t, billingPayer)
	if !ok || p.Status != models.PlanActive || planSlug(p) != "team-plan" || p.ItemID != teamItemID {
		t.Fatalf("after the reconcile: plan %+v, want active with team-plan from %s", p.PayerPlan, teamItemID)
	}
	// The run's summary keeps the items' counts as the line prints them
	// (local not read: -1).
	runs, err := e.store.Runs().Last(context.Background(), 1)
	if err != nil || len(runs) != 1 || runs[0].SubscriptionItems == nil ||
		*runs[0].SubscriptionItems != (models.ReconcileCounts{Clerk: 2, Local: -1, Applied: 1, Unchanged: 1}) {
		t.Fatalf("the run's summary = %+v, %v; want the subscription items' counts", runs, err)
	}
	// Applied as Clerk's subscriptionItem.updated carrying the state.
	ev, err := e.store.Events().Get(context.Background(), fmt.Sprintf("backfill_%s_%d", teamItemID, teamStartedAt))
	if err != nil || ev.Type != models.TypeSubscriptionItemUpdated {
		t.Fatalf("the team item's event = %+v, %v; want a %s", ev, err, models.TypeSubscriptionItemUpdated)
	}

	// A rerun changes nothing.
	out = e.mustCommand(t, "reconcile", "-kinds", "subscription_items")
	wantLine(t, out, "reconcile: done: subscription_items in Clerk 2, local subscription_items not read, applied 0, stale 0, deleted 0, unchanged 2, failed 0")
}

func TestBackfill_AppliesSubscriptionItemsFreeOnesIncluded(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, nil)
	// The fake Clerk hides free items from a list asked without
	// include_free=true, as Clerk does.
	e.clerkHasItems(t, teamActive(), proEnded(), freeActive())
	out := e.mustBackfill(t, "-limit", "2")
	wantLine(t, out, "backfill: subscription_items offset 0: 2 subscription_items (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, subscription_items offsets 0 to 3: 3 subscription_items (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")
	if p, ok := e.plan(t, billingPayer); !ok || p.Status != models.PlanActive || planSlug(p) != "team-plan" {
		t.Errorf("plan of %s = %+v, want active with team-plan", billingPayer, p.PayerPlan)
	}
	if p, ok := e.plan(t, freePayer); !ok || p.Status != models.PlanActive || planSlug(p) != "free-plan" {
		t.Errorf("plan of %s = %+v (%v), want active with free-plan: was include_free=true sent?", freePayer, p.PayerPlan, ok)
	}
	for _, r := range e.clerk.Requests() {
		if r.Path == "/v1/billing/subscription_items" && (r.IncludeFree != "true" || r.OrderBy != "") {
			t.Errorf("subscription items read with include_free=%q, order_by=%q; want true and none", r.IncludeFree, r.OrderBy)
		}
	}
	// A rerun from the middle of the list, of this kind only.
	out = e.mustBackfill(t, "-kinds", "subscription_items", "-offset", "2")
	wantLine(t, out, "backfill: done, subscription_items offsets 2 to 3: 1 subscription_item (applied 0, stale 0, deleted 0, duplicate 1, failed 0)")
}

func TestReconcile_InstanceWithoutBillingIsSkippedNotAnError(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	e.clerk.TurnBillingOff()
	out := e.mustCommand(t, "reconcile")
	wantLine(t, out, "reconcile: Billing is not enabled in the Clerk instance: no subscription_items read")
	wantLine(t, out, "reconcile: done: users in Clerk 2, local users 0, applied 2, stale 0, deleted 0, unchanged 0, failed 0")
	out = e.mustBackfill(t)
	wantLine(t, out, "backfill: Billing is not enabled in the Clerk instance: no subscription_items read")
	out = e.mustCommand(t, "reconcile", "-kinds", "subscription_items")
	wantLine(t, out, "reconcile: Billing is not enabled in the Clerk instance: no subscription_items read")
}
