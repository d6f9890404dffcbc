package models_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// billingEvent is one delivery of a billing event: its svix-id and body.
type billingEvent struct {
	id   string
	body []byte
}

// itemEvent is a delivery of type typ whose data is fixture file's, with
// fn's changes.
func itemEvent(t *testing.T, id, file, typ string, fn func(d map[string]any)) billingEvent {
	t.Helper()
	return billingEvent{id, edit(t, billingFixture(file), func(env, d map[string]any) {
		env["type"] = typ
		if fn != nil {
			fn(d)
		}
	})}
}

// itemStore keeps, per item id, the newest state applied, as a store does:
// a change is written when Decide says it writes.
type itemStore map[string]models.SubscriptionItem

func (s itemStore) apply(t *testing.T, ch models.Change) {
	t.Helper()
	switch c := ch.(type) {
	case models.SubscriptionItemChange:
		var cur *models.Version
		if it, ok := s[c.ItemID]; ok {
			v := it.Version()
			cur = &v
		}
		if models.Decide(cur, c.Version()).Writes() {
			s[c.ItemID] = c.SubscriptionItem
		}
	case models.SubscriptionChange:
		for _, it := range c.Items {
			s.apply(t, it)
		}
	default:
		t.Fatalf("change %T is not a subscription's or an item's", ch)
	}
}

func (s itemStore) items() []models.SubscriptionItem {
	var items []models.SubscriptionItem
	for _, it := range s {
		items = append(items, it)
	}
	return items
}

// orders returns every order of 0..n-1.
func orders(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, rest := range orders(n - 1) {
		for i := 0; i <= len(rest); i++ {
			o := append(append(append([]int{}, rest[:i]...), n-1), rest[i:]...)
			out = append(out, o)
		}
	}
	return out
}

// describe is a plan in one line, for messages.
func describe(p models.PayerPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s:%s", p.Status, p.Payer.Kind, p.Payer.ID)
	if p.Plan != nil {
		fmt.Fprintf(&b, " plan=%s item=%s", p.Plan.Slug, p.ItemID)
	}
	fmt.Fprintf(&b, " trial=%v canceledAtPeriodEnd=%v", p.FreeTrial, p.CanceledAtPeriodEnd)
	if p.PeriodEnd != nil {
		fmt.Fprintf(&b, " periodEnd=%d", p.PeriodEnd.UnixMilli())
	}
	if p.Seats != nil {
		fmt.Fprintf(&b, " seats=%d", *p.Seats)
	}
	if u := p.Upcoming; u != nil {
		fmt.Fprintf(&b, " upcoming=%s item=%s", u.Plan.Slug, u.ItemID)
		if u.PeriodStart != nil {
			fmt.Fprintf(&b, " from=%d", u.PeriodStart.UnixMilli())
		}
	}
	return b.String()
}

const (
	freeFile     = "upstream.subscriptionItem.active.free.json"
	endedProFile = "plan-change.1.subscriptionItem.ended.json"
	teamFile     = "plan-change.2.subscriptionItem.active.json"
	canceledFile = "subscriptionItem.canceled.json"
	// teamPeriodEnd is the end of the team item's period.
	teamPeriodEnd = 1766592000000
)

var (
	teamPlan = models.BillingPlan{ID: teamPlanID, Slug: "team-plan", Name: "Team Plan", Amount: i64(5000), Currency: "USD", IsRecurring: true}
	proPlan  = models.BillingPlan{ID: "cplan_proplan000000000000000000000", Slug: "pro-plan", Name: "Pro Plan", Amount: i64(2000), Currency: "USD", IsRecurring: true}
	freePlan = models.BillingPlan{ID: "cplan_2g7np7Hrk0SN6kj5EDMLDaKNL0S", Slug: "free-plan", Name: "Free Plan", Amount: i64(0), Currency: "USD"}
)

// freeUpcoming is the payer's free plan item, queued (upcoming) to start
// when the team item's period ends.
func freeUpcoming(t *testing.T, id string, at int64) billingEvent {
	return itemEvent(t, id, freeFile, "subscriptionItem.upcoming", func(d map[string]any) {
		d["status"], d["updated_at"], d["period_start"] = "upcoming", at, teamPeriodEnd
	})
}

