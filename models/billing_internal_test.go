package models

import (
	"slices"
	"testing"
	"time"
)

// The billing rows join the kinds table as they are: no kind and no type
// clash with the table's, each has a decoder's types and reads its event's
// user (a paying user) and object even from an invalid payload.
func TestBillingKindSpecs_JoinTheTableAsTheyAre(t *testing.T) {
	table := slices.Clone(kindTable)
	kinds := map[Kind]bool{}
	types := 0
	for _, s := range table {
		if kinds[s.Kind] {
			t.Errorf("kind %s twice", s.Kind)
		}
		kinds[s.Kind] = true
		types += len(s.Types)
	}
	if n := len(typesOf(table)); n != types {
		t.Errorf("%d types in the rows, %d distinct: a type is in two rows", types, n)
	}
	for _, s := range BillingKindSpecs() {
		if s.userID == nil || s.objectID == nil || s.Plural == "" || s.Object == "" {
			t.Errorf("row %s: %+v", s.Kind, s)
		}
		if s.TypeOf(EventDeleted) != "" || len(s.Parents) != 0 {
			t.Errorf("row %s has a deletion or parents; Clerk never deletes billing objects", s.Kind)
		}
		for _, tc := range []struct {
			data, user, object string
		}{
			// Invalid (no updated_at, no plan) but its ids are found.
			{`{"id":"csub_item_1","payer":{"user_id":"user_1","organization_id":""}}`, "user_1", "csub_item_1"},
			{`{"id":"csub_1","payer":{"user_id":"","organization_id":"org_1"}}`, "", "csub_1"},
			{`{"id":["x"],"payer":"user_1"}`, "", ""},
			{`[]`, "", ""},
		} {
			e := ClerkEvent{Type: s.Types[0].Type, Data: []byte(tc.data)}
			if u, o := s.userID(e), s.objectID(e); u != tc.user || o != tc.object {
				t.Errorf("%s of %s: ids %q, %q; want %q, %q", s.Kind, tc.data, u, o, tc.user, tc.object)
			}
		}
	}
}

// In the kinds table, the rows make billing events stored events of their
// kinds, decoded, with their ids and short types.
func TestBillingKinds_AreRowsOfTheKindsTable(t *testing.T) {
	body := `{"type":"subscriptionItem.pastDue","data":{"id":"csub_item_1","status":"past_due",` +
		`"plan":{"id":"cplan_1","slug":"pro"},"payer":{"user_id":"user_1","organization_id":""},"updated_at":1760000000000}}`
	ev, err := DecodeEvent([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.IsStored() || ev.Kind() != KindSubscriptionItem || ev.EventType() != EventPastDue ||
		ev.UserID() != "user_1" || ev.ObjectID() != "csub_item_1" {
		t.Errorf("stored %v, kind %q, short type %q, ids %q %q", ev.IsStored(), ev.Kind(), ev.EventType(), ev.UserID(), ev.ObjectID())
	}
	ch, err := ev.Decode("msg_1", time.UnixMilli(1760000000000))
	if item, ok := ch.(SubscriptionItemChange); err != nil || !ok || item.Status != ItemPastDue {
		t.Errorf("Decode = %+v, %v", ch, err)
	}
	// Registered, a kind's ids are those its decoder accepts (Kind.IsID,
	// the rule of the sync routes and reconcile).
	for k, ids := range map[Kind]map[string]bool{
		KindSubscription:     {"csub_1": true, "csub_item_1": false, "csub_": false},
		KindSubscriptionItem: {"csub_item_1": true, "csub_1": false, "csub_item_a-b": false},
	} {
		for id, want := range ids {
			if k.IsID(id) != want {
				t.Errorf("%s.IsID(%q) = %v", k, id, !want)
			}
		}
	}
	if _, ok := ParseKind("payment_attempt"); !ok || KindOf("subscription.past_due") != KindSubscription {
		t.Errorf("kinds = %v", Kinds)
	}
	if err := Validate(struct {
		Kind string `json:"kind" validate:"kind"`
		Type string `json:"eventType" validate:"eventtype"`
	}{"subscription_item", "free_trial_ending"}); err != nil {
		t.Errorf("a billing kind and short type as parameters: %v", err)
	}
}
