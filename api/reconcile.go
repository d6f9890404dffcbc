package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	stdsync "sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

type reconcileRunJSON struct {
	ID              string  `json:"id"`
	Kind            string  `json:"kind"`
	Trigger         string  `json:"trigger"`
	StartedAt       string  `json:"startedAt"`
	DurationSeconds float64 `json:"durationSeconds"`
	Success         bool    `json:"success"`
	Error           string  `json:"error,omitempty"`
	usersAtTopJSON
	// Refused is the run's: a kind had more to delete than allowed.
	Refused bool `json:"refused"`
	// Each kind's counts; null when the run did not read the kind.
	Users         *reconcileCountsJSON `json:"users"`
	Organizations *reconcileCountsJSON `json:"organizations"`
	Memberships   *reconcileCountsJSON `json:"memberships"`
	// null too for a run kept before invitations were counted.
	Invitations *reconcileCountsJSON `json:"invitations"`
	// null too for a run kept before subscription items were counted.
	SubscriptionItems *reconcileCountsJSON `json:"subscriptionItems"`
}

// usersAtTopJSON is the users' counts at the top of a run or a dry run's
// report, as before the other kinds were counted: zeros and localUsers
// null when the run did not read users.
type usersAtTopJSON struct {
	ClerkUsers int  `json:"clerkUsers"`
	LocalUsers *int `json:"localUsers"`
	Applied    int  `json:"applied"`
	Stale      int  `json:"stale"`
	Unchanged  int  `json:"unchanged"`
	Deleted    int  `json:"deleted"`
	Failed     int  `json:"failed"`
	ToDelete   int  `json:"toDelete"`
}

func newUsersAtTopJSON(u *models.ReconcileCounts) usersAtTopJSON {
	if u == nil {
		return usersAtTopJSON{}
	}
	return usersAtTopJSON{ClerkUsers: u.Clerk, LocalUsers: optCount(u.Local), Applied: u.Applied, Stale: u.Stale,
		Unchanged: u.Unchanged, Deleted: u.Deleted, Failed: u.Failed, ToDelete: u.ToDelete}
}

// reconcileCountsJSON is what a run did to one kind.
type reconcileCountsJSON struct {
	Clerk     int  `json:"clerk"`
	Local     *int `json:"local"` // null when not read
	Applied   int  `json:"applied"`
	Stale     int  `json:"stale"`
	Unchanged int  `json:"unchanged"`
	Deleted   int  `json:"deleted"`
	Failed    int  `json:"failed"`
	Refused   bool `json:"refused"`
	ToDelete  int  `json:"toDelete"`
}

func newReconcileCountsJSON(c *models.ReconcileCounts) *reconcileCountsJSON {
	if c == nil {
		return nil
	}
	return &reconcileCountsJSON{
		Clerk: c.Clerk, Local: optCount(c.Local), Applied: c.Applied, Stale: c.Stale, Unchanged: c.Unchanged,
		Deleted: c.Deleted, Failed: c.Failed, Refused: c.Refused, ToDelete: c.ToDelete,
	}
}

