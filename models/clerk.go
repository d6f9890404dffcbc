package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
)

// MaxDisplayName is the longest display name, in characters (runes).
const MaxDisplayName = 255

// Clerk's user event types.
const (
	TypeUserCreated = "user.created"
	TypeUserUpdated = "user.updated"
	TypeUserDeleted = "user.deleted"
)

// ClerkEventTypes are the event types Clerk documents (its Backend SDK's
// WebhookEventType), user events included, each with what usersync makes
// of it (Fate). usersync names an event it ignores by its type only if it
// is one of these: any other type a body claims is a client's text, and is
// counted as unknown. usersync's own outbound types (plan.changed) are not
// Clerk's, and are not here.
var ClerkEventTypes = []ClerkEventType{
	{Type: "email.created"}, {Type: "sms.created"},
	{Type: "organization.created"}, {Type: "organization.updated"}, {Type: "organization.deleted"},
	{Type: "organizationDomain.created"}, {Type: "organizationDomain.updated"}, {Type: "organizationDomain.deleted"},
	{Type: "organizationInvitation.accepted"}, {Type: "organizationInvitation.created"}, {Type: "organizationInvitation.revoked"},
	{Type: "organizationMembership.created"}, {Type: "organizationMembership.updated"}, {Type: "organizationMembership.deleted"},
	{Type: "permission.created"}, {Type: "permission.updated"}, {Type: "permission.deleted"},
	{Type: "role.created"}, {Type: "role.updated"}, {Type: "role.deleted"},
	{Type: "session.created", Projects: projectsLastActive}, {Type: "session.ended", Projects: projectsLastActive},
	{Type: "session.pending", Projects: projectsLastActive}, {Type: "session.removed", Projects: projectsLastActive},
	{Type: "session.revoked", Projects: projectsLastActive},
	{Type: TypeUserCreated}, {Type: TypeUserUpdated}, {Type: TypeUserDeleted},
	{Type: "waitlistEntry.created"}, {Type: "waitlistEntry.updated"},
	{Type: "paymentAttempt.created"}, {Type: "paymentAttempt.updated"},
	{Type: "subscription.created"}, {Type: "subscription.updated"}, {Type: "subscription.active"},
	{Type: "subscription.pastDue"}, {Type: "subscription.past_due"},
	{Type: "subscriptionItem.created"}, {Type: "subscriptionItem.updated"}, {Type: "subscriptionItem.active"},
	{Type: "subscriptionItem.canceled"}, {Type: "subscriptionItem.upcoming"}, {Type: "subscriptionItem.ended"},
	{Type: "subscriptionItem.abandoned"}, {Type: "subscriptionItem.incomplete"}, {Type: "subscriptionItem.pastDue"},
	{Type: "subscriptionItem.past_due"}, {Type: "subscriptionItem.freeTrialEnding"},
}

// projectsLastActive is what a session event projects.
const projectsLastActive = "a user's lastActiveAt"

// ClerkEventType is one of Clerk's event types and what usersync makes of
// its events.
type ClerkEventType struct {
	Type string // Clerk's, e.g. "user.created"
	// Projects names what an event of the type sets on an object of
	// another kind, when the type is of no object usersync keeps as such:
	// "a user's lastActiveAt". "" for any other type.
	Projects string
}

// Fate is what usersync makes of the events of one of Clerk's types.
type Fate string

// The fates of Clerk's event types.
const (
	// FateApplied: stored and applied to an object of its kind (the
	// kinds table has the type).
	FateApplied Fate = "applied"
	// FateProjected: what it tells is set on an object of another kind
	// (ClerkEventType.Projects); its events may be stored as that kind's
	// (session events are, as their user's).
	FateProjected Fate = "projected"
	// FateIgnored: acknowledged, and neither stored nor applied.
	FateIgnored Fate = "ignored"
)

// Fates are the fates.
var Fates = []Fate{FateApplied, FateProjected, FateIgnored}