// billingScenarios are a payer's events in the life of its plan. Every
// order of arrival of each scenario's events (duplicates included) must
// end in the scenario's plan, and no order may ever show the payer
// without a plan (none, or pending without one) once it had one.
func billingScenarios(t *testing.T) []struct {
	name   string
	events []billingEvent
	want   models.PayerPlan
} {
	// The plan change: the pro item ends (plan-change.1), the new team
	// item becomes active 53 ms later (plan-change.2).
	endedPro := itemEvent(t, "msg_pc1", endedProFile, "subscriptionItem.ended", nil)
	activeTeam := itemEvent(t, "msg_pc2", teamFile, "subscriptionItem.active", nil)
	// The pro item's earlier, active state, arriving late.
	lateActivePro := itemEvent(t, "msg_pc0", endedProFile, "subscriptionItem.active", func(d map[string]any) {
		d["status"], d["updated_at"] = "active", 1761408000000
	})
	teamActive := models.PayerPlan{
		Payer: userPayer, Status: models.PlanActive, Plan: &teamPlan, ItemID: teamItem,
		PeriodEnd: msp(teamPeriodEnd), Seats: i64(5),
	}

	canceledTeam := itemEvent(t, "msg_c2", canceledFile, "subscriptionItem.canceled", nil)

	// A downgrade to pro queued as a new upcoming item; before it, a
	// downgrade to free was queued and then dropped (abandoned).
	upcomingPro := itemEvent(t, "msg_d2", endedProFile, "subscriptionItem.upcoming", func(d map[string]any) {
		d["id"], d["status"], d["created_at"], d["updated_at"] = "csub_item_3DowngradeToPro00000000", "upcoming", 1764500000000, 1764500000000
		d["period_start"], d["period_end"] = teamPeriodEnd, nil
	})
	abandonedFree := itemEvent(t, "msg_d1", freeFile, "subscriptionItem.abandoned", func(d map[string]any) {
		d["status"], d["updated_at"] = "abandoned", 1764400000000
	})

	// A free trial of the team plan after the free plan: the free item
	// ends, a new team item starts its trial, and Clerk says it ends soon.
	const trialItem, trialEnd = "csub_item_3TrialTeamPlanItem000000", 1765209600000
	trial := func(id, typ string, at int64) billingEvent {
		return itemEvent(t, id, teamFile, typ, func(d map[string]any) {
			d["id"], d["is_free_trial"], d["updated_at"], d["period_end"] = trialItem, true, at, trialEnd
		})
	}
	freeActive := itemEvent(t, "msg_t0", freeFile, "subscriptionItem.active", func(d map[string]any) { d["updated_at"] = 1763000000000 })
	freeEnded := itemEvent(t, "msg_t1", freeFile, "subscriptionItem.ended", func(d map[string]any) {
		d["status"], d["updated_at"], d["period_end"] = "ended", 1764000000000, 1764000000000
	})

	// Past due: the team item's payment fails; Clerk sends the item's event
	// (under the older type name) and the subscription's, which lists the
	// ended pro item and the past_due team item.
	const pastDueAt = teamPeriodEnd + 100
	pastDueTeam := itemEvent(t, "msg_p1", teamFile, "subscriptionItem.past_due", func(d map[string]any) {
		d["status"], d["updated_at"] = "past_due", pastDueAt
	})
	pastDueSub := billingEvent{"msg_p2", edit(t, billingFixture("upstream.subscription.created.json"), func(env, d map[string]any) {
		env["type"] = "subscription.pastDue"
		d["status"], d["updated_at"], d["past_due_at"] = "past_due", pastDueAt, pastDueAt
		var items []any
		for _, f := range []struct {
			file string
			at   int64
		}{{endedProFile, 1764000000000}, {teamFile, pastDueAt}} {
			var env map[string]any
			if err := json.Unmarshal(fixture(t, billingFixture(f.file)), &env); err != nil {
				t.Fatal(err)
			}
			it := env["data"].(map[string]any)
			delete(it, "payer")
			it["subscription_id"], it["object"], it["updated_at"] = nil, "commerce_subscription_item", f.at
			if f.file == teamFile {
				it["status"] = "past_due"
			}
			items = append(items, it)
		}
		d["items"] = items
	})}

	return []struct {
		name   string
		events []billingEvent
		want   models.PayerPlan
	}{
		{"plan change", []billingEvent{endedPro, activeTeam}, teamActive},
		{"plan change, a duplicate and a late state of the ended item", []billingEvent{endedPro, activeTeam, endedPro, lateActivePro}, teamActive},
		{"cancel, the free plan queued after it",
			[]billingEvent{endedPro, activeTeam, canceledTeam, freeUpcoming(t, "msg_c3", 1764432000000)},
			models.PayerPlan{
				Payer: userPayer, Status: models.PlanCanceled, Plan: &teamPlan, ItemID: teamItem,
				PeriodEnd: msp(teamPeriodEnd), CanceledAtPeriodEnd: true, Seats: i64(5),
				Upcoming: &models.UpcomingPlan{Plan: freePlan, ItemID: freeItem, PeriodStart: msp(teamPeriodEnd), Seats: i64(5)},
			}},
		{"downgrade queued as upcoming, an earlier one abandoned",
			[]billingEvent{activeTeam, freeUpcoming(t, "msg_d0", 1764300000000), abandonedFree, upcomingPro},
			models.PayerPlan{
				Payer: userPayer, Status: models.PlanActive, Plan: &teamPlan, ItemID: teamItem,
				PeriodEnd: msp(teamPeriodEnd), Seats: i64(5),
				Upcoming: &models.UpcomingPlan{Plan: proPlan, ItemID: "csub_item_3DowngradeToPro00000000", PeriodStart: msp(teamPeriodEnd), Seats: i64(5)},
			}},
		{"free trial",
			[]billingEvent{freeActive, freeEnded, trial("msg_t2", "subscriptionItem.active", 1764000000053),
				trial("msg_t3", "subscriptionItem.freeTrialEnding", 1764950400000)},
			models.PayerPlan{
				Payer: userPayer, Status: models.PlanActive, Plan: &teamPlan, ItemID: trialItem,
				FreeTrial: true, PeriodEnd: msp(trialEnd), Seats: i64(5),
			}},
		{"past due, from the item's event and the subscription's",
			[]billingEvent{endedPro, activeTeam, pastDueTeam, pastDueSub},
			models.PayerPlan{
				Payer: userPayer, Status: models.PlanPastDue, Plan: &teamPlan, ItemID: teamItem,
				PeriodEnd: msp(teamPeriodEnd), Seats: i64(5),
			}},
	}
}

