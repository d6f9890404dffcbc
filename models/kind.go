package models

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Kind is the kind of object an event changes.
type Kind string

// Kinds of objects usersync keeps.
const (
	KindUser         Kind = "user"
	KindOrganization Kind = "organization"
	KindMembership   Kind = "membership"
)

// Change is one Clerk state of one object, ready to be applied: the
// object's full state at its source time, or its deletion. Each kind has
// its own (UserChange, OrganizationChange, MembershipChange); a store
// applies each to its kind's table or collection.
type Change interface {
	// Kind is the kind of the object the change is a state of.
	Kind() Kind
	// Version is what ordering needs of the state (see Decide).
	Version() Version
	// IDs are the event's user (a user's own id, or a membership's
	// member) and its object (an organization's or a membership's id; ""
	// for a user), as the event log stores them.
	IDs() (userID, objectID string)
}

// KindSpec is everything usersync knows of one kind of object that does
// not depend on a store: the one table that maps Clerk's event types to
// kinds, validates a kind or a type, and orders the kinds. Adding a kind
// is one row here, its Change type, its store tables and collections, and
// its JSON shape.
type KindSpec struct {
	Kind     Kind
	Plural   string // "users": how docs, routes and stats name several
	IDPrefix string // Clerk's prefix of the kind's ids
	Object   string // Clerk's name of the object (its data.object)
	// Types are the Clerk event types of the kind, each with the change
	// it makes.
	Types []TypeSpec
	// Parents are the kinds whose deletion deletes the objects of this
	// kind that belong to it (a cascade), in every order of arrival.
	Parents []Kind
	// Nests are the kinds of the other objects whose states this kind's
	// events carry inside them, each applied to its own object by its own
	// version (a membership's event nests its organization): a change of
	// each is the event's too, and outbound webhooks send it as such.
	Nests []Kind
	// stateType, if set, is the Clerk type a state of the kind read from
	// Clerk's API (data) is applied as, where no one type carries every
	// state (an invitation's type names its status); else the kind's
	// updated type (StateType).
	stateType func(data json.RawMessage) string
	// decode validates an event's data and returns the state it carries
	// (its error wraps ErrInvalid); set from decoders.
	decode func(e ClerkEvent, eventID string, now time.Time) (Change, error)
	// userID and objectID read the event's ids from a payload that may
	// be invalid, so that a failed event can still be found.
	userID, objectID func(e ClerkEvent) string
}

// TypeSpec is one Clerk event type of a kind and the change it makes.
type TypeSpec struct {
	Type   string    // Clerk's type, e.g. "user.created"
	Change EventType // its short type in the event log
}

// kindTable is every kind, in the order stats list them and a reconcile
// walks them: a kind's parents come before it, so that their deletions
// have deleted its objects before it is checked. Clerk Billing's kinds
// (billing.go) come last.
var kindTable = append([]KindSpec{
	{
		Kind: KindUser, Plural: "users", IDPrefix: "user_", Object: "user",
		// Session events project onto their user (session.go).
		Types: append([]TypeSpec{{TypeUserCreated, EventCreated}, {TypeUserUpdated, EventUpdated}, {TypeUserDeleted, EventDeleted}},
			sessionTypes...),
		userID: func(e ClerkEvent) string {
			if IsSessionType(e.Type) {
				return e.sessionUserID()
			}
			return e.dataID()
		},
		objectID: func(ClerkEvent) string { return "" },
	},
	{
		Kind: KindOrganization, Plural: "organizations", IDPrefix: "org_", Object: "organization",
		Types: []TypeSpec{{TypeOrganizationCreated, EventCreated}, {TypeOrganizationUpdated, EventUpdated},
			{TypeOrganizationDeleted, EventDeleted}},
		userID:   func(ClerkEvent) string { return "" },
		objectID: func(e ClerkEvent) string { return e.dataID() },
	},
	{
		Kind: KindMembership, Plural: "memberships", IDPrefix: "orgmem_", Object: "organization_membership",
		Types: []TypeSpec{{TypeMembershipCreated, EventCreated}, {TypeMembershipUpdated, EventUpdated},
			{TypeMembershipDeleted, EventDeleted}},
		Parents:  []Kind{KindUser, KindOrganization},
		Nests:    []Kind{KindOrganization},
		userID:   func(e ClerkEvent) string { return e.memberID() },
		objectID: func(e ClerkEvent) string { return e.dataID() },
	},
	invitationSpec,
}, BillingKindSpecs()...)

