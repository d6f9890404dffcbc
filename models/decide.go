package models

import (
	"errors"
	"time"
)

// Version is what ordering needs of a state of one object (a user, an
// organization or a membership): the Clerk time and event of the state,
// and whether it is a tombstone. A stored version is that of the newest
// state applied.
type Version struct {
	SourceTime time.Time
	EventID    string
	Deleted    bool
}

// Version returns the version of u's stored state.
func (u User) Version() Version {
	return Version{SourceTime: u.SourceUpdatedAt, EventID: u.LastEventID, Deleted: u.Deleted()}
}

// Version returns the version of the state ch carries.
func (ch UserChange) Version() Version {
	return Version{SourceTime: ch.SourceTime, EventID: ch.EventID, Deleted: ch.Deleted}
}

// Kind returns KindUser.
func (UserChange) Kind() Kind { return KindUser }

// IDs returns the user's id.
func (ch UserChange) IDs() (userID, objectID string) { return ch.UserID, "" }

// VersionOf returns the version of o, which a read returned with err: nil
// (and no error) when err says that o does not exist.
func VersionOf[T interface{ Version() Version }](o T, err error) (*Version, error) {
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := o.Version()
	return &v, nil
}

// Decision is what applying a change to an object's stored state does.
type Decision int

// Decisions.
const (
	// DecideCreate: the object is unknown; the change creates it (a
	// deletion creates a tombstone).
	DecideCreate Decision = iota + 1
	// DecideUpdate: the change replaces the stored state of an active
	// object.
	DecideUpdate
	// DecideUnchanged: the stored state is this very change (a retry).
	DecideUnchanged
	// DecideStale: a newer state is stored; nothing changes.
	DecideStale
	// DecideDeleted: the object (user, organization or membership) is
	// deleted; nothing changes.
	DecideDeleted
)

// Writes reports whether the decision writes the change.
func (d Decision) Writes() bool { return d == DecideCreate || d == DecideUpdate }

// Outcome is the outcome an event records for the decision, whatever the
// kind of its object.
func (d Decision) Outcome() Outcome {
	switch d {
	case DecideStale:
		return OutcomeStale
	case DecideDeleted:
		return OutcomeDeleted
	}
	return OutcomeApplied
}

// Decide says what applying the state ch does to an object (a user, an
// organization or a membership) whose stored state is cur (nil: the object
// is unknown). It is the one statement of the ordering rules, which both
// stores express in their own language and which the dry run and
// reconcile ask directly:
//   - a tombstone never changes, and never becomes active again;
//   - a deletion wins over every state of an active object (a deleted
//     object never comes back, and its last state is unknown);
//   - otherwise the newer state wins: Clerk's time, then the larger event
//     id (see Newer), so that every order of delivery ends the same.
func Decide(cur *Version, ch Version) Decision {
	switch {
	case cur == nil:
		return DecideCreate
	case cur.EventID == ch.EventID && cur.Deleted == ch.Deleted:
		return DecideUnchanged
	case cur.Deleted:
		return DecideDeleted
	case ch.Deleted:
		return DecideUpdate
	case Newer(ch.SourceTime, ch.EventID, cur.SourceTime, cur.EventID):
		return DecideUpdate
	}
	return DecideStale
}

// TakesEmailFrom reports whether ch, which claims an email, proves that
// another active user whose stored state is holder no longer holds it.
// Clerk gives an email one owner at any instant: a state at time T that
// claims it means that whoever held it in an older state has given it up
// since (an event that said so may have been lost). A holder whose state
// is newer keeps it: ch's own user has given it up since.
func TakesEmailFrom(ch UserChange, holder Version) bool {
	return Newer(ch.SourceTime, ch.EventID, holder.SourceTime, holder.EventID)
}