func TestPlanOf_EveryOrderOfArrivalGivesTheSamePlan(t *testing.T) {
	for _, sc := range billingScenarios(t) {
		t.Run(sc.name, func(t *testing.T) {
			changes := make([]models.Change, len(sc.events))
			for i, e := range sc.events {
				changes[i] = decodeBilling(t, e.body, e.id)
			}
			for _, order := range orders(len(changes)) {
				store, had := itemStore{}, false
				for step, i := range order {
					store.apply(t, changes[i])
					p := models.PlanOf(store.items())
					if had && p.Plan == nil || p.Status == models.PlanNone || p.Payer != userPayer {
						t.Errorf("order %v, after %d events: %s; a payer that had a plan never has none", order, step+1, describe(p))
					}
					had = had || p.Plan != nil
				}
				if got := models.PlanOf(store.items()); !equal(got, sc.want) {
					t.Errorf("order %v:\n got %s\nwant %s", order, describe(got), describe(sc.want))
				}
			}
		})
	}
}

// Between a plan change's two events, whichever comes first, the plan is
// the old one: still active, or pending with it when the old item's end
// came first; never free, never none.
func TestPlanOf_APlanChangeHalfArrived(t *testing.T) {
	ended := decodeBilling(t, fixture(t, billingFixture(endedProFile)), "msg_1").(models.SubscriptionItemChange)
	active := decodeBilling(t, fixture(t, billingFixture(teamFile)), "msg_2").(models.SubscriptionItemChange)
	want := models.PayerPlan{Payer: userPayer, Status: models.PlanPending, Plan: &proPlan, ItemID: proItem, Seats: i64(5)}
	if got := models.PlanOf([]models.SubscriptionItem{ended.SubscriptionItem}); !equal(got, want) {
		t.Errorf("the old item ended only:\n got %s\nwant %s", describe(got), describe(want))
	}
	// The new item first, the old one still active: the newer item.
	oldActive := ended.SubscriptionItem
	oldActive.Status, oldActive.SourceUpdatedAt = models.ItemActive, ms(1761408000000)
	got := models.PlanOf([]models.SubscriptionItem{oldActive, active.SubscriptionItem})
	if got.Status != models.PlanActive || got.ItemID != teamItem {
		t.Errorf("both items active: %s, want the newer item's plan", describe(got))
	}
}

func item(id string, status models.ItemStatus, slug string, at int64) models.SubscriptionItem {
	return models.SubscriptionItem{
		ItemID: id, Payer: models.Payer{Kind: models.KindOrganization, ID: "org_1"}, Status: status,
		Plan: models.BillingPlan{ID: "cplan_" + slug, Slug: slug}, SourceUpdatedAt: ms(at), LastEventID: "msg_" + id,
	}
}

