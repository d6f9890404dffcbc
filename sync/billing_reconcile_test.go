package sync_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// fixtureData is the data of a Clerk payload of models/testdata.
func fixtureData(t *testing.T, name string) json.RawMessage {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(clerkFixture(t, name, nil), &env); err != nil {
		t.Fatal(err)
	}
	return env.Data
}

// TestReconcile_SubscriptionItemsAreAppliedAndNeverDeleted: a reconcile
// with deletions applies the items of Clerk's list (the plan follows) and
// never looks for deleted ones: an item here that Clerk's list lacks stays
// as it is. The kind is among the defaults only with Billing.
func TestReconcile_SubscriptionItemsAreAppliedAndNeverDeleted(t *testing.T) {
	store := repotest.NewStore(t)
	svc := newService(store)
	ctx := context.Background()
	// Here: the pro item, ended; and another payer's item Clerk's list lacks.
	if _, err := ingest(t, svc, "msg_ended", clerkFixture(t, "billing/plan-change.1.subscriptionItem.ended.json", nil)); err != nil {
		t.Fatal(err)
	}
	other := models.Payer{Kind: models.KindUser, ID: "user_notInClerksList0000000000"}
	if _, err := ingest(t, svc, "msg_other", clerkFixture(t, "billing/subscriptionItem.canceled.json", func(_, data map[string]any) {
		data["id"] = "csub_item_notInClerksList000000"
		data["payer"].(map[string]any)["user_id"] = other.ID
	})); err != nil {
		t.Fatal(err)
	}
	fake := clerktest.New(t, nil)
	fake.SetSubscriptionItems([]json.RawMessage{
		fixtureData(t, "billing/plan-change.2.subscriptionItem.active.json"),
		fixtureData(t, "billing/plan-change.1.subscriptionItem.ended.json"),
	})
	cl, err := clerk.New(fake.URL, "sk_test_sync")
	if err != nil {
		t.Fatal(err)
	}
	rec := &sync.Reconciler{Service: svc, Clerk: cl, Users: store.Users()}
	if _, err := rec.Run(ctx, sync.ReconcileOptions{Kinds: []models.Kind{models.KindSubscriptionItem}}); err == nil {
		t.Errorf("a reconciler without Billing ran subscription items")
	}
	rec.Billing = &sync.BillingSources{Clerk: cl, Billing: store.Billing()}

	rep, err := rec.Run(ctx, sync.ReconcileOptions{Deletions: true, MaxDeletes: 0})
	if err != nil {
		t.Fatal(err)
	}
	kr := rep.Of(models.KindSubscriptionItem)
	if kr.Local != -1 || kr.Listed.Read != 2 || kr.Listed.Applied != 1 || kr.Listed.Unchanged != 1 || kr.Deleted != 0 || kr.Refused ||
		!strings.Contains(kr.DeletesSkipped, "never deletes") {
		t.Errorf("subscription items' report = %+v, want 2 read, 1 applied, 1 unchanged, no deletion looked for", kr)
	}
	payer := models.Payer{Kind: models.KindUser, ID: "user_34D368EufHwugfYh4yyGNEheM0S"}
	p, err := store.Billing().Plan(ctx, payer)
	if err != nil || p.Status != models.PlanActive || p.Plan == nil || p.Plan.Slug == "pro-plan" {
		t.Errorf("plan after the reconcile = %+v, %v; want active on the new item's plan", p.PayerPlan, err)
	}
	if p, err := store.Billing().Plan(ctx, other); err != nil || p.Status != models.PlanCanceled {
		t.Errorf("plan of the payer Clerk's list lacks = %+v, %v; want canceled, as it was", p.PayerPlan, err)
	}
}