// decoders are the kinds' decoders. They are put into the kinds table by
// init, not written in it: a decoder refers to the validator, whose
// messages read the table.
func decoders() map[Kind]func(e ClerkEvent, eventID string, now time.Time) (Change, error) {
	return map[Kind]func(e ClerkEvent, eventID string, now time.Time) (Change, error){
		KindUser: func(e ClerkEvent, eventID string, now time.Time) (Change, error) {
			if IsSessionType(e.Type) {
				return e.SessionChange(eventID, now)
			}
			return e.UserChange(eventID, now)
		},
		KindOrganization: func(e ClerkEvent, eventID string, now time.Time) (Change, error) {
			return e.OrganizationChange(eventID, now)
		},
		KindMembership: func(e ClerkEvent, eventID string, now time.Time) (Change, error) {
			return e.MembershipChange(eventID, now)
		},
		KindInvitation: func(e ClerkEvent, eventID string, now time.Time) (Change, error) {
			return e.InvitationChange(eventID, now)
		},
		KindSubscription:     DecodeBilling,
		KindSubscriptionItem: DecodeBilling,
		KindPaymentAttempt:   DecodeBilling,
	}
}

func init() {
	d := decoders()
	for i := range kindTable {
		kindTable[i].decode = d[kindTable[i].Kind]
	}
}

// AddKind adds spec, whose events decode validates, to the end of the
// kinds table: how a kind defined outside this package joins it (the
// behaviour suite's test-only kind). A store applies it only if it has its
// tables. Call it from an init function, before anything reads the table;
// it panics on a kind or a type the table has. The kind's events name no
// user, and its object is data.id.
func AddKind(spec KindSpec, decode func(e ClerkEvent, eventID string, now time.Time) (Change, error)) {
	if _, ok := SpecOf(spec.Kind); ok {
		panic("models: kind " + string(spec.Kind) + " is in the table")
	}
	for _, t := range spec.Types {
		if _, ok := byType[t.Type]; ok {
			panic("models: type " + t.Type + " is in the table")
		}
	}
	spec.decode = decode
	if spec.userID == nil {
		spec.userID = func(ClerkEvent) string { return "" }
	}
	if spec.objectID == nil {
		spec.objectID = ClerkEvent.dataID
	}
	kindTable = append(kindTable, spec)
	Kinds = kindsOf(kindTable)
	byType = typesOf(kindTable)
}

// Kinds are every kind of object, in the order of the kinds table.
var Kinds = kindsOf(kindTable)

func kindsOf(table []KindSpec) []Kind {
	ks := make([]Kind, len(table))
	for i, s := range table {
		ks[i] = s.Kind
	}
	return ks
}

// byType maps each Clerk event type that usersync stores to its kind's
// row and its short type.
var byType = typesOf(kindTable)

type typeEntry struct {
	spec   *KindSpec
	change EventType
}

func typesOf(table []KindSpec) map[string]typeEntry {
	m := map[string]typeEntry{}
	for i := range table {
		for _, t := range table[i].Types {
			m[t.Type] = typeEntry{spec: &table[i], change: t.Change}
		}
	}
	return m
}

// SpecOf returns the row of kind k; false for a kind usersync does not
// keep.
func SpecOf(k Kind) (KindSpec, bool) {
	for _, s := range kindTable {
		if s.Kind == k {
			return s, true
		}
	}
	return KindSpec{}, false
}

// TypeOf returns the Clerk type of the kind's events that make change
// ("" when the kind has none).
func (s KindSpec) TypeOf(change EventType) string {
	for _, t := range s.Types {
		if t.Change == change {
			return t.Type
		}
	}
	return ""
}