func TestPlanOf_Rules(t *testing.T) {
	org := models.Payer{Kind: models.KindOrganization, ID: "org_1"}
	plan := func(slug string) *models.BillingPlan { return &models.BillingPlan{ID: "cplan_" + slug, Slug: slug} }
	for _, tc := range []struct {
		name  string
		items []models.SubscriptionItem
		want  models.PayerPlan
	}{
		{"no items", nil, models.PayerPlan{Status: models.PlanNone}},
		{"two active items of different plans: the newest", []models.SubscriptionItem{
			item("csub_item_a", models.ItemActive, "pro", 2), item("csub_item_b", models.ItemActive, "team", 1),
		}, models.PayerPlan{Payer: org, Status: models.PlanActive, Plan: plan("pro"), ItemID: "csub_item_a"}},
		{"two active items at the same time: the larger id", []models.SubscriptionItem{
			item("csub_item_b", models.ItemActive, "team", 1), item("csub_item_a", models.ItemActive, "pro", 1),
		}, models.PayerPlan{Payer: org, Status: models.PlanActive, Plan: plan("team"), ItemID: "csub_item_b"}},
		{"past_due and active rank together: the newest", []models.SubscriptionItem{
			item("csub_item_a", models.ItemActive, "pro", 1), item("csub_item_b", models.ItemPastDue, "team", 2),
		}, models.PayerPlan{Payer: org, Status: models.PlanPastDue, Plan: plan("team"), ItemID: "csub_item_b"}},
		{"an active item wins over a newer canceled one", []models.SubscriptionItem{
			item("csub_item_a", models.ItemActive, "pro", 1), item("csub_item_b", models.ItemCanceled, "team", 2),
		}, models.PayerPlan{Payer: org, Status: models.PlanActive, Plan: plan("pro"), ItemID: "csub_item_a"}},
		{"incomplete only: pending, no plan yet", []models.SubscriptionItem{
			item("csub_item_a", models.ItemIncomplete, "pro", 1),
		}, models.PayerPlan{Payer: org, Status: models.PlanPending}},
		{"abandoned and ended: pending with the ended plan", []models.SubscriptionItem{
			item("csub_item_a", models.ItemEnded, "pro", 1), item("csub_item_b", models.ItemAbandoned, "free", 2),
		}, models.PayerPlan{Payer: org, Status: models.PlanPending, Plan: plan("pro"), ItemID: "csub_item_a"}},
		{"pending: the most recently ended", []models.SubscriptionItem{
			item("csub_item_a", models.ItemEnded, "pro", 2), item("csub_item_b", models.ItemEnded, "free", 1),
			item("csub_item_c", models.ItemIncomplete, "team", 3),
		}, models.PayerPlan{Payer: org, Status: models.PlanPending, Plan: plan("pro"), ItemID: "csub_item_a"}},
		{"expired is read as ended: history", []models.SubscriptionItem{
			item("csub_item_a", models.ItemExpired, "pro", 2), item("csub_item_b", models.ItemEnded, "free", 1),
		}, models.PayerPlan{Payer: org, Status: models.PlanPending, Plan: plan("pro"), ItemID: "csub_item_a"}},
		{"upcoming only: pending, the upcoming plan", []models.SubscriptionItem{
			item("csub_item_a", models.ItemUpcoming, "free", 1),
		}, models.PayerPlan{Payer: org, Status: models.PlanPending,
			Upcoming: &models.UpcomingPlan{Plan: models.BillingPlan{ID: "cplan_free", Slug: "free"}, ItemID: "csub_item_a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range orders(len(tc.items)) {
				items := make([]models.SubscriptionItem, len(order))
				for i, j := range order {
					items[i] = tc.items[j]
				}
				if got := models.PlanOf(items); !equal(got, tc.want) {
					t.Errorf("order %v:\n got %s\nwant %s", order, describe(got), describe(tc.want))
				}
			}
		})
	}
}

// PlanOf reads no clock: a canceled item gives its plan after its
// period_end too, until Clerk says it ended.
func TestPlanOf_ReadsNoClock(t *testing.T) {
	it := item("csub_item_a", models.ItemCanceled, "team", 1)
	it.PeriodEnd = msp(1) // 1970
	if p := models.PlanOf([]models.SubscriptionItem{it}); p.Status != models.PlanCanceled || p.Plan == nil ||
		!p.CanceledAtPeriodEnd || !p.PeriodEnd.Equal(ms(1)) {
		t.Errorf("plan = %s, want the canceled plan whatever the time", describe(p))
	}
}

func TestPlanOf_SharesNothingWithTheItems(t *testing.T) {
	it := item("csub_item_a", models.ItemActive, "team", 1)
	it.Seats, it.PeriodEnd, it.Plan.Amount = i64(5), msp(10), i64(100)
	up := item("csub_item_b", models.ItemUpcoming, "pro", 1)
	up.PeriodStart, up.Seats = msp(10), i64(3)
	items := []models.SubscriptionItem{it, up}
	p := models.PlanOf(items)
	*p.Seats, *p.PeriodEnd, *p.Plan.Amount, p.Plan.Slug = 9, time.Time{}, 0, "x"
	*p.Upcoming.PeriodStart, *p.Upcoming.Seats = time.Time{}, 0
	if *items[0].Seats != 5 || !items[0].PeriodEnd.Equal(ms(10)) || *items[0].Plan.Amount != 100 || items[0].Plan.Slug != "team" ||
		!items[1].PeriodStart.Equal(ms(10)) || *items[1].Seats != 3 {
		t.Errorf("changing the plan changed the items: %s", show(items))
	}
}
