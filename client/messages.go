package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The types of usersync's outbound messages (Message.Type).
const (
	TypeUserCreated                   = "user.created"
	TypeUserUpdated                   = "user.updated"
	TypeUserDeleted                   = "user.deleted"
	TypeOrganizationCreated           = "organization.created"
	TypeOrganizationUpdated           = "organization.updated"
	TypeOrganizationDeleted           = "organization.deleted"
	TypeOrganizationMembershipCreated = "organizationMembership.created"
	TypeOrganizationMembershipUpdated = "organizationMembership.updated"
	TypeOrganizationMembershipDeleted = "organizationMembership.deleted"
	TypeOrganizationInvitationCreated = "organizationInvitation.created"
	TypeOrganizationInvitationUpdated = "organizationInvitation.updated"
	TypeOrganizationInvitationDeleted = "organizationInvitation.deleted"
	TypeSubscriptionCreated           = "subscription.created"
	TypeSubscriptionUpdated           = "subscription.updated"
	TypeSubscriptionItemCreated       = "subscriptionItem.created"
	TypeSubscriptionItemUpdated       = "subscriptionItem.updated"
	TypePaymentAttemptCreated         = "paymentAttempt.created"
	TypePaymentAttemptUpdated         = "paymentAttempt.updated"
	TypePlanChanged                   = "plan.changed"
	// TypeTest is the message an admin sends to test an endpoint.
	TypeTest = "usersync.test"
)

// Message is one outbound message of usersync, verified. Its data is
// decoded into the field of its type's object; a type this client does
// not know (a newer usersync's) leaves them all nil, and Data holds it.
type Message struct {
	// ID is the webhook-id: the id of this change of this object, the
	// same on every retry and replay of it. It is the application's
	// idempotency key.
	ID   string
	Type string
	// Timestamp is when this attempt was sent.
	Timestamp time.Time
	// Changed names the fields of Data that differ from the last state
	// the endpoint received of the object; every field the first time.
	Changed []string
	// Origin is what applied the change: webhook, session (a Clerk
	// session event's embedded user), sweep, replay, backfill, reconcile,
	// sync, cascade or resync (test for TypeTest).
	Origin string
	// Data is the object's state as sent: as the REST API shows it to
	// an admin (a deleted object: its tombstone).
	Data json.RawMessage

	User             *User                  // user.*
	Organization     *Organization          // organization.*
	Membership       *Membership            // organizationMembership.*
	Invitation       *Invitation            // organizationInvitation.*
	Subscription     *Subscription          // subscription.*
	SubscriptionItem *PayerSubscriptionItem // subscriptionItem.*
	PaymentAttempt   *PaymentAttempt        // paymentAttempt.*
	PlanChanged      *PlanChanged           // plan.changed
	Test             *TestMessage           // usersync.test
}

// Deleted reports whether the message is its object's deletion.
func (m Message) Deleted() bool { return strings.HasSuffix(m.Type, ".deleted") }

// PayerSubscriptionItem is a subscription item with its payer.
type PayerSubscriptionItem struct {
	SubscriptionItem
	Payer Payer `json:"payer"`
}

// PlanChanged is a payer's plan once settled (nil: no billing), and the
// plan the endpoint received before (nil: none).
type PlanChanged struct {
	Payer    Payer `json:"payer"`
	Plan     *Plan `json:"plan"`
	Previous *Plan `json:"previous"`
}

// TestMessage is the data of an endpoint's test message.
type TestMessage struct {
	EndpointID string `json:"endpointId"`
}

// decoders decode a message's data by the object its type names (the
// part before the dot): a new object is one line here and a field of
// Message.
var decoders = map[string]func(m *Message) any{
	"user":                   func(m *Message) any { m.User = new(User); return m.User },
	"organization":           func(m *Message) any { m.Organization = new(Organization); return m.Organization },
	"organizationMembership": func(m *Message) any { m.Membership = new(Membership); return m.Membership },
	"organizationInvitation": func(m *Message) any { m.Invitation = new(Invitation); return m.Invitation },
	"subscription":           func(m *Message) any { m.Subscription = new(Subscription); return m.Subscription },
	"subscriptionItem":       func(m *Message) any { m.SubscriptionItem = new(PayerSubscriptionItem); return m.SubscriptionItem },
	"paymentAttempt":         func(m *Message) any { m.PaymentAttempt = new(PaymentAttempt); return m.PaymentAttempt },
	"plan":                   func(m *Message) any { m.PlanChanged = new(PlanChanged); return m.PlanChanged },
	"usersync":               func(m *Message) any { m.Test = new(TestMessage); return m.Test },
}

