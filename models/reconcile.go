package models

import (
	"time"
	"unicode/utf8"
)

// ReconcileSummary is what one reconcile or backfill run did, as the
// store keeps it for the console (the last KeptReconcileRuns runs).
type ReconcileSummary struct {
	ID        string // unique among the kept runs, set by the store
	Kind      string // "reconcile" or "backfill"
	Trigger   string // "schedule" (serve's USERSYNC_RECONCILE_INTERVAL) or "command"
	StartedAt time.Time
	Duration  time.Duration
	// Success is true when the run read Clerk's whole lists and did what
	// it was to do; Error says why not (at most MaxRunError bytes).
	Success bool
	Error   string

	// Users, Organizations, Memberships, Invitations and SubscriptionItems are what
	// the run did to each kind; nil when the kind was not part of the run
	// (-kinds), when the Clerk instance has organizations or Billing
	// turned off (nothing of theirs was read), or when the run was kept
	// before the kind was counted, so that a kind not read is never taken
	// for zeros.
	Users             *ReconcileCounts
	Organizations     *ReconcileCounts
	Memberships       *ReconcileCounts
	Invitations       *ReconcileCounts
	SubscriptionItems *ReconcileCounts
}

// ReconcileCounts is what one run did to the objects of one kind.
type ReconcileCounts struct {
	Clerk     int // read from Clerk's list
	Local     int // active here before the listing; -1 when not read
	Applied   int
	Stale     int
	Unchanged int // the stored state already was Clerk's, or the object is deleted here and stays so
	Deleted   int
	Failed    int
	// Refused: more objects of the kind were to be deleted than allowed;
	// ToDelete of them, and none was deleted.
	Refused  bool
	ToDelete int
}

// SummaryKinds are the kinds a ReconcileSummary keeps counts of: every
// kind a reconcile reads.
var SummaryKinds = []Kind{KindUser, KindOrganization, KindMembership, KindInvitation, KindSubscriptionItem}

// Of returns the counts of kind k, nil when the run did not read it.
func (r ReconcileSummary) Of(k Kind) *ReconcileCounts {
	switch k {
	case KindUser:
		return r.Users
	case KindOrganization:
		return r.Organizations
	case KindMembership:
		return r.Memberships
	case KindInvitation:
		return r.Invitations
	case KindSubscriptionItem:
		return r.SubscriptionItems
	}
	return nil
}

// Set sets the counts of kind k (nil: not read).
func (r *ReconcileSummary) Set(k Kind, c *ReconcileCounts) {
	switch k {
	case KindUser:
		r.Users = c
	case KindOrganization:
		r.Organizations = c
	case KindMembership:
		r.Memberships = c
	case KindInvitation:
		r.Invitations = c
	case KindSubscriptionItem:
		r.SubscriptionItems = c
	}
}

// Refused reports whether the run refused to delete the objects of a kind.
func (r ReconcileSummary) Refused() bool {
	for _, c := range []*ReconcileCounts{r.Users, r.Organizations, r.Memberships, r.Invitations, r.SubscriptionItems} {
		if c != nil && c.Refused {
			return true
		}
	}
	return false
}

// KeptReconcileRuns is how many run summaries a store keeps; MaxRunError
// bounds the error of one.
const (
	KeptReconcileRuns = 50
	MaxRunError       = 512
)

// Bounded is r as a store keeps it: its start in UTC to the millisecond,
// its duration to the millisecond, and its error cut to MaxRunError bytes
// (at a character's start).
func (r ReconcileSummary) Bounded() ReconcileSummary {
	r.StartedAt = r.StartedAt.UTC().Truncate(time.Millisecond)
	r.Duration = r.Duration.Truncate(time.Millisecond)
	if len(r.Error) > MaxRunError {
		cut := MaxRunError
		for cut > 0 && !utf8.RuneStart(r.Error[cut]) {
			cut--
		}
		r.Error = r.Error[:cut]
	}
	return r
}
