package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/client"
	"github.com/usersync/usersync/internal/outboundtest"
)

// The objects testdata/outbound's deliveries make.
const (
	userID         = "user_29w83sxmDNGwOuEthce5gg56FcC"
	orgID          = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	membershipID   = "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	invitationID   = "orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	memberID       = "user_2h8op3Isl1QR7tKu5FGNfaLKEoU"
	payerID        = "user_34D368EufHwugfYh4yyGNEheM0S"
	subscriptionID = "csub_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	paymentID      = "cpa_Outbound"
)

// deliverSteps delivers the steps of testdata/outbound that keep reports
// whether to keep.
func (s *server) deliverSteps(keep func(outboundtest.Step) bool) {
	s.t.Helper()
	steps, err := outboundtest.Steps("..")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, st := range steps {
		if keep(st) {
			s.deliver(st.Body)
		}
	}
}

// isDeletion reports whether a step deletes an object.
func isDeletion(st outboundtest.Step) bool {
	return slices.ContainsFunc(st.Types, func(t string) bool { return strings.HasSuffix(t, ".deleted") })
}

// collect walks seq, failing the test at its error.
func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for v, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestClient_ReadsEveryRoutesData reads, through the client, what a
// usersync holds after a user, an organization with a member, a
// subscription, a plan and payment attempts were delivered: every read
// of the API, with an API key and, for the admin's reads, an admin key.
func TestClient_ReadsEveryRoutesData(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.deliverSteps(func(st outboundtest.Step) bool { return !isDeletion(st) })
	s.deliver(edit(t, "user.created.json", func(d map[string]any) { d["id"] = payerID })) // the payer's billing is read once it is a user
	s.settled()
	ctx := context.Background()
	c := client.New(s.url, apiKey, client.Options{})
	admin := client.New(s.url, adminKey, client.Options{})

	u, err := c.User(ctx, userID)
	if err != nil || u.UserID != userID || u.Email == "" || u.UpdatedAt.IsZero() || u.DeletedAt != nil {
		t.Errorf("User = %+v, %v", u, err)
	}
	if got := collect(t, c.Users(client.UserQuery{Email: u.Email}).All(ctx)); len(got) != 1 || got[0].UserID != userID {
		t.Errorf("Users by email = %+v", got)
	}
	o, err := c.Organization(ctx, orgID)
	if err != nil || o.OrganizationID != orgID || o.Slug == nil || o.MembersCount == nil {
		t.Errorf("Organization = %+v, %v", o, err)
	}
	if got := collect(t, c.Organizations(client.OrganizationQuery{Slug: *o.Slug}).All(ctx)); len(got) != 1 || got[0].OrganizationID != orgID {
		t.Errorf("Organizations by slug = %+v", got)
	}
	if got := collect(t, c.OrganizationMemberships(orgID, client.MembershipQuery{}).All(ctx)); len(got) != 1 ||
		got[0].MembershipID != membershipID || got[0].Member.Identifier == nil || got[0].Role == nil {
		t.Errorf("OrganizationMemberships = %+v", got)
	}
	if got := collect(t, c.UserMemberships(memberID, client.MembershipQuery{}).All(ctx)); len(got) != 1 ||
		got[0].Organization == nil || got[0].Organization.OrganizationID != orgID {
		t.Errorf("UserMemberships = %+v", got)
	}
	if got := collect(t, c.OrganizationInvitations(orgID, client.InvitationQuery{}).All(ctx)); len(got) != 1 ||
		got[0].InvitationID != invitationID || got[0].Status != "accepted" || got[0].EmailAddress == nil || got[0].UserID == nil {
		t.Errorf("OrganizationInvitations = %+v", got)
	}
	if got := collect(t, c.OrganizationInvitations(orgID, client.InvitationQuery{Status: "pending"}).All(ctx)); len(got) != 0 {
		t.Errorf("OrganizationInvitations pending = %+v, want none", got)
	}
	if inv, err := c.OrganizationInvitation(ctx, orgID, invitationID); err != nil || inv.Status != "accepted" || inv.OrganizationID != orgID {
		t.Errorf("OrganizationInvitation = %+v, %v", inv, err)
	}
	b, err := c.UserBilling(ctx, payerID)
	if err != nil || b.Payer != (client.BillingPayer{Payer: client.Payer{Kind: "user", ID: payerID}, InCopy: true}) || b.Plan == nil || b.Plan.Plan == nil || len(b.Items) == 0 {
		t.Errorf("UserBilling = %+v, %v", b, err)
	}
	if b, err := c.OrganizationBilling(ctx, orgID); err != nil || b.Plan != nil || len(b.Items) != 0 {
		t.Errorf("OrganizationBilling = %+v, %v; want no billing", b, err)
	}
	sub, err := admin.Subscription(ctx, subscriptionID)
	if err != nil || sub.ID != subscriptionID || sub.Status != "past_due" {
		t.Errorf("Subscription = %+v, %v", sub, err)
	}
	payer := &client.Payer{Kind: "user", ID: payerID}
	if got := collect(t, admin.Subscriptions(client.SubscriptionQuery{Payer: payer}).All(ctx)); len(got) != 1 || got[0].ID != subscriptionID {
		t.Errorf("Subscriptions = %+v", got)
	}
	if got := collect(t, admin.PaymentAttempts(client.PaymentAttemptQuery{PaymentID: paymentID}).All(ctx)); len(got) != 1 ||
		got[0].Status != "paid" || len(got[0].Totals) == 0 {
		t.Errorf("PaymentAttempts = %+v", got)
	}
	events := collect(t, admin.Events(client.EventQuery{Kind: "user", UserID: userID, Since: time.Now().Add(-time.Hour)}).All(ctx))
	if len(events) != 2 || events[0].Type != "user.updated" || events[1].Type != "user.created" {
		t.Fatalf("Events of the user = %+v, want the update, then the creation", events)
	}
	if ev, err := admin.Event(ctx, events[0].EventID); err != nil || ev.Status != "processed" || len(ev.Payload) == 0 {
		t.Errorf("Event = %+v, %v; want it processed, with its payload", ev, err)
	}
	if st, err := admin.EventStats(ctx); err != nil || st.Status["processed"] == 0 || st.AsOf.IsZero() {
		t.Errorf("EventStats = %+v, %v", st, err)
	}
	if et, err := admin.EventTypes(ctx); err != nil || et.Since.IsZero() || len(et.Types) < 48 {
		t.Errorf("EventTypes = %+v, %v", et, err)
	} else if i := slices.IndexFunc(et.Types, func(e client.EventType) bool { return e.Type == "user.created" }); i < 0 ||
		et.Types[i].Fate != "applied" || et.Types[i].Kind != "user" || et.Types[i].Received == 0 || et.Types[i].LastReceivedAt == nil {
		t.Errorf("EventTypes' user.created = %+v, want applied to users, received", et.Types[i])
	}

	// Each change feed, walked by an API key.
	if got := collect(t, c.UserChanges(client.FeedOptions{}).Pages(ctx)); len(got) != 1 || len(got[0].Items) != 2 || !got[0].CaughtUp {
		t.Errorf("UserChanges = %+v", got)
	}
	if got := collect(t, c.OrganizationChanges(client.FeedOptions{}).Pages(ctx)); len(got) != 1 || len(got[0].Items) != 1 {
		t.Errorf("OrganizationChanges = %+v", got)
	}
	if got := collect(t, c.MembershipChanges(client.FeedOptions{}).Pages(ctx)); len(got) != 1 || len(got[0].Items) != 1 {
		t.Errorf("MembershipChanges = %+v", got)
	}
	if got := collect(t, c.PlanChanges(client.FeedOptions{}).Pages(ctx)); len(got) != 1 || len(got[0].Items) != 1 ||
		got[0].Items[0].Payer.ID != payerID || got[0].Items[0].Plan == nil {
		t.Errorf("PlanChanges = %+v", got)
	}

	// Once deleted, an object is not found by an API key; an admin reads
	// its tombstone.
	s.deliverSteps(isDeletion)
	if _, err := c.User(ctx, userID); !client.IsNotFound(err) {
		t.Errorf("a deleted user reads %v, want not found", err)
	}
	if u, err := admin.UserIncludingDeleted(ctx, userID); err != nil || u.DeletedAt == nil {
		t.Errorf("UserIncludingDeleted = %+v, %v", u, err)
	}
	if _, err := c.Organization(ctx, orgID); !client.IsNotFound(err) {
		t.Errorf("a deleted organization reads %v, want not found", err)
	}
	if o, err := admin.OrganizationIncludingDeleted(ctx, orgID); err != nil || o.DeletedAt == nil {
		t.Errorf("OrganizationIncludingDeleted = %+v, %v", o, err)
	}
	if got := collect(t, admin.Users(client.UserQuery{IncludeDeleted: true}).All(ctx)); len(got) != 2 ||
		!slices.ContainsFunc(got, func(u client.User) bool { return u.UserID == userID && u.DeletedAt != nil }) {
		t.Errorf("Users with the deleted = %+v", got)
	}
	if got := collect(t, admin.Organizations(client.OrganizationQuery{IncludeDeleted: true}).All(ctx)); len(got) != 1 || got[0].DeletedAt == nil {
		t.Errorf("Organizations with the deleted = %+v", got)
	}
	if got := collect(t, admin.OrganizationMemberships(orgID, client.MembershipQuery{IncludeDeleted: true}).All(ctx)); len(got) != 1 || got[0].DeletedAt == nil {
		t.Errorf("OrganizationMemberships with the deleted = %+v", got)
	}
	if _, err := c.OrganizationInvitation(ctx, orgID, invitationID); !client.IsNotFound(err) {
		t.Errorf("an invitation of a deleted organization reads %v, want not found", err)
	}
	if got := collect(t, admin.OrganizationInvitations(orgID, client.InvitationQuery{IncludeDeleted: true}).All(ctx)); len(got) != 1 ||
		got[0].DeletedAt == nil || got[0].EmailAddress != nil {
		t.Errorf("OrganizationInvitations with the deleted = %+v", got)
	}
}