// ErrUnverified is the error of a message whose signature does not
// verify: answer it 400, and process nothing.
var ErrUnverified = errors.New("usersync: the message does not verify")

// Tolerance is how far a message's webhook-timestamp may be from the
// receiver's clock, either way (Standard Webhooks').
const Tolerance = 5 * time.Minute

// maxMessage bounds the body VerifyRequest reads: a message's data is an
// object of the REST API, whose largest, a membership with every
// permission, is about 300 KiB.
const maxMessage = 4 << 20

// Verifier verifies the signatures of an endpoint's messages (Standard
// Webhooks: HMAC-SHA256 with the endpoint's secret). It is safe for
// concurrent use.
type Verifier struct {
	keys [][]byte
	now  func() time.Time
}

// NewVerifier returns a verifier of the messages signed with any of
// secrets, each "whsec_" and base64 as usersync makes them: during a
// rotation, give the new one, and the old one until the app has it.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("usersync: a verifier needs a secret")
	}
	v := &Verifier{now: time.Now}
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("usersync: secret %d is not whsec_ and base64", i+1)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// VerifyRequest reads r's body (at most 4 MiB) and verifies it (Verify).
func (v *Verifier) VerifyRequest(r *http.Request) (Message, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		return Message{}, err
	}
	if len(body) > maxMessage {
		return Message{}, fmt.Errorf("%w: the body is over %d bytes", ErrUnverified, maxMessage)
	}
	return v.Verify(body, r.Header)
}

// Verify checks that body, exactly as it arrived, is signed by a secret
// of v under the webhook-id and webhook-timestamp of header, and that the
// timestamp is within Tolerance of now; then it parses it. A message that
// does not verify is ErrUnverified.
func (v *Verifier) Verify(body []byte, header http.Header) (Message, error) {
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" && ts == "" && sigs == "" { // Svix's names of the same headers
		id, ts, sigs = header.Get("svix-id"), header.Get("svix-timestamp"), header.Get("svix-signature")
	}
	if id == "" || ts == "" || sigs == "" {
		return Message{}, fmt.Errorf("%w: webhook-id, webhook-timestamp and webhook-signature are required", ErrUnverified)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("%w: webhook-timestamp %q is not Unix seconds", ErrUnverified, ts)
	}
	if d := v.now().Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return Message{}, fmt.Errorf("%w: webhook-timestamp is more than %v from now", ErrUnverified, Tolerance)
	}
	if !v.signed(id, ts, body, sigs) {
		return Message{}, fmt.Errorf("%w: no signature matches a secret", ErrUnverified)
	}
	m, err := parse(body)
	m.ID = id
	return m, err
}

// signed reports whether one of sigs (space-separated "v1,<base64>") is
// the HMAC of "id.ts.body" with one of v's keys.
func (v *Verifier) signed(id, ts string, body []byte, sigs string) bool {
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := mac.Sum(nil)
		for _, s := range strings.Fields(sigs) {
			version, sig, ok := strings.Cut(s, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				return true
			}
		}
	}
	return false
}

// parse decodes a verified message.
func parse(body []byte) (Message, error) {
	var m Message
	var env struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
		Changed   []string        `json:"changed"`
		Origin    string          `json:"origin"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return m, fmt.Errorf("usersync: a verified message is not what the client expects: %w", err)
	}
	m.Type, m.Timestamp, m.Data, m.Changed, m.Origin = env.Type, env.Timestamp, env.Data, env.Changed, env.Origin
	object, _, _ := strings.Cut(m.Type, ".")
	if decode, ok := decoders[object]; ok {
		if err := json.Unmarshal(m.Data, decode(&m)); err != nil {
			return m, fmt.Errorf("usersync: the data of a verified %s message is not what the client expects: %w", m.Type, err)
		}
	}
	return m, nil
}