// StateType is the Clerk type the webhook carrying data, a state of an
// object of kind k read from Clerk's API (backfill, reconcile), would
// have: the kind's updated type, or for a kind whose types name a status
// the type of data's ("" when the kind has none).
func StateType(k Kind, data json.RawMessage) string {
	spec, _ := SpecOf(k)
	if spec.stateType != nil {
		return spec.stateType(data)
	}
	return spec.TypeOf(EventUpdated)
}

// Plural is how several objects of kind k are named: "users".
func (k Kind) Plural() string {
	if s, ok := SpecOf(k); ok {
		return s.Plural
	}
	return string(k) + "s"
}

// WithArticle is one object of kind k: "a user", "an organization".
func (k Kind) WithArticle() string {
	if strings.ContainsRune("aeiou", rune(string(k + " ")[0])) {
		return "an " + string(k)
	}
	return "a " + string(k)
}

// IsID reports whether id has the shape of a Clerk id of kind k: the
// kind's prefix, then letters and digits (Clerk's ids are base62), at most
// 128 bytes in all. Only such an id is sent to Clerk's API (whose GET
// /organizations/{id} also takes a slug).
func (k Kind) IsID(id string) bool {
	spec, ok := SpecOf(k)
	return ok && isClerkID(id, spec.IDPrefix)
}

// ParseKind returns the kind named s ("user", "organization"…); false
// when usersync keeps no such kind.
func ParseKind(s string) (Kind, bool) {
	spec, ok := SpecOf(Kind(s))
	return spec.Kind, ok
}

// KindOf returns the kind of object an event of Clerk type typ changes,
// or "" for a type usersync does not store.
func KindOf(typ string) Kind {
	if e, ok := byType[typ]; ok {
		return e.spec.Kind
	}
	return ""
}

// StoredKindOf returns the kind of the events of Clerk type typ that
// usersync stores: KindOf, or for a billing type usersync does not know
// (IsUnknownBillingType) the billing kind of its prefix; "" for a type it
// does not store.
func StoredKindOf(typ string) Kind {
	if k := KindOf(typ); k != "" {
		return k
	}
	return billingPrefixKind(typ)
}

// TypesOf returns the Clerk types of the events of kind k, nil for an
// unknown kind.
func TypesOf(k Kind) []string {
	spec, _ := SpecOf(k)
	var types []string
	for _, t := range spec.Types {
		types = append(types, t.Type)
	}
	return types
}

// StoredTypes returns every Clerk event type usersync stores, in the order
// of the kinds table.
func StoredTypes() []string {
	var types []string
	for _, k := range Kinds {
		types = append(types, TypesOf(k)...)
	}
	return types
}

// EventTypeOf returns the short type of a Clerk event type usersync
// stores ("" for others).
func EventTypeOf(typ string) EventType { return byType[typ].change }

// kindNames are the names of the kinds, as a parameter gives them.
func kindNames() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}

// eventTypeNames are the short types of every kind's events, then every
// Clerk type usersync stores: what an eventType parameter may be.
func eventTypeNames() []string {
	var names []string
	for _, t := range StoredTypes() {
		if short := string(EventTypeOf(t)); !slices.Contains(names, short) {
			names = append(names, short)
		}
	}
	return append(names, StoredTypes()...)
}

// IsEventType reports whether some kind has events of short type t.
func IsEventType(t EventType) bool {
	for _, e := range byType {
		if e.change == t {
			return true
		}
	}
	return false
}

// Decode validates the data of an event usersync stores and returns the
// state it carries. now is the server's clock: a Clerk time more than
// MaxFutureSkew ahead of it is refused. Its error wraps ErrInvalid: such
// an event can never be applied.
func (e ClerkEvent) Decode(eventID string, now time.Time) (Change, error) {
	t, ok := byType[e.Type]
	if !ok && IsUnknownBillingType(e.Type) {
		return e.ignoredChange(eventID, now)
	}
	if !ok {
		return nil, Public(ErrInvalid, "%s is not an event usersync stores", Quote(e.Type)).In("type")
	}
	return t.spec.decode(e, eventID, now)
}
