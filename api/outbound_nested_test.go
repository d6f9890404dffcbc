package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The changes nested in another kind's event reach the app too: the
// organization a membership's event carries, the items a subscription's
// event lists, each when its state applied, as the object's own message.

const nestedOrg = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" // the membership fixture's organization

// membershipWithOrg is the membership fixture as an event of membership
// id, member userID, whose nested organization is named name at Clerk
// time orgAt (Unix ms).
func membershipWithOrg(t *testing.T, id, userID, name string, orgAt int64) []byte {
	t.Helper()
	return editFixture(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) {
		d["id"] = id
		d["public_user_data"].(map[string]any)["user_id"] = userID
		org := d["organization"].(map[string]any)
		org["name"], org["updated_at"] = name, orgAt
	})
}

// ofKind returns the messages whose type is of the object name
// ("organization", "subscriptionItem").
func ofKind(ms []message, name string) []message {
	var out []message
	for _, m := range ms {
		if strings.HasPrefix(m.Type, name+".") {
			out = append(out, m)
		}
	}
	return out
}

// dataField reads one string field of a message's data.
func dataField(t *testing.T, m message, field string) string {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(m.Data, &d); err != nil {
		t.Fatal(err)
	}
	s, _ := d[field].(string)
	return s
}

// TestOutbound_ANewerOrganizationNestedInAMembershipEventReachesTheApp: a
// membership event whose nested organization is newer than the copy's
// sends the organization's message besides the membership's:
// organization.created when that state created the organization,
// organization.updated when it changed it; and an endpoint that wants
// organizations alone receives it too. A duplicate sends nothing.
func TestOutbound_ANewerOrganizationNestedInAMembershipEventReachesTheApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app, orgsOnly := newAppReceiver(t), newAppReceiver(t)
	h.register(app, "organization.*", "organizationMembership.*")
	h.register(orgsOnly, "organization.*")
	first := membershipWithOrg(t, "orgmem_nested1", "user_nested1", "Acme Corp", 1716883200000)
	h.mustDeliver("msg_nested1", first)
	h.step()
	orgs := ofKind(app.messages(), "organization")
	if mems := ofKind(app.messages(), "organizationMembership"); len(mems) != 1 || mems[0].Type != "organizationMembership.created" {
		t.Errorf("membership messages = %+v, want its creation", mems)
	}
	if len(orgs) != 1 || orgs[0].Type != "organization.created" || dataField(t, orgs[0], "organizationId") != nestedOrg ||
		dataField(t, orgs[0], "name") != "Acme Corp" || orgs[0].Origin != "webhook" || len(orgs[0].Changed) == 0 {
		t.Fatalf("organization messages = %+v, want the creation the nested state made", orgs)
	}
	if !sameJSON(t, orgs[0].Data, h.admin("/v1/organizations/"+nestedOrg+"?includeDeleted=true")) {
		t.Errorf("data = %s, want the admin's read of the organization", orgs[0].Data)
	}
	h.mustDeliver("msg_nested1", first) // a duplicate
	h.step()
	if n := len(app.messages()); n != 2 {
		t.Errorf("%d messages after a duplicate, want the 2 before it", n)
	}

	h.mustDeliver("msg_nested2", membershipWithOrg(t, "orgmem_nested2", "user_nested2", "Acme Renamed", 1716883201000))
	h.step()
	orgs = ofKind(app.messages(), "organization")
	if len(orgs) != 2 || orgs[1].Type != "organization.updated" || dataField(t, orgs[1], "name") != "Acme Renamed" ||
		!slices.Contains(orgs[1].Changed, "name") || orgs[1].ID == orgs[0].ID {
		t.Errorf("organization messages = %+v, want the rename as an update with its own webhook-id", orgs)
	}
	if mems := ofKind(app.messages(), "organizationMembership"); len(mems) != 2 {
		t.Errorf("membership messages = %+v, want both creations", mems)
	}
	if got := orgsOnly.messages(); len(got) != 2 || got[0].Type != "organization.created" || got[1].Type != "organization.updated" {
		t.Errorf("an endpoint of organizations alone got %+v, want the creation and the rename", got)
	}
}

// TestOutbound_AnOlderOrganizationNestedInAMembershipEventSendsNoOrganization:
// a membership event whose nested organization is older than the copy's
// changes no organization, and sends none: the membership's message only,
// also to an endpoint registered after the newer state applied (which
// never received the organization).
func TestOutbound_AnOlderOrganizationNestedInAMembershipEventSendsNoOrganization(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app, late := newAppReceiver(t), newAppReceiver(t)
	h.register(app, "organization.*", "organizationMembership.*")
	h.mustDeliver("msg_newer", membershipWithOrg(t, "orgmem_older1", "user_older1", "Acme Now", 1716883205000))
	h.step()
	if orgs := ofKind(app.messages(), "organization"); len(orgs) != 1 || dataField(t, orgs[0], "name") != "Acme Now" {
		t.Fatalf("organization messages = %+v, want the newer state's", orgs)
	}
	h.register(late, "organization.*", "organizationMembership.*")
	h.mustDeliver("msg_older", membershipWithOrg(t, "orgmem_older2", "user_older2", "Acme Then", 1716883201000))
	h.step()
	for name, r := range map[string]*appReceiver{"the app": app, "an endpoint registered since": late} {
		if orgs := ofKind(r.messages(), "organization"); name == "the app" && len(orgs) != 1 || name != "the app" && len(orgs) != 0 {
			t.Errorf("%s: organization messages = %+v, want none of the older state", name, orgs)
		}
		if mems := ofKind(r.messages(), "organizationMembership"); len(mems) == 0 || dataField(t, mems[len(mems)-1], "membershipId") != "orgmem_older2" {
			t.Errorf("%s: membership messages = %+v, want the older event's membership", name, mems)
		}
	}
	if o := h.admin("/v1/organizations/" + nestedOrg); !strings.Contains(string(o), `"Acme Now"`) {
		t.Errorf("organization = %s, want the newer state kept", o)
	}
}

