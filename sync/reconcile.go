package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/usersync/usersync/models"
)

// ClerkUsers is what a reconcile reads from Clerk's Backend API.
type ClerkUsers interface {
	// ListUsers returns the users at offset in Clerk's list, in creation
	// order, at most limit of them, as Clerk sent them.
	ListUsers(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	// GetUser returns one user, or an error wrapping models.ErrNotFound
	// when Clerk does not know it.
	GetUser(ctx context.Context, userID string) (json.RawMessage, error)
}

// LocalUsers is what a reconcile reads of the users collection.
type LocalUsers interface {
	// Get returns the user, deleted or not, or an error wrapping
	// models.ErrNotFound.
	Get(ctx context.Context, userID string) (models.User, error)
	// WalkActive calls fn with the id of every active user first written
	// before writtenBefore, and stops at fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(userID string) error) error
}

// Reconciler brings the users collection in line with Clerk's user list:
// every listed state is applied as a webhook carrying it would be, and,
// when asked, active users that Clerk no longer has are deleted as a
// webhook user.deleted would delete them.
type Reconciler struct {
	Service *Service
	Clerk   ClerkUsers
	Users   LocalUsers
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ReconcileOptions say what one run does.
type ReconcileOptions struct {
	// Deletions turns on the search for users deleted in Clerk. Without it
	// a run only applies Clerk's states (a backfill).
	Deletions bool
	// Offset is where the listing starts; only without Deletions, which
	// needs the whole list.
	Offset int
	// Limit is the page size, 1 to 500.
	Limit int
	// MaxDeletes is the most users a run may delete; with more to delete
	// it deletes none and reports them. Negative means no limit.
	MaxDeletes int
	// DryRun changes nothing and reports what a run would change.
	DryRun bool
	// OnPage, if set, is told what became of each page of Clerk's list.
	OnPage func(offset int, page Tally)
	// OnUser, if set, is told of each user that is not simply counted.
	OnUser func(UserNote)
}

// Tally counts what became of users read from Clerk.
type Tally struct {
	Users       int // read from Clerk
	Applied     int // their state is now the stored one (dry run: would be)
	Stale       int // a newer state was stored
	Unchanged   int // the same state was stored, from a webhook
	DeletedUser int // the user is deleted here and stays deleted
	Duplicate   int // this very state had been applied by an earlier run
	Failed      int // could not be applied (stored as a failed event)
}

// Add adds p to t.
func (t *Tally) Add(p Tally) {
	t.Users += p.Users
	t.Applied += p.Applied
	t.Stale += p.Stale
	t.Unchanged += p.Unchanged
	t.DeletedUser += p.DeletedUser
	t.Duplicate += p.Duplicate
	t.Failed += p.Failed
}

// UserNote tells of one user a run did something particular to.
type UserNote struct {
	Offset int    // in Clerk's list; -1 for the users of the deletion step
	UserID string // "" when it could not be read
	Action string // one of the Note... constants
	Err    error  // for NoteFailed and NoteUnchecked
}

// User notes.
const (
	NoteFailed      = "failed"       // a state that could not be applied
	NoteWouldCreate = "would_create" // dry run: a user unknown here
	NoteWouldUpdate = "would_update" // dry run: a newer state than the stored one
	NoteWouldDelete = "would_delete" // dry run, or refused: a user Clerk no longer has
	NoteDeleted     = "deleted"      // deleted here: Clerk no longer has it
	NoteKept        = "kept"         // absent from the list but Clerk has it: not deleted
	NoteUnchecked   = "unchecked"    // absent from the list, and Clerk's answer about it failed: not deleted
)

// ReconcileReport is what one run did.
type ReconcileReport struct {
	RunID    string    // the listing's start in Unix ms; names the run's delete events
	Started  time.Time // when the listing began
	Duration time.Duration
	Offset   int  // the first offset read
	End      int  // the offset after the last user read
	Complete bool // the whole list was read without an error
	Listed   Tally
	// LocalUsers counts the active users first written before the listing
	// began: the ones a deletion may concern. -1 when they were not read.
	LocalUsers int
	Deleted    int      // users deleted (dry run: that would be)
	Absent     []string // active users absent from Clerk's list
	// Refused is set when more than MaxDeletes users were to be deleted:
	// none was. ToDelete lists them: those Clerk answered 404 for, and
	// those not asked about once the limit was passed.
	Refused  bool
	ToDelete []string
	// DeletesSkipped says why no user was looked for deletion ("" when
	// they were); set when deletions were asked for.
	DeletesSkipped string
}

// StoppedError is a run that stopped before the end of Clerk's list.
// Every user before Offset is applied.
type StoppedError struct {
	Offset int
	Err    error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped at offset %d: %v", e.Offset, e.Err)
}
func (e *StoppedError) Unwrap() error { return e.Err }

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Run reads Clerk's whole user list (from opts.Offset) and applies every
// state, then, with opts.Deletions, deletes the active users first written
// before the listing began that Clerk no longer has.
//
// A user that can never be applied, or not yet, is counted as failed and
// the run goes on. Any other failure stops the run with a *StoppedError
// (or the database's error in the deletion step). Nothing is deleted unless
// the whole list was read, every listed user had a readable id, and Clerk
// answered 404 to a request for that very user: offset paging is not a
// snapshot, so a user deleted in Clerk during the listing shifts the pages
// after it and hides another user from the list. Nothing at all is
// deleted when more than opts.MaxDeletes users would be.
func (r *Reconciler) Run(ctx context.Context, opts ReconcileOptions) (rep ReconcileReport, err error) {
	start := r.now().UTC().Truncate(time.Millisecond)
	rep = ReconcileReport{
		RunID: strconv.FormatInt(start.UnixMilli(), 10), Started: start,
		Offset: opts.Offset, End: opts.Offset, LocalUsers: -1,
	}
	defer func() { rep.Duration = r.now().Sub(start) }()
	if opts.Deletions && opts.Offset != 0 {
		return rep, errors.New("a reconcile with deletions reads the whole list, from offset 0")
	}
	if opts.Limit < 1 {
		opts.Limit = 500
	}
	seen := map[string]struct{}{}
	unreadable := 0
	for {
		users, err := r.Clerk.ListUsers(ctx, rep.End, opts.Limit)
		if err != nil {
			return rep, &StoppedError{Offset: rep.End, Err: err}
		}
		var page Tally
		for i, raw := range users {
			userID, err := r.one(ctx, raw, rep.End+i, opts, &page)
			if userID == "" {
				unreadable++
			} else {
				seen[userID] = struct{}{}
			}
			if err != nil {
				rep.Listed.Add(page)
				return rep, &StoppedError{Offset: rep.End, Err: err}
			}
		}
		rep.Listed.Add(page)
		if len(users) > 0 && opts.OnPage != nil {
			opts.OnPage(rep.End, page)
		}
		rep.End += len(users)
		if len(users) < opts.Limit {
			break
		}
	}
	rep.Complete = true
	if !opts.Deletions {
		return rep, nil
	}
	if unreadable > 0 {
		rep.DeletesSkipped = fmt.Sprintf("%d listed users had no readable id", unreadable)
		return rep, nil
	}
	err = r.deleteAbsent(ctx, seen, opts, &rep)
	return rep, err
}

// one applies (or, in a dry run, previews) one user of Clerk's list and
// counts it in page. Its error stops the run.
func (r *Reconciler) one(ctx context.Context, raw json.RawMessage, offset int, opts ReconcileOptions, page *Tally) (userID string, err error) {
	page.Users++
	note := func(action string, err error) {
		if opts.OnUser != nil {
			opts.OnUser(UserNote{Offset: offset, UserID: userID, Action: action, Err: err})
		}
	}
	d, err := clerkUserDelivery(raw)
	if err != nil {
		page.Failed++
		note(NoteFailed, err)
		return "", nil
	}
	userID = d.Event.UserID()
	ch, invalid := d.Event.Change(d.EventID, r.now())
	if opts.DryRun {
		if invalid != nil {
			page.Failed++
			note(NoteFailed, invalid)
			return userID, nil
		}
		return userID, r.preview(ctx, ch, page, note)
	}
	res, err := r.Service.Ingest(ctx, d)
	switch {
	case errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrRetryLater):
		// Stored as failed: invalid ones wait for an operator, the others
		// for the recovery sweep.
		page.Failed++
		note(NoteFailed, err)
		return userID, nil
	case err != nil:
		return userID, fmt.Errorf("apply user %q: %w", orNoID(userID), err)
	case res.Duplicate:
		page.Duplicate++
	case res.Outcome == models.OutcomeApplied:
		page.Applied++
	case res.Outcome == models.OutcomeDeletedUser:
		page.DeletedUser++
	case res.Outcome == models.OutcomeStale:
		// Stale is also what a state equal to a webhook's is: tell them apart.
		cur, err := r.Users.Get(ctx, userID)
		if err != nil || invalid != nil {
			page.Stale++
		} else {
			page.stale(cur, ch)
		}
	default:
		page.Failed++
		note(NoteFailed, fmt.Errorf("event %q is %s", res.EventID, res.Status))
	}
	return userID, nil
}

// preview counts what applying ch would do, without writing.
func (r *Reconciler) preview(ctx context.Context, ch models.Change, page *Tally, note func(string, error)) error {
	cur, err := r.Users.Get(ctx, ch.UserID)
	var v *models.Version
	switch {
	case errors.Is(err, models.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read user %q: %w", ch.UserID, err)
	default:
		v = new(cur.Version())
	}
	switch models.Decide(v, ch.Version()) {
	case models.DecideCreate:
		page.Applied++
		note(NoteWouldCreate, nil)
	case models.DecideUpdate:
		page.Applied++
		note(NoteWouldUpdate, nil)
	case models.DecideUnchanged:
		page.Duplicate++
	case models.DecideDeletedUser:
		page.DeletedUser++
	default:
		page.stale(cur, ch)
	}
	return nil
}

// stale counts a state older than the stored one: unchanged when it is
// the stored state itself, read again with another event id (reconcile's
// states and the webhooks' share Clerk's times), stale otherwise.
func (t *Tally) stale(cur models.User, ch models.Change) {
	if cur.SourceUpdatedAt.Equal(ch.SourceTime) {
		t.Unchanged++
	} else {
		t.Stale++
	}
}

// deleteAbsent finds the active users written before the listing began
// that the listing did not contain, asks Clerk about each, and deletes the
// ones Clerk does not know, within opts.MaxDeletes.
func (r *Reconciler) deleteAbsent(ctx context.Context, seen map[string]struct{}, opts ReconcileOptions, rep *ReconcileReport) error {
	note := func(userID, action string, err error) {
		if opts.OnUser != nil {
			opts.OnUser(UserNote{Offset: -1, UserID: userID, Action: action, Err: err})
		}
	}
	rep.LocalUsers = 0
	err := r.Users.WalkActive(ctx, rep.Started, func(userID string) error {
		rep.LocalUsers++
		if _, ok := seen[userID]; !ok {
			rep.Absent = append(rep.Absent, userID)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read local users: %w", err)
	}
	limited := opts.MaxDeletes >= 0
	var confirmed []string
	for i, userID := range rep.Absent {
		if limited && len(confirmed) > opts.MaxDeletes {
			// Refused already; the rest stay unchecked.
			confirmed = append(confirmed, rep.Absent[i:]...)
			break
		}
		raw, err := r.Clerk.GetUser(ctx, userID)
		switch {
		case errors.Is(err, models.ErrNotFound):
			confirmed = append(confirmed, userID)
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Listed.Failed++
			note(userID, NoteUnchecked, err)
		default:
			// Hidden from the list by a shift of the pages: apply its state
			// as the listing would have.
			note(userID, NoteKept, nil)
			var t Tally
			if _, err := r.one(ctx, raw, -1, opts, &t); err != nil {
				return err
			}
			rep.Listed.Add(t)
		}
	}
	if limited && len(confirmed) > opts.MaxDeletes {
		rep.Refused, rep.ToDelete = true, confirmed
		for _, userID := range confirmed {
			note(userID, NoteWouldDelete, nil)
		}
		return nil
	}
	for _, userID := range confirmed {
		if opts.DryRun {
			rep.Deleted++
			note(userID, NoteWouldDelete, nil)
			continue
		}
		res, err := r.Service.IngestClerkDelete(ctx, userID, rep.RunID, rep.Started)
		switch {
		case errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrRetryLater):
			rep.Listed.Failed++
			note(userID, NoteFailed, err)
		case err != nil:
			return fmt.Errorf("delete user %q: %w", userID, err)
		case res.Outcome == models.OutcomeApplied:
			rep.Deleted++
			note(userID, NoteDeleted, nil)
		}
	}
	return nil
}

func orNoID(userID string) string {
	if userID == "" {
		return "(no id)"
	}
	return userID
}