// Fate is the type's: projected when its row says what it Projects,
// whether the kinds table has it or not; else applied when the kinds table
// has it (KindOf, so that a kind added there makes its types applied with
// no edit here); else ignored.
func (t ClerkEventType) Fate() Fate {
	switch {
	case t.Projects != "":
		return FateProjected
	case KindOf(t.Type) != "":
		return FateApplied
	}
	return FateIgnored
}

// IsClerkEventType reports whether t is one of ClerkEventTypes.
func IsClerkEventType(t string) bool {
	return slices.ContainsFunc(ClerkEventTypes, func(c ClerkEventType) bool { return c.Type == t })
}

// SubscribedTypes are the types an operator subscribes Clerk's endpoint
// to: those of ClerkEventTypes that usersync applies or projects, in its
// order.
func SubscribedTypes() []string {
	var types []string
	for _, c := range ClerkEventTypes {
		if c.Fate() != FateIgnored {
			types = append(types, c.Type)
		}
	}
	return types
}

// ClerkEvent is the envelope of a Clerk webhook body. Only what usersync
// needs is decoded; the body itself is kept as received.
type ClerkEvent struct {
	Type      string
	Timestamp json.RawMessage // Unix ms (seconds accepted); checked when used
	Data      json.RawMessage

	// checked is true when DecodeEvent checked the whole body; limit is
	// then what the check refused below the envelope, for Change to say.
	checked bool
	limit   error
}

// ClerkUser is the part of Clerk's user object that usersync keeps.
type ClerkUser struct {
	ID                    string          `json:"id" validate:"required,clerkid=user_"`
	UpdatedAt             int64           `json:"updated_at" validate:"required,gt=0"`
	FirstName             *string         `json:"first_name"`
	LastName              *string         `json:"last_name"`
	Username              *string         `json:"username"`
	PrimaryEmailAddressID *string         `json:"primary_email_address_id"`
	EmailAddresses        []ClerkEmail    `json:"email_addresses" validate:"dive"`
	PrimaryPhoneNumberID  *string         `json:"primary_phone_number_id"`
	PhoneNumbers          []ClerkPhone    `json:"phone_numbers" validate:"dive"`
	PublicMetadata        json.RawMessage `json:"public_metadata"`
	ImageURL              *string         `json:"image_url"`
	ExternalID            *string         `json:"external_id"`
	LastSignInAt          *int64          `json:"last_sign_in_at"`
	Banned                bool            `json:"banned"`
	Locked                bool            `json:"locked"`
	Deprovisioned         bool            `json:"deprovisioned"`
	// CreatedAt is read as a Clerk time when it is one, and left out
	// otherwise: it orders nothing, and an event is not refused for it.
	CreatedAt json.RawMessage `json:"created_at"`
}

// ClerkEmail is one entry of a Clerk user's email_addresses.
type ClerkEmail struct {
	ID           string `json:"id"`
	EmailAddress string `json:"email_address" validate:"max=512"`
}

// ClerkPhone is one entry of a Clerk user's phone_numbers.
type ClerkPhone struct {
	ID          string `json:"id"`
	PhoneNumber string `json:"phone_number" validate:"max=64"`
}

// clerkDeleted is the data of a user.deleted event.
type clerkDeleted struct {
	ID string `json:"id" validate:"required,clerkid=user_"`
}