// subscriptionWithItems is the subscription fixture as an event of type
// typ at Clerk time at (Unix ms), listing its item and a second one,
// csub_item_nestedB, each with its own updated_at.
func subscriptionWithItems(t *testing.T, typ string, at, itemAt, itemBAt int64, itemStatus string) []byte {
	t.Helper()
	return billingBody(t, "upstream.subscription.created.json", typ, func(d map[string]any) {
		d["updated_at"] = at
		items := d["items"].([]any)
		a := items[0].(map[string]any)
		a["updated_at"], a["status"] = itemAt, itemStatus
		b := map[string]any{}
		for k, v := range a {
			b[k] = v
		}
		b["id"], b["updated_at"], b["status"] = "csub_item_nestedB", itemBAt, "upcoming"
		d["items"] = []any{a, b}
	})
}

// TestOutbound_ASubscriptionEventSendsEachItemItChanged: a subscription's
// event sends one subscriptionItem message per item whose state from it
// applied (created the first time), and none for an item it lists in a
// state older than the copy's, also to an endpoint registered since,
// which never received that item; a duplicate sends nothing.
func TestOutbound_ASubscriptionEventSendsEachItemItChanged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app, late := newAppReceiver(t), newAppReceiver(t)
	h.register(app, "subscriptionItem.*")
	const itemA, itemB = "csub_item_2g7np7Hrk0SN6kj5EDMLDaKNL0S", "csub_item_nestedB"
	const at = int64(1716883200000)
	h.mustDeliver("msg_sub1", subscriptionWithItems(t, "", at, at, at, "active"))
	h.step()
	ms := app.messages()
	var got []string
	for _, m := range ms {
		got = append(got, m.Type+" "+dataField(t, m, "id"))
	}
	slices.Sort(got)
	if want := []string{"subscriptionItem.created " + itemA, "subscriptionItem.created " + itemB}; !slices.Equal(got, want) {
		t.Fatalf("messages = %q, want %q", got, want)
	}
	if ms[0].ID == ms[1].ID || ms[0].Origin != "webhook" {
		t.Errorf("messages = %+v, want each item's own webhook-id, from a webhook", ms)
	}

	// The subscription's next event: item A changed, item B listed in an
	// older state than the copy's.
	h.register(late, "subscriptionItem.*")
	second := subscriptionWithItems(t, "subscription.updated", at+1000, at+1000, at-1000, "canceled")
	h.mustDeliver("msg_sub2", second)
	h.step()
	for name, r := range map[string]*appReceiver{"the app": app, "an endpoint registered since": late} {
		ms := r.messages()
		if len(ms) == 0 {
			t.Fatalf("%s: no message, want item A's update", name)
		}
		m := ms[len(ms)-1]
		if n := map[string]int{"the app": 3, "an endpoint registered since": 1}[name]; len(ms) != n || m.Type != "subscriptionItem.updated" ||
			dataField(t, m, "id") != itemA || dataField(t, m, "status") != "canceled" || !slices.Contains(m.Changed, "status") {
			t.Errorf("%s: messages = %+v, want item A's update alone", name, ms)
		}
		if !strings.Contains(string(m.Data), `"payer":{"kind":"user","id":"`+billingUser+`"}`) {
			t.Errorf("%s: data = %s, want the item with its payer", name, m.Data)
		}
	}
	h.mustDeliver("msg_sub2", second) // a duplicate
	h.step()
	if n, m := len(app.messages()), len(late.messages()); n != 3 || m != 1 {
		t.Errorf("%d and %d messages after a duplicate, want the 3 and 1 before it", n, m)
	}
}

// TestOutbound_AStaleMembershipEventsNewerOrganizationReachesTheApp: a
// membership event older than the membership's copy (stale: nothing of
// the membership is sent) whose nested organization is newer than the
// organization's copy changes the organization, and that change is sent;
// an older nested organization in a stale event sends nothing.
func TestOutbound_AStaleMembershipEventsNewerOrganizationReachesTheApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	h.register(app, "organization.*", "organizationMembership.*")
	const memAt, orgAt = int64(1716883210000), int64(1716883200000)
	event := func(memAt, orgAt int64, name string) []byte {
		return editFixture(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) {
			d["id"], d["updated_at"] = "orgmem_stale1", memAt
			d["public_user_data"].(map[string]any)["user_id"] = "user_stale1"
			org := d["organization"].(map[string]any)
			org["name"], org["updated_at"] = name, orgAt
		})
	}
	h.mustDeliver("msg_stale1", event(memAt, orgAt, "Acme First"))
	h.step()
	if n := len(app.messages()); n != 2 {
		t.Fatalf("%d messages, want the membership's and the organization's", n)
	}
	h.mustDeliver("msg_stale2", event(memAt-5000, orgAt+5000, "Acme Newer")) // the membership stale, the organization newer
	h.step()
	ms := app.messages()[2:]
	if len(ms) != 1 || ms[0].Type != "organization.updated" || dataField(t, ms[0], "name") != "Acme Newer" || !slices.Contains(ms[0].Changed, "name") {
		t.Fatalf("messages = %+v, want the organization's update alone", ms)
	}
	h.mustDeliver("msg_stale3", event(memAt-6000, orgAt+1000, "Acme Older")) // both stale
	h.step()
	if ms := app.messages()[3:]; len(ms) != 0 {
		t.Errorf("messages = %+v after an event stale in both, want none", ms)
	}
}
