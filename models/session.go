package models

import (
	"encoding/json"
	"time"
)

// Clerk's session event types. Each carries the session, whose
// last_active_at is the user's activity at the event's time: usersync
// applies every one of them to its user's lastActiveAt (never backwards),
// whatever happened to the session (created, ended, pending, removed,
// revoked). They are of the user kind: a session is not kept, its event
// is (in the event log, with its user id, until retention deletes it).
const (
	TypeSessionCreated = "session.created"
	TypeSessionEnded   = "session.ended"
	TypeSessionPending = "session.pending"
	TypeSessionRemoved = "session.removed"
	TypeSessionRevoked = "session.revoked"
)

// EventSession is the short type of every session event in the event log.
const EventSession EventType = "session"

// sessionTypes are the user kind's rows of the session types.
var sessionTypes = []TypeSpec{
	{TypeSessionCreated, EventSession}, {TypeSessionEnded, EventSession}, {TypeSessionPending, EventSession},
	{TypeSessionRemoved, EventSession}, {TypeSessionRevoked, EventSession},
}

// OutcomeActivity: a session event moved its user's lastActiveAt, and
// nothing else (the user state it carried, if any, was not newer).
const OutcomeActivity Outcome = "activity"

// SessionChange is what a session event says of its user: the session's
// activity time and, when the event embeds a complete user, that user's
// state. It is a change of the user kind.
type SessionChange struct {
	UserID  string
	EventID string
	// ActiveAt is the session's last_active_at, else its created_at.
	ActiveAt time.Time
	// User is the embedded user's state, its version the user's
	// updated_at with the event's id; nil when data.user is null, absent,
	// or lacks a field a user event carries (SessionUserFields).
	User *UserChange
}

// Kind returns KindUser.
func (SessionChange) Kind() Kind { return KindUser }

// Version returns the version of the user state the event carries, or
// for one that carries none, its activity time and id.
func (ch SessionChange) Version() Version {
	if ch.User != nil {
		return ch.User.Version()
	}
	return Version{SourceTime: ch.ActiveAt, EventID: ch.EventID}
}

// IDs returns the session's user.
func (ch SessionChange) IDs() (userID, objectID string) { return ch.UserID, "" }

// EventTime is the time the event log keeps for the event
// (sourceTimestamp): the activity time, which a user's creation reads
// back from its stored session events.
func (ch SessionChange) EventTime() time.Time { return ch.ActiveAt }

// EventTime is the time the event log keeps as an event's sourceTimestamp:
// its change's version time, or a session's activity time.
func EventTime(ch Change) time.Time {
	if s, ok := ch.(SessionChange); ok {
		return s.EventTime()
	}
	return ch.Version().SourceTime
}

// SessionUserFields are the keys of Clerk's user object that a session's
// embedded user must carry for its state to apply: every field usersync
// reads that a user event carries. A user with fewer (Clerk may trim what
// it embeds) would blank the fields it lacks.
var SessionUserFields = []string{
	"id", "updated_at", "created_at", "first_name", "last_name", "username", "image_url", "external_id",
	"primary_email_address_id", "email_addresses", "primary_phone_number_id", "phone_numbers",
	"public_metadata", "last_sign_in_at", "banned", "locked",
}

// clerkSession is the part of a session event's data usersync reads.
type clerkSession struct {
	UserID       string          `json:"user_id" validate:"required,clerkid=user_"`
	LastActiveAt json.RawMessage `json:"last_active_at"`
	CreatedAt    json.RawMessage `json:"created_at"`
	User         json.RawMessage `json:"user"`
}