// DecodeEvent decodes the envelope of a webhook body. It fails, wrapping
// ErrInvalid, when the body is not UTF-8, not a JSON object with a string
// "type", or names a top-level key twice. Limits on the rest of the body
// are checked by Change, so that such an event is stored as failed.
func DecodeEvent(body []byte) (ClerkEvent, error) {
	if !utf8.Valid(body) {
		return ClerkEvent{}, Public(ErrInvalid, "body is not valid UTF-8 (Clerk sends JSON)").For("not_utf8")
	}
	var env struct {
		Type      json.RawMessage `json:"type"`
		Timestamp json.RawMessage `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || !isObject(body) {
		return ClerkEvent{}, Public(ErrInvalid, "body is not a JSON object").In("body")
	}
	var typ string
	if err := json.Unmarshal(env.Type, &typ); err != nil || typ == "" {
		return ClerkEvent{}, Public(ErrInvalid, "body has no \"type\" string").In("type")
	}
	// One walk of the body checks every limit. A key twice in the envelope
	// refuses the body now; anything deeper makes the event one that
	// Change refuses, so that it is stored as failed.
	limit, envelope := checkBody(body)
	if envelope {
		return ClerkEvent{}, limit
	}
	return ClerkEvent{Type: typ, Timestamp: env.Timestamp, Data: env.Data, checked: true, limit: limit}, nil
}

// IsStored reports whether usersync stores this event: an event of a kind
// of the kinds table, or of a billing type it does not know (stored and
// ignored: IsUnknownBillingType).
func (e ClerkEvent) IsStored() bool { return e.Kind() != "" }

// EventType returns the short type of an event usersync stores: EventOther
// for a billing type it does not know, "" for events it does not store.
func (e ClerkEvent) EventType() EventType {
	if IsUnknownBillingType(e.Type) {
		return EventOther
	}
	return EventTypeOf(e.Type)
}

// maxUserID is the longest user id accepted, as the validate tags of
// ClerkUser and clerkDeleted say.
const maxUserID = 128

// UserChange validates the event's data and returns the user state it carries.
// now is the server's clock: a Clerk time more than MaxFutureSkew ahead of
// it is refused. Its error wraps ErrInvalid: such an event can never be
// applied (see limits.go for what is refused).
func (e ClerkEvent) UserChange(eventID string, now time.Time) (UserChange, error) {
	if err := e.checkLimits(); err != nil {
		return UserChange{}, err
	}
	switch e.Type {
	case TypeUserCreated, TypeUserUpdated:
		var u ClerkUser
		if err := decodeData(e.Data, &u); err != nil {
			return UserChange{}, err
		}
		ch, err := u.change(eventID)
		if err == nil {
			err = checkNotFuture("data.updated_at", ch.SourceTime, now)
		}
		ch.New = e.Type == TypeUserCreated
		return ch, err
	case TypeUserDeleted:
		var d clerkDeleted
		if err := decodeData(e.Data, &d); err != nil {
			return UserChange{}, err
		}
		ts, err := e.deletionTime(now)
		if err != nil {
			return UserChange{}, err
		}
		return UserChange{UserID: d.ID, EventID: eventID, SourceTime: ts, Deleted: true}, nil
	}
	return UserChange{}, Public(ErrInvalid, "%s is not a user event", Quote(e.Type)).In("type")
}

func decodeData(data json.RawMessage, v any) error {
	if !isObject(data) {
		return Public(ErrInvalid, "data must be an object").In("data")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := "data." + te.Field
			return Public(ErrInvalid, "%s must be a JSON %s", field, jsonKind(te.Type.Kind().String())).In(schemaField(field))
		}
		return Public(ErrInvalid, "data is not an object of this event's type").In("data").Because(err)
	}
	return validateAs("data.", v)
}

func (u ClerkUser) change(eventID string) (UserChange, error) {
	meta, err := publicMetadata(u.PublicMetadata, "data.")
	if err != nil {
		return UserChange{}, err
	}
	ts, err := clerkTime(json.RawMessage(fmt.Sprint(u.UpdatedAt)))
	if err != nil {
		return UserChange{}, Public(ErrInvalid, "data.updated_at %v", err).In("data.updated_at")
	}
	email := u.PrimaryEmail()
	return UserChange{
		UserID:      u.ID,
		EventID:     eventID,
		SourceTime:  ts,
		Email:       email,
		DisplayName: u.DisplayName(email),
		Metadata:    meta,
		Profile:     u.Profile(),
	}, nil
}

// Profile returns the user's profile fields, trimmed and bounded: names are
// cut to MaxName characters (a cut name still names the person); an
// identifier or URL longer than its bound is left out ("") rather than cut,
// since a cut one would name something else.
func (u ClerkUser) Profile() Profile {
	phone := u.primaryPhone()
	p := Profile{
		FirstName:   truncate(strings.TrimSpace(deref(u.FirstName)), MaxName),
		LastName:    truncate(strings.TrimSpace(deref(u.LastName)), MaxName),
		Username:    ident(u.Username, MaxName),
		ImageURL:    ident(u.ImageURL, MaxImageURL),
		PhoneNumber: ident(&phone, MaxPhoneNumber),
		ExternalID:  ident(u.ExternalID, MaxExternalID),
		Banned:      u.Banned,
		Locked:      u.Locked,
		// Directory Sync's off-boarding: a user.updated, never a delete.
		Deprovisioned: u.Deprovisioned,
	}
	if u.LastSignInAt != nil {
		// A time that is not one is left out: it cannot order anything.
		if t, err := clerkTime(json.RawMessage(fmt.Sprint(*u.LastSignInAt))); err == nil {
			p.LastSignInAt = &t
		}
	}
	if len(u.CreatedAt) > 0 {
		if t, err := clerkTime(u.CreatedAt); err == nil {
			p.SourceCreatedAt = &t
		}
	}
	return p
}

// PrimaryEmail returns the address whose id is primary_email_address_id,
// as NormalizeEmail makes it, or "" when there is none.
func (u ClerkUser) PrimaryEmail() string {
	if u.PrimaryEmailAddressID == nil {
		return ""
	}
	for _, e := range u.EmailAddresses {
		if e.ID == *u.PrimaryEmailAddressID {
			return NormalizeEmail(e.EmailAddress)
		}
	}
	return ""
}

// PayloadEmail returns the primary email of the user in the body of a user
// event, as PrimaryEmail does; ok is false when body cannot be read as
// one. Upgrades recompute stored emails with it.
func PayloadEmail(body []byte) (email string, ok bool) {
	var env struct {
		Data struct {
			PrimaryEmailAddressID *string      `json:"primary_email_address_id"`
			EmailAddresses        []ClerkEmail `json:"email_addresses"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return "", false
	}
	return ClerkUser{PrimaryEmailAddressID: env.Data.PrimaryEmailAddressID, EmailAddresses: env.Data.EmailAddresses}.PrimaryEmail(), true
}

