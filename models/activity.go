package models

import (
	"regexp"
	"time"
)

// Activity kinds: what the per-minute counts of the console's charts
// count. A delivery stored for the first time is received; every attempt
// to process an event (a delivery, the recovery sweep, a replay) ends in
// one of the outcomes or in failed. Counts that earlier versions stored
// under deleted_user (OutcomeDeletedUserLegacy) are read as deleted: see
// ReadActivityKind.
const (
	ActivityReceived = "received"
	ActivityApplied  = string(OutcomeApplied)
	ActivityStale    = string(OutcomeStale)
	ActivityDeleted  = string(OutcomeDeleted)
	ActivityIgnored  = string(OutcomeIgnored)
	ActivityActivity = string(OutcomeActivity)
	ActivityFailed   = "failed"
)

// ActivityKinds are the activity kinds, in the order the console shows them.
var ActivityKinds = []string{ActivityReceived, ActivityApplied, ActivityStale, ActivityDeleted, ActivityIgnored, ActivityActivity, ActivityFailed}

// ReadActivityKind is the activity kind a stored (or given) kind name
// means: the name of an outcome reads as ReadOutcome reads it (deleted_user
// is deleted); any other name is itself.
func ReadActivityKind(kind string) string { return string(ReadOutcome(kind)) }

// Activity bucket sizes and how long a store keeps each: at least a day
// of minutes for the hour and day charts, at least a week of hours for the
// week chart, each with a margin.
const (
	ActivityMinute          = time.Minute
	ActivityHour            = time.Hour
	ActivityMinuteRetention = 48 * time.Hour
	ActivityHourRetention   = 35 * 24 * time.Hour
)

// ActivityBucket is the counts of one time bucket, by activity kind.
type ActivityBucket struct {
	Start  time.Time // the bucket's start, UTC, a multiple of its size
	Counts map[string]int64
}

// validKind is what an activity kind may be: a name, never a path or an
// operator of a query language.
var validKind = regexp.MustCompile(`^[a-z][a-z_]{0,31}$`)

// ValidActivityKind reports whether kind may name an activity count:
// [a-z][a-z_]{0,31}.
func ValidActivityKind(kind string) bool { return validKind.MatchString(kind) }
