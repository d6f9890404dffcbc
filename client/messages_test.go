package client_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/client"
	"github.com/usersync/usersync/internal/outboundtest"
	"github.com/usersync/usersync/models"
)

const (
	endpointSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	otherSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// signed is body signed by svix's own library with secret at ts, under
// the Standard Webhooks headers.
func signed(t *testing.T, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(ts.Unix(), 10)}, "Webhook-Signature": {sig}}
}

const userMessage = `{"type":"user.updated","timestamp":"2026-11-27T10:15:02.114Z","data":{"userId":"user_2abc","email":"ada@example.com",` +
	`"displayName":"Ada","metadata":{},"firstName":"Ada","lastName":null,"username":null,"imageUrl":null,"phoneNumber":null,` +
	`"externalId":null,"lastSignInAt":null,"lastActiveAt":null,"banned":false,"locked":false,"deprovisioned":false,"sourceCreatedAt":null,` +
	`"createdAt":"2026-11-27T10:15:01.870Z","updatedAt":"2026-11-27T10:15:01.870Z","deletedAt":null},"changed":["email"],"origin":"webhook"}`

// TestVerifier_VerifiesWhatSvixSigns: a message svix's library signs
// verifies and parses, under the Standard Webhooks headers or Svix's,
// with one of several signatures (a rotation's), and with either of a
// verifier's secrets.
func TestVerifier_VerifiesWhatSvixSigns(t *testing.T) {
	t.Parallel()
	body := []byte(userMessage)
	now := time.Now()
	v, err := client.NewVerifier(otherSecret, endpointSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := signed(t, endpointSecret, "msg_1", now, body)
	svixNames := http.Header{"Svix-Id": h["Webhook-Id"], "Svix-Timestamp": h["Webhook-Timestamp"], "Svix-Signature": h["Webhook-Signature"]}
	rotation := h.Clone()
	rotation.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" "+h.Get("webhook-signature"))
	for what, h := range map[string]http.Header{"webhook-* headers": h, "svix-* headers": svixNames, "two signatures": rotation} {
		m, err := v.Verify(body, h)
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		if m.ID != "msg_1" || m.Type != client.TypeUserUpdated || m.User == nil || m.User.UserID != "user_2abc" || m.User.Email != "ada@example.com" ||
			!slices.Equal(m.Changed, []string{"email"}) || m.Origin != "webhook" || m.Timestamp.IsZero() || m.Deleted() {
			t.Errorf("%s: parsed %+v", what, m)
		}
	}
}

// TestVerifier_RefusesATamperedBodyAStaleTimestampOrAnotherSecret: each
// is ErrUnverified.
func TestVerifier_RefusesATamperedBodyAStaleTimestampOrAnotherSecret(t *testing.T) {
	t.Parallel()
	body := []byte(userMessage)
	now := time.Now()
	v, err := client.NewVerifier(endpointSecret)
	if err != nil {
		t.Fatal(err)
	}
	v2 := signed(t, endpointSecret, "msg_1", now, body)
	v2.Set("webhook-signature", strings.Replace(v2.Get("webhook-signature"), "v1,", "v2,", 1))
	noID := signed(t, endpointSecret, "msg_1", now, body)
	noID.Del("webhook-id")
	for _, tc := range []struct {
		what string
		body []byte
		h    http.Header
	}{
		{"a tampered body", []byte(strings.Replace(userMessage, "ada@", "eve@", 1)), signed(t, endpointSecret, "msg_1", now, body)},
		{"another id", body, func() http.Header {
			h := signed(t, endpointSecret, "msg_1", now, body)
			h.Set("webhook-id", "msg_2")
			return h
		}()},
		{"a timestamp 6 minutes old", body, signed(t, endpointSecret, "msg_1", now.Add(-6*time.Minute), body)},
		{"a timestamp 6 minutes ahead", body, signed(t, endpointSecret, "msg_1", now.Add(6*time.Minute), body)},
		{"another secret", body, signed(t, otherSecret, "msg_1", now, body)},
		{"another version", body, v2},
		{"no webhook-id", body, noID},
	} {
		if _, err := v.Verify(tc.body, tc.h); !errors.Is(err, client.ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", tc.what, err)
		}
	}
	if _, err := client.NewVerifier("whsec_not base64!"); err == nil {
		t.Error("a secret that is not base64 makes a verifier")
	}
}