// PayloadCreatedAt returns Clerk's created_at of the object in the body of
// an event, as applying it would read it; ok is false when the body holds
// none that is a Clerk time. Upgrades fill stored users' sourceCreatedAt
// with it.
func PayloadCreatedAt(body []byte) (at time.Time, ok bool) {
	var env struct {
		Data struct {
			CreatedAt json.RawMessage `json:"created_at"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || len(env.Data.CreatedAt) == 0 {
		return time.Time{}, false
	}
	at, err := clerkTime(env.Data.CreatedAt)
	return at, err == nil
}

// DisplayName returns the first of: first and last name, username, email,
// primary phone, user id, cut to MaxDisplayName characters.
func (u ClerkUser) DisplayName(email string) string {
	name := strings.TrimSpace(strings.TrimSpace(deref(u.FirstName)) + " " + strings.TrimSpace(deref(u.LastName)))
	for _, candidate := range []string{name, strings.TrimSpace(deref(u.Username)), email, u.primaryPhone(), u.ID} {
		if candidate = truncate(candidate, MaxDisplayName); candidate != "" {
			return candidate
		}
	}
	return u.ID
}

func (u ClerkUser) primaryPhone() string {
	if u.PrimaryPhoneNumberID == nil {
		return ""
	}
	for _, p := range u.PhoneNumbers {
		if p.ID == *u.PrimaryPhoneNumberID {
			return strings.TrimSpace(p.PhoneNumber)
		}
	}
	return ""
}

// truncate cuts s to at most n runes, never inside one, and trims the
// space a cut may leave at the end.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			break
		}
		count++
	}
	return strings.TrimSpace(s[:i])
}

// clerkTime reads a Unix time in milliseconds; values below 10^12 are taken
// as seconds, as some of Clerk's examples use them.
func clerkTime(raw json.RawMessage) (time.Time, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || n == "" {
		return time.Time{}, errors.New("must be a Unix time in milliseconds")
	}
	v, err := n.Int64()
	if err != nil {
		f, ferr := n.Float64()
		if ferr != nil {
			return time.Time{}, errors.New("must be a Unix time in milliseconds")
		}
		v = int64(f)
	}
	if v <= 0 || v > 1e15 {
		return time.Time{}, errors.New("must be a positive Unix time in milliseconds")
	}
	if v < 1e12 {
		return time.Unix(v, 0).UTC(), nil
	}
	return time.UnixMilli(v).UTC(), nil
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int64", "int", "float64":
		return "number"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	case "ptr":
		return "string or null"
	}
	return goKind
}

// validate is the one validator instance of the process.
var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// clerkid=<prefix>: the shape of a Clerk id of that prefix, the one
	// rule every path (webhooks, the sync routes, reconcile) applies.
	// kind and eventtype: a kind of the kinds table, and a short or Clerk
	// event type of one of its kinds.
	_ = v.RegisterValidation("kind", func(fl validator.FieldLevel) bool {
		_, ok := ParseKind(fl.Field().String())
		return ok
	})
	_ = v.RegisterValidation("eventtype", func(fl validator.FieldLevel) bool {
		t := fl.Field().String()
		return KindOf(t) != "" || IsEventType(EventType(t))
	})
	_ = v.RegisterValidation("clerkid", func(fl validator.FieldLevel) bool {
		return isClerkID(fl.Field().String(), fl.Param())
	})
	// clerkanyid: an id of a Clerk object whose prefix Clerk does not
	// document (a payment attempt's).
	_ = v.RegisterValidation("clerkanyid", func(fl validator.FieldLevel) bool {
		return isClerkAnyID(fl.Field().String())
	})
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		for _, key := range []string{"json", "query", "param"} {
			if name, _, _ := strings.Cut(f.Tag.Get(key), ","); name != "" && name != "-" {
				return name
			}
		}
		return f.Name
	})
	return v
}()

// Validate checks v's validate tags. Its error wraps ErrInvalid and names
// the first failing field by its JSON (or query) name.
func Validate(v any) error { return validateAs("", v) }

func validateAs(prefix string, v any) error {
	err := validate.Struct(v)
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) || len(verrs) == 0 {
		if err != nil {
			return Public(ErrInvalid, "the value cannot be checked").Because(err)
		}
		return nil
	}
	fe := verrs[0]
	field := fe.Namespace()
	if _, rest, ok := strings.Cut(field, "."); ok {
		field = rest // drop the Go type name
	}
	var rule string
	switch fe.Tag() {
	case "required":
		rule = "is required"
	case "startswith":
		rule = fmt.Sprintf("must start with %q", fe.Param())
	case "clerkid":
		rule = ClerkIDRule(fe.Param())
	case "clerkanyid":
		rule = fmt.Sprintf("must be a Clerk id: letters, digits and underscores, at most %d bytes", maxUserID)
	case "max":
		rule = "must be at most " + fe.Param()
	case "min":
		rule = "must be at least " + fe.Param()
	case "gt":
		rule = "must be greater than " + fe.Param()
	case "oneof":
		rule = "must be one of: " + fe.Param()
	case "kind":
		rule = "must be one of: " + strings.Join(kindNames(), " ")
	case "eventtype":
		rule = "must be one of: " + strings.Join(eventTypeNames(), " ")
	default:
		rule = "must satisfy " + fe.Tag() + " " + fe.Param()
	}
	e := Public(ErrInvalid, "%s%s %s", prefix, field, strings.TrimSpace(rule))
	if prefix != "" {
		return e.In(schemaField(prefix + field)) // a path into Clerk's data
	}
	return e.In(field) // a parameter: its name is a struct tag
}

// ClerkIDRule says what an id of prefix must be, for messages.
func ClerkIDRule(prefix string) string {
	return fmt.Sprintf("must be a Clerk id: %q followed by letters and digits, at most %d bytes", prefix, maxUserID)
}

// isClerkAnyID reports whether id has the shape of a Clerk id of any
// prefix: letters, digits and underscores, at most 128 bytes.
func isClerkAnyID(id string) bool {
	if id == "" || len(id) > maxUserID {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_':
		default:
			return false
		}
	}
	return true
}

func isClerkID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || rest == "" || len(id) > maxUserID {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch b := rest[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		default:
			return false
		}
	}
	return true
}