// optCount is n, or nil for -1 (not read).
func optCount(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

func newReconcileRunJSON(r models.ReconcileSummary) reconcileRunJSON {
	j := reconcileRunJSON{
		ID: r.ID, Kind: r.Kind, Trigger: r.Trigger, StartedAt: formatTime(r.StartedAt),
		DurationSeconds: r.Duration.Seconds(), Success: r.Success, Error: r.Error, Refused: r.Refused(),
		usersAtTopJSON: newUsersAtTopJSON(r.Users),
		Users:          newReconcileCountsJSON(r.Users), Organizations: newReconcileCountsJSON(r.Organizations),
		Memberships: newReconcileCountsJSON(r.Memberships), Invitations: newReconcileCountsJSON(r.Invitations),
		SubscriptionItems: newReconcileCountsJSON(r.SubscriptionItems),
	}
	return j
}

type reconcileRunsRequest struct {
	Limit int `query:"limit" validate:"min=1,max=50"`
}

// reconcileRuns answers GET /v1/reconcile/runs: the last reconcile and
// backfill runs, newest first.
func (s *server) reconcileRuns(c echo.Context) error {
	req := reconcileRunsRequest{Limit: 20}
	if err := bind(c, &req); err != nil {
		return err
	}
	if s.consoleCfg.Runs == nil {
		return notConfigured("keeping reconcile runs")
	}
	runs, err := s.consoleCfg.Runs.Last(c.Request().Context(), req.Limit)
	if err != nil {
		return err
	}
	resp := struct {
		Data []reconcileRunJSON `json:"data"`
	}{Data: make([]reconcileRunJSON, 0, len(runs))}
	for _, r := range runs {
		resp.Data = append(resp.Data, newReconcileRunJSON(r))
	}
	return c.JSON(http.StatusOK, resp)
}

// Bounds of a dry run: its time, the objects it lists by id, and how
// often one may start.
const (
	dryRunTimeout   = 15 * time.Minute
	maxDryRunNotes  = 1000
	dryRunSpacing   = time.Minute
	dryRunErrorSize = 512
)

// dryRunJob is the last dry run this instance started.
type dryRunJob struct {
	mu stdsync.Mutex
	jobRun
	listed  int
	notes   []dryRunNote
	dropped int
	report  sync.ReconcileReport
}

// dryRunNote is one object a run would change or could not apply.
type dryRunNote struct {
	Kind models.Kind `json:"kind"`
	ID   string      `json:"id"`
	// UserID is a user's id (ID), on a user's note only, as before the
	// other kinds were noted.
	UserID string `json:"userId,omitempty"`
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

// dryRunReportJSON is what a run would do: the users' counts at the top,
// as before the other kinds were counted, and each kind's.
type dryRunReportJSON struct {
	Complete bool `json:"complete"`
	usersAtTopJSON
	Refused        bool   `json:"refused"` // the users'
	DeletesSkipped string `json:"deletesSkipped,omitempty"`
	// Each kind's; null when the dry run did not read the kind (the Clerk
	// instance has organizations or Billing turned off).
	Users             *dryRunKindJSON `json:"users"`
	Organizations     *dryRunKindJSON `json:"organizations"`
	Memberships       *dryRunKindJSON `json:"memberships"`
	Invitations       *dryRunKindJSON `json:"invitations"`
	SubscriptionItems *dryRunKindJSON `json:"subscriptionItems"`
}

// dryRunKindJSON is what a run would do to one kind.
type dryRunKindJSON struct {
	reconcileCountsJSON
	// Complete: Clerk's whole list of the kind was read.
	Complete bool `json:"complete"`
	// DeletesSkipped says why no object of the kind would be deleted.
	DeletesSkipped string `json:"deletesSkipped,omitempty"`
}

func newDryRunReportJSON(rep sync.ReconcileReport) *dryRunReportJSON {
	users := rep.Of(models.KindUser)
	r := &dryRunReportJSON{Complete: users.Complete, usersAtTopJSON: newUsersAtTopJSON(rep.Counts(models.KindUser)),
		Refused: users.Refused, DeletesSkipped: users.DeletesSkipped}
	for _, k := range sync.ReconcileKinds() {
		c := rep.Counts(k)
		if c == nil {
			continue
		}
		kr := rep.Of(k)
		j := &dryRunKindJSON{reconcileCountsJSON: *newReconcileCountsJSON(c), Complete: kr.Complete, DeletesSkipped: kr.DeletesSkipped}
		switch k {
		case models.KindUser:
			r.Users = j
		case models.KindOrganization:
			r.Organizations = j
		case models.KindMembership:
			r.Memberships = j
		case models.KindInvitation:
			r.Invitations = j
		case models.KindSubscriptionItem:
			r.SubscriptionItems = j
		}
	}
	return r
}

type dryRunResponse struct {
	jobStatus // state none: no dry run since this instance started
	// Listed counts the objects (of every kind) read from Clerk so far.
	Listed int               `json:"listed"`
	Report *dryRunReportJSON `json:"report"`
	// Changes are the objects a run would create, update or delete, or
	// could not apply: at most 1000; ChangesDropped counts the others.
	Changes        []dryRunNote `json:"changes"`
	ChangesDropped int          `json:"changesDropped"`
}

func (j *dryRunJob) view() dryRunResponse {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := dryRunResponse{jobStatus: j.status(), Listed: j.listed, ChangesDropped: j.dropped,
		Changes: append([]dryRunNote{}, j.notes...)}
	if j.state != "" && j.state != "running" {
		r.Report = newDryRunReportJSON(j.report)
	}
	return r
}

// startDryRun answers POST /v1/reconcile/dry-run: it starts a dry run of
// reconcile of every kind in the background and answers 202 with its
// state; GET
// /v1/reconcile/dry-run follows it. One runs at a time, at most one a
// minute, each for at most 15 minutes; Clerk's API is read at the rate
// limit of the Clerk client.
func (s *server) startDryRun(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	if s.consoleCfg.DryRun == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"reading users from Clerk is not configured: set CLERK_SECRET_KEY on the server")
	}
	j := &s.dryRun
	now := s.now()
	j.mu.Lock()
	switch {
	case j.state == "running":
		j.mu.Unlock()
		return fmt.Errorf("%w: a dry run is running since %s", models.ErrConflict, formatTime(j.started))
	case j.state != "" && now.Sub(j.started) < dryRunSpacing:
		j.mu.Unlock()
		return fmt.Errorf("%w: a dry run started at %s; the next may start at %s",
			models.ErrConflict, formatTime(j.started), formatTime(j.started.Add(dryRunSpacing)))
	}
	j.state, j.started, j.finished, j.listed, j.notes, j.dropped, j.report, j.err =
		"running", now, time.Time{}, 0, nil, 0, sync.ReconcileReport{}, ""
	j.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.consoleContext(), dryRunTimeout)
	go func() {
		defer cancel()
		rep, err := s.consoleCfg.DryRun(ctx,
			func(_ int, page sync.Tally) {
				j.mu.Lock()
				j.listed += page.Read
				j.mu.Unlock()
			},
			func(n sync.Note) {
				switch n.Action {
				case sync.NoteKept:
					return // not a change
				}
				note := dryRunNote{Kind: n.Kind, ID: n.ID, Action: n.Action}
				if n.Kind == models.KindUser {
					note.UserID = n.ID
				}
				if n.Err != nil {
					note.Error = publicNote(n.Err)
				}
				j.mu.Lock()
				if len(j.notes) < maxDryRunNotes {
					j.notes = append(j.notes, note)
				} else {
					j.dropped++
				}
				j.mu.Unlock()
			})
		j.mu.Lock()
		defer j.mu.Unlock()
		j.report, j.finished, j.state = rep, s.now(), "done"
		if err != nil {
			j.state, j.err = "failed", publicNote(err)
		}
	}()
	return c.JSON(http.StatusAccepted, j.view())
}

// dryRunState answers GET /v1/reconcile/dry-run: the state of the last
// dry run this instance started.
func (s *server) dryRunState(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err
	}
	if s.consoleCfg.DryRun == nil {
		return echo.NewHTTPError(http.StatusNotImplemented,
			"reading users from Clerk is not configured: set CLERK_SECRET_KEY on the server")
	}
	return c.JSON(http.StatusOK, s.dryRun.view())
}

// publicNote is an error of a dry run as an admin may read it: an
// object's validation or Clerk's answer, bounded; a database error only by its
// class.
func publicNote(err error) string {
	if errors.Is(err, models.ErrUnavailable) {
		return "the database is unavailable"
	}
	msg := err.Error()
	if len(msg) > dryRunErrorSize {
		msg = msg[:dryRunErrorSize] + "…"
	}
	return msg
}