// SessionChange validates a session event's data and returns what it
// says of its user. Its error wraps ErrInvalid: no user id, no activity
// time (neither last_active_at nor created_at is a Clerk time), a time
// more than MaxFutureSkew ahead of now, or an embedded user that is not
// an object or null, is not the session's user, or is invalid as a user
// event's data would be.
func (e ClerkEvent) SessionChange(eventID string, now time.Time) (SessionChange, error) {
	if err := e.checkLimits(); err != nil {
		return SessionChange{}, err
	}
	var s clerkSession
	if err := decodeData(e.Data, &s); err != nil {
		return SessionChange{}, err
	}
	ch := SessionChange{UserID: s.UserID, EventID: eventID}
	at, err := clerkTime(s.LastActiveAt)
	field := "data.last_active_at"
	if err != nil {
		at, err = clerkTime(s.CreatedAt)
		field = "data.created_at"
	}
	if err != nil {
		return SessionChange{}, Public(ErrInvalid, "data.last_active_at or data.created_at %v", err).In("data.last_active_at")
	}
	if err := checkNotFuture(field, at, now); err != nil {
		return SessionChange{}, err
	}
	ch.ActiveAt = at
	if len(s.User) == 0 || string(s.User) == "null" {
		return ch, nil
	}
	if !isObject(s.User) {
		return SessionChange{}, Public(ErrInvalid, "data.user must be an object or null").In("data.user")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(s.User, &keys); err != nil {
		return SessionChange{}, Public(ErrInvalid, "data.user must be an object or null").In("data.user")
	}
	for _, k := range SessionUserFields {
		if _, ok := keys[k]; !ok {
			return ch, nil // incomplete: its activity only
		}
	}
	var u ClerkUser
	if err := json.Unmarshal(s.User, &u); err != nil {
		return SessionChange{}, Public(ErrInvalid, "data.user is not a Clerk user").In("data.user").Because(err)
	}
	if err := validateAs("data.user.", &u); err != nil {
		return SessionChange{}, err
	}
	if u.ID != s.UserID {
		return SessionChange{}, Public(ErrInvalid, "data.user.id is not the session's data.user_id").In("data.user.id")
	}
	uc, err := u.change(eventID)
	if err == nil {
		err = checkNotFuture("data.user.updated_at", uc.SourceTime, now)
	}
	if err != nil {
		return SessionChange{}, err
	}
	ch.User = &uc
	return ch, nil
}

// sessionUserID reads a session event's data.user_id as UserID does.
func (e ClerkEvent) sessionUserID() string {
	var d struct {
		UserID string `json:"user_id"`
	}
	return readID(e.Data, &d, func() string { return d.UserID })
}

// IsSessionType reports whether typ is one of Clerk's session types.
func IsSessionType(typ string) bool {
	for _, t := range sessionTypes {
		if t.Type == typ {
			return true
		}
	}
	return false
}

// SessionDecision is what applying a session event does to its user,
// whose stored version is cur (nil: unknown) and stored lastActiveAt
// active (nil: none).
type SessionDecision struct {
	// State is what the embedded user state does (Decide's words):
	// DecideCreate or DecideUpdate write it; DecideUnchanged: it is the
	// stored state already (a retry); DecideStale: the event carries none,
	// or one not newer (an equal time keeps the stored state);
	// DecideDeleted: the user is deleted.
	State Decision
	// Active reports that the event moves the user's lastActiveAt.
	Active bool
}

// DecideSession says what applying the session change ch does. It is the
// one statement of the session rule, which both stores express:
//   - a deleted user never changes;
//   - the embedded user state applies as a user event's would, but only
//     when strictly newer than the stored state (or the user is
//     unknown): an equal time keeps the stored state;
//   - lastActiveAt moves only forward, and only on a user that exists (or
//     that the event creates);
//   - an unknown user whose state the event does not carry is not
//     created: its activity waits in the event log, and the user's
//     creation reads it back.
func DecideSession(cur *Version, active *time.Time, ch SessionChange) SessionDecision {
	switch {
	case cur == nil && ch.User != nil:
		return SessionDecision{State: DecideCreate, Active: true}
	case cur == nil:
		return SessionDecision{State: DecideStale}
	case cur.Deleted:
		return SessionDecision{State: DecideDeleted}
	}
	d := SessionDecision{State: DecideStale, Active: active == nil || ch.ActiveAt.After(*active)}
	switch {
	case ch.User == nil:
	case cur.EventID == ch.User.EventID:
		d.State = DecideUnchanged
	case ch.User.SourceTime.After(cur.SourceTime):
		d.State = DecideUpdate
	}
	return d
}

// Outcome is the outcome a session event records: applied when its user
// state applied (created or updated the user, or is the stored state: a
// retry), active when it moved only lastActiveAt, deleted for a deleted
// user, ignored for a user unknown to the copy that it could not create,
// and stale when it changed nothing.
func (d SessionDecision) Outcome(known bool) Outcome {
	switch {
	case d.State == DecideDeleted:
		return OutcomeDeleted
	case d.State == DecideCreate || d.State == DecideUpdate || d.State == DecideUnchanged:
		return OutcomeApplied
	case d.Active:
		return OutcomeActivity
	case !known:
		return OutcomeIgnored
	}
	return OutcomeStale
}