// TestClient_SyncsAUserAndAnOrganizationFromClerk: the sync routes (the
// sign-up race) read the object from Clerk and answer it; one Clerk does
// not have is not found.
func TestClient_SyncsAUserAndAnOrganizationFromClerk(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.clerk.Add(dataOf(t, edit(t, "user.updated.json", func(d map[string]any) { d["id"] = "user_2signup" })))
	s.clerk.AddOrganization(dataOf(t, edit(t, "openapi.organization.updated.json", func(d map[string]any) { d["id"] = "org_2signup" })))
	ctx := context.Background()
	c := client.New(s.url, apiKey, client.Options{})
	if _, err := c.User(ctx, "user_2signup"); !client.IsNotFound(err) {
		t.Fatalf("before the sync: %v, want not found", err)
	}
	if u, err := c.SyncUser(ctx, "user_2signup"); err != nil || u.UserID != "user_2signup" || u.Email == "" {
		t.Errorf("SyncUser = %+v, %v", u, err)
	}
	if u, err := c.User(ctx, "user_2signup"); err != nil || u.UserID != "user_2signup" {
		t.Errorf("after the sync: %+v, %v", u, err)
	}
	if o, err := c.SyncOrganization(ctx, "org_2signup"); err != nil || o.OrganizationID != "org_2signup" {
		t.Errorf("SyncOrganization = %+v, %v", o, err)
	}
	if _, err := c.SyncUser(ctx, "user_2unknown"); !client.IsNotFound(err) {
		t.Errorf("SyncUser of a user Clerk does not have: %v, want not found", err)
	}
}

// TestClient_AnErrorCarriesTheAPIsCodeAndRequestID: an API key asking for
// the event log, an unknown key, and a bad parameter.
func TestClient_AnErrorCarriesTheAPIsCodeAndRequestID(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := context.Background()
	c := client.New(s.url, apiKey, client.Options{})
	_, forbidden := c.EventStats(ctx)
	_, unauthorized := client.New(s.url, "usk_nobody", client.Options{}).User(ctx, userID)
	_, invalid := c.Users(client.UserQuery{Limit: 500}).Page(ctx, "")
	for _, tc := range []struct {
		what   string
		err    error
		status int
		code   string
	}{
		{"the event log with an API key", forbidden, 403, client.CodeForbidden},
		{"an unknown key", unauthorized, 401, client.CodeUnauthorized},
		{"a page of 500", invalid, 400, client.CodeInvalidRequest},
	} {
		var e *client.Error
		if !errors.As(tc.err, &e) || e.Status != tc.status || e.Code != tc.code || e.RequestID == "" || e.Message == "" {
			t.Errorf("%s: %#v, want a %d %s with its message and request id", tc.what, tc.err, tc.status, tc.code)
		}
	}
}
