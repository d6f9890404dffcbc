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
	// Success is true when the run read Clerk's whole list and did what it
	// was to do; Error says why not (at most MaxRunError bytes).
	Success bool
	Error   string

	ClerkUsers int // users read from Clerk's list
	LocalUsers int // active users before the listing; -1 when not read
	Applied    int
	Stale      int
	Unchanged  int
	Deleted    int
	Failed     int
	// Refused: more users were to be deleted than allowed; ToDelete of
	// them, and none was deleted.
	Refused  bool
	ToDelete int
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