// messageTypes are the types of the client's Type constants.
var messageTypes = []string{
	client.TypeUserCreated, client.TypeUserUpdated, client.TypeUserDeleted,
	client.TypeOrganizationCreated, client.TypeOrganizationUpdated, client.TypeOrganizationDeleted,
	client.TypeOrganizationMembershipCreated, client.TypeOrganizationMembershipUpdated, client.TypeOrganizationMembershipDeleted,
	client.TypeOrganizationInvitationCreated, client.TypeOrganizationInvitationUpdated, client.TypeOrganizationInvitationDeleted,
	client.TypeSubscriptionCreated, client.TypeSubscriptionUpdated,
	client.TypeSubscriptionItemCreated, client.TypeSubscriptionItemUpdated,
	client.TypePaymentAttemptCreated, client.TypePaymentAttemptUpdated,
	client.TypePlanChanged, client.TypeTest,
}

// objectOf is the id of the object m's typed data holds; "" when the
// field of its type is nil.
func objectOf(m client.Message) string {
	switch {
	case m.User != nil:
		return m.User.UserID
	case m.Organization != nil:
		return m.Organization.OrganizationID
	case m.Membership != nil:
		return m.Membership.MembershipID
	case m.Invitation != nil:
		return m.Invitation.InvitationID
	case m.Subscription != nil:
		return m.Subscription.ID
	case m.SubscriptionItem != nil:
		return m.SubscriptionItem.ID + " of " + m.SubscriptionItem.Payer.ID
	case m.PaymentAttempt != nil:
		return m.PaymentAttempt.ID
	case m.PlanChanged != nil && m.PlanChanged.Plan != nil:
		return m.PlanChanged.Payer.ID
	case m.Test != nil:
		return m.Test.EndpointID
	}
	return ""
}

// TestVerifier_VerifiesAndParsesAMessageOfEveryTypeUsersyncSends: an
// endpoint whose handler verifies with the client receives, from the
// deliveries of testdata/outbound and a test, a message of every type
// usersync sends, each verified and its data parsed into its type's
// field.
func TestVerifier_VerifiesAndParsesAMessageOfEveryTypeUsersyncSends(t *testing.T) {
	t.Parallel()
	if want := append(models.OutboundTypes(), "usersync.test"); !slices.Equal(slices.Sorted(slices.Values(messageTypes)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("the client's types are %q, usersync's %q", messageTypes, want)
	}
	s := newServer(t)
	var (
		mu       stdsync.Mutex
		verifier *client.Verifier
		got      []client.Message
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		m, err := verifier.VerifyRequest(r)
		if err != nil {
			t.Errorf("a message does not verify: %v", err)
			http.Error(w, "unverified", http.StatusBadRequest)
			return
		}
		got = append(got, m)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	id, secret := s.register(app.URL + "/hooks/usersync")
	v, err := client.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	verifier = v
	mu.Unlock()

	steps, err := outboundtest.Steps("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		s.deliver(st.Body)
		s.step()
	}
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/endpoints/"+id+"/test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.admin(req); r.StatusCode != http.StatusOK {
		t.Fatalf("test message: %d", r.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.Type] = true
		if objectOf(m) == "" || m.ID == "" || m.Timestamp.IsZero() || m.Origin == "" {
			t.Errorf("%s (%s): parsed %+v", m.Type, m.ID, m)
		}
		if m.Deleted() != strings.HasSuffix(m.Type, ".deleted") {
			t.Errorf("%s: Deleted() = %v", m.Type, m.Deleted())
		}
	}
	for _, typ := range messageTypes {
		if !seen[typ] {
			t.Errorf("no %s message arrived", typ)
		}
	}
}
