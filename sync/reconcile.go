package sync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/usersync/usersync/models"
)

// ClerkUsers is what a reconcile of users reads from Clerk's Backend API.
type ClerkUsers interface {
	// ListUsers returns the users at offset in Clerk's list, in creation
	// order, at most limit of them, as Clerk sent them.
	ListUsers(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	// GetUser returns one user, or an error wrapping models.ErrNotFound
	// when Clerk does not know it.
	GetUser(ctx context.Context, userID string) (json.RawMessage, error)
}

// ClerkOrganizations is what a reconcile of organizations and memberships
// reads from Clerk's Backend API.
type ClerkOrganizations interface {
	// ListOrganizations and ListMemberships return the organizations, or
	// every membership of the instance, at offset in Clerk's list, in
	// creation order, at most limit of them, as Clerk sent them.
	ListOrganizations(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	ListMemberships(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	// ListInvitations returns the organization invitations of the
	// instance, of every status, at offset in Clerk's list, in creation
	// order, at most limit of them, as Clerk sent them.
	ListInvitations(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
	// GetOrganization returns one organization, or an error wrapping
	// models.ErrNotFound when Clerk does not know it.
	GetOrganization(ctx context.Context, orgID string) (json.RawMessage, error)
	// UserMemberships returns the memberships of userID at offset, at
	// most limit of them, or an error wrapping models.ErrNotFound when
	// Clerk does not know the user.
	UserMemberships(ctx context.Context, userID string, offset, limit int) ([]json.RawMessage, error)
}

// ClerkBilling is what a reconcile of Clerk Billing's subscription items
// reads from Clerk's Backend API.
type ClerkBilling interface {
	// ListSubscriptionItems returns the subscription items of the whole
	// instance at offset in Clerk's list, the newest first, free plans'
	// included, at most limit of them, as Clerk sent them; an error
	// wrapping models.ErrFeatureOff when the instance has no Billing.
	ListSubscriptionItems(ctx context.Context, offset, limit int) ([]json.RawMessage, error)
}

// LocalBilling is what a reconcile reads of the billing objects.
type LocalBilling interface {
	// Items returns the payer's stored items (each item's newest state),
	// the newest Clerk time first, at most models.MaxPayerItems.
	Items(ctx context.Context, payer models.Payer) ([]models.SubscriptionItem, error)
}

// BillingSources are what a reconcile of subscription items reads:
// Clerk's list and the store.
type BillingSources struct {
	Clerk   ClerkBilling
	Billing LocalBilling
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

// LocalOrganizations is what a reconcile reads of the organizations.
type LocalOrganizations interface {
	// Get returns the organization, deleted or not, or an error wrapping
	// models.ErrNotFound.
	Get(ctx context.Context, orgID string) (models.Organization, error)
	// WalkActive calls fn with the id of every active organization first
	// written before writtenBefore, and stops at fn's first error.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(orgID string) error) error
}

// LocalMemberships is what a reconcile reads of the memberships.
type LocalMemberships interface {
	// Get returns the membership, deleted or not, or an error wrapping
	// models.ErrNotFound.
	Get(ctx context.Context, membershipID string) (models.Membership, error)
	// WalkActive calls fn with the id of every membership that is not a
	// tombstone and was first written before writtenBefore.
	WalkActive(ctx context.Context, writtenBefore time.Time, fn func(membershipID string) error) error
}

// LocalInvitations is what a reconcile reads of the invitations.
type LocalInvitations interface {
	// Get returns the invitation, deleted or not, or an error wrapping
	// models.ErrNotFound.
	Get(ctx context.Context, invitationID string) (models.Invitation, error)
}

// OrganizationSources are what a reconcile of organizations, memberships
// and invitations reads: Clerk's lists and the stores.
type OrganizationSources struct {
	Clerk         ClerkOrganizations
	Organizations LocalOrganizations
	Memberships   LocalMemberships
	Invitations   LocalInvitations
}

// Reconciler brings the users, organizations and memberships in line with
// Clerk's lists: every listed state is applied as a webhook carrying it
// would be, and, when asked, the objects that Clerk no longer has are
// deleted as a webhook .deleted would delete them.
type Reconciler struct {
	Service *Service
	Clerk   ClerkUsers
	Users   LocalUsers
	// Orgs, if set, adds organizations and memberships to the kinds a run
	// reconciles.
	Orgs *OrganizationSources
	// Billing, if set, adds Clerk Billing's subscription items to the
	// kinds a run reconciles. Their states are applied; none is ever
	// deleted (Clerk never deletes billing objects).
	Billing *BillingSources
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ReconcileOptions say what one run does.
type ReconcileOptions struct {
	// Kinds are the kinds to reconcile; nil means every kind the
	// Reconciler has (users, organizations and memberships with Orgs,
	// subscription items with Billing).
	Kinds []models.Kind
	// Deletions turns on the search for objects deleted in Clerk. Without
	// it a run only applies Clerk's states (a backfill).
	Deletions bool
	// Offset is where the listing starts; only without Deletions, which
	// needs the whole list, and with one kind: each list has its offsets.
	Offset int
	// Limit is the page size, 1 to 500.
	Limit int
	// MaxDeletes is the most objects of one kind a run may delete; with
	// more to delete it deletes none of that kind and reports them.
	// Negative means no limit. The memberships a user's or organization's
	// deletion deletes with it are not counted.
	MaxDeletes int
	// DryRun changes nothing and reports what a run would change.
	DryRun bool
	// OnPage, if set, is told what became of each page of Clerk's lists.
	OnPage func(k models.Kind, offset int, page Tally)
	// OnNote, if set, is told of each object that is not simply counted.
	OnNote func(Note)
}

// Tally counts what became of the objects of one kind read from Clerk.
type Tally struct {
	Read        int // read from Clerk
	Applied     int // their state is now the stored one (dry run: would be)
	Stale       int // a newer state was stored
	Unchanged   int // the same state was stored, from a webhook
	DeletedHere int // the object is deleted here and stays deleted
	Duplicate   int // this very state had been applied by an earlier run
	Failed      int // could not be applied (stored as a failed event)
}

// Add adds p to t.
func (t *Tally) Add(p Tally) {
	t.Read += p.Read
	t.Applied += p.Applied
	t.Stale += p.Stale
	t.Unchanged += p.Unchanged
	t.DeletedHere += p.DeletedHere
	t.Duplicate += p.Duplicate
	t.Failed += p.Failed
}

// Note tells of one object a run did something particular to.
type Note struct {
	Kind   models.Kind
	Offset int    // in Clerk's list; -1 for the objects of the deletion step
	ID     string // "" when it could not be read
	Action string // one of the Note... constants
	Err    error  // for NoteFailed and NoteUnchecked
}

// Notes.
const (
	NoteFailed      = "failed"       // a state that could not be applied
	NoteWouldCreate = "would_create" // dry run: an object unknown here
	NoteWouldUpdate = "would_update" // dry run: a newer state than the stored one
	NoteWouldDelete = "would_delete" // dry run, or refused: an object Clerk no longer has
	NoteDeleted     = "deleted"      // deleted here: Clerk no longer has it
	NoteKept        = "kept"         // absent from the list but Clerk has it: not deleted
	NoteUnchecked   = "unchecked"    // absent from the list, and Clerk's answer about it failed: not deleted
)

// ReconcileReport is what one run did.
type ReconcileReport struct {
	RunID    string    // the listings' start in Unix ms; names the run's delete events
	Started  time.Time // when the listings began
	Duration time.Duration
	Kinds    []KindReport // one per kind run, in the order of Kinds
}

// Of returns the report of kind k; a kind that was not run has Local -1
// and nothing else.
func (r ReconcileReport) Of(k models.Kind) KindReport {
	for _, kr := range r.Kinds {
		if kr.Kind == k {
			return kr
		}
	}
	return KindReport{Kind: k, Local: -1}
}

// Counts is what the run did to kind k as a run summary keeps it
// (models.ReconcileSummary); nil when the kind was not run, or is turned
// off in the Clerk instance: nothing of it was read.
func (r ReconcileReport) Counts(k models.Kind) *models.ReconcileCounts {
	for _, kr := range r.Kinds {
		if kr.Kind == k && !kr.Off {
			return &models.ReconcileCounts{
				Clerk: kr.Listed.Read, Local: kr.Local, Applied: kr.Listed.Applied, Stale: kr.Listed.Stale,
				Unchanged: kr.Listed.Unchanged + kr.Listed.Duplicate + kr.Listed.DeletedHere, Deleted: kr.Deleted,
				Failed: kr.Listed.Failed, Refused: kr.Refused, ToDelete: len(kr.ToDelete),
			}
		}
	}
	return nil
}

// Failures says how many objects of each kind the run could not apply, or
// could not check for deletion ("200 users", "200 users and 1
// membership"); "" when there were none. Such a run is partial: it did
// not do all it was to do, whatever else it did.
func (r ReconcileReport) Failures() string {
	var parts []string
	for _, kr := range r.Kinds {
		if n := kr.Listed.Failed; n > 0 {
			noun := kr.Kind.Plural()
			if n == 1 {
				noun = string(kr.Kind)
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, noun))
		}
	}
	return strings.Join(parts, " and ")
}

// Refused reports whether a kind had more objects to delete than allowed.
func (r ReconcileReport) Refused() bool {
	for _, kr := range r.Kinds {
		if kr.Refused {
			return true
		}
	}
	return false
}

// KindReport is what one run did to one kind of object.
type KindReport struct {
	Kind     models.Kind
	Offset   int  // the first offset read
	End      int  // the offset after the last object read
	Complete bool // the whole list was read without an error
	// Off says that the Clerk instance has the kind's feature turned off
	// (organizations, Billing): Clerk answered its list with
	// models.ErrFeatureOff.
	// The kind has no objects to read, and nothing of it is deleted.
	Off bool
	// Stopped is why the listing stopped before the end of Clerk's list.
	Stopped *StoppedError
	Listed  Tally
	// Local counts the active objects first written before the listings
	// began: the ones a deletion may concern. -1 when they were not read.
	Local   int
	Deleted int      // objects deleted (dry run: that would be)
	Absent  []string // active objects absent from Clerk's list
	// Refused is set when more than MaxDeletes objects were to be
	// deleted: none was. ToDelete lists them: those Clerk answered 404
	// for, and those not asked about once the limit was passed.
	Refused  bool
	ToDelete []string
	// DeletesSkipped says why no object of the kind was looked for
	// deletion ("" when they were); set when deletions were asked for.
	DeletesSkipped string
}

// StoppedError is a listing that stopped before the end of Clerk's list.
// Every object of the list before Offset is applied.
type StoppedError struct {
	Kind   models.Kind
	Offset int
	Err    error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("%s stopped at offset %d: %v", e.Kind.Plural(), e.Offset, e.Err)
}
func (e *StoppedError) Unwrap() error { return e.Err }

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Run reads Clerk's lists of the kinds asked for (from opts.Offset) and
// applies every state, then, with opts.Deletions, deletes the active
// objects first written before the listings began that Clerk no longer
// has: users, then organizations, then memberships.
//
// The lists are read a page of each in turn, so that every kind moves on
// at the same pace within the rate limit they share, and a run that stops
// has gone as far in each. An object that can never be applied, or not
// yet, is counted as failed and the run goes on. Any other failure stops
// that kind's listing (its report's Stopped) and the others go on; Run
// then returns the *StoppedErrors joined, and deletes nothing of any kind.
// Nothing is deleted unless every list was read whole, every listed object
// of the kind had a readable id, and Clerk answered 404 to a request for
// that very object: offset paging is not a snapshot, so an object deleted
// in Clerk during the listing shifts the pages after it and hides another
// from the list. Nothing of a kind is deleted when more than
// opts.MaxDeletes of it would be. An error of the deletion step (the
// database's) stops the run.
func (r *Reconciler) Run(ctx context.Context, opts ReconcileOptions) (rep ReconcileReport, err error) {
	start := r.now().UTC().Truncate(time.Millisecond)
	rep = ReconcileReport{RunID: strconv.FormatInt(start.UnixMilli(), 10), Started: start}
	defer func() { rep.Duration = r.now().Sub(start) }()
	srcs, err := r.sources(opts.Kinds)
	if err != nil {
		return rep, err
	}
	switch {
	case opts.Deletions && opts.Offset != 0:
		return rep, errors.New("a reconcile with deletions reads the whole lists, from offset 0")
	case opts.Offset != 0 && len(srcs) != 1:
		return rep, errors.New("an offset is one list's: start at an offset with one kind only")
	}
	if opts.Limit < 1 {
		opts.Limit = 500
	}
	rep.Kinds = make([]KindReport, len(srcs))
	ls := make([]*listing, len(srcs))
	for i, src := range srcs {
		rep.Kinds[i] = KindReport{Kind: src.kind, Offset: opts.Offset, End: opts.Offset, Local: -1}
		ls[i] = &listing{src: src, rep: &rep.Kinds[i], seen: map[string]struct{}{}}
	}
	for pending := len(ls); pending > 0; {
		for _, l := range ls {
			if l.done {
				continue
			}
			if err := r.page(ctx, l, opts); err != nil {
				l.rep.Stopped = &StoppedError{Kind: l.src.kind, Offset: l.rep.End, Err: err}
				l.done = true
			}
			if l.done {
				pending--
			}
		}
	}
	var stops []error
	for _, kr := range rep.Kinds {
		if kr.Stopped != nil {
			stops = append(stops, kr.Stopped)
		}
	}
	if len(stops) > 0 {
		return rep, errors.Join(stops...)
	}
	if !opts.Deletions {
		return rep, nil
	}
	for _, l := range ls {
		if l.rep.Off {
			l.rep.DeletesSkipped = fmt.Sprintf("%s are not enabled in the Clerk instance", l.src.kind.Plural())
			continue
		}
		if l.src.walk == nil {
			// Subscription items: Clerk never deletes them.
			l.rep.DeletesSkipped = fmt.Sprintf("Clerk never deletes %s", l.src.kind.Plural())
			continue
		}
		if l.unreadable > 0 {
			l.rep.DeletesSkipped = fmt.Sprintf("%d listed %s had no readable id", l.unreadable, l.src.kind.Plural())
			continue
		}
		if err := r.deleteAbsent(ctx, l, opts, rep.RunID, rep.Started); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// listing is one kind's list being read.
type listing struct {
	src        *source
	rep        *KindReport
	seen       map[string]struct{}
	unreadable int
	done       bool
}

// page reads and applies the next page of l; at the end of the list it
// marks l done and complete. Its error stops l.
func (r *Reconciler) page(ctx context.Context, l *listing, opts ReconcileOptions) error {
	objs, err := l.src.list(ctx, l.rep.End, opts.Limit)
	if errors.Is(err, models.ErrFeatureOff) && l.rep.End == l.rep.Offset {
		// An instance without organizations, or without Billing: not a
		// failure of the run.
		l.done, l.rep.Off = true, true
		return nil
	}
	if err != nil {
		return err
	}
	var page Tally
	for i, raw := range objs {
		id, err := r.one(ctx, l.src, raw, l.rep.End+i, opts, &page)
		if id == "" {
			l.unreadable++
		} else {
			l.seen[id] = struct{}{}
		}
		if err != nil {
			l.rep.Listed.Add(page)
			return err
		}
	}
	l.rep.Listed.Add(page)
	if len(objs) > 0 && opts.OnPage != nil {
		opts.OnPage(l.src.kind, l.rep.End, page)
	}
	l.rep.End += len(objs)
	if len(objs) < opts.Limit {
		l.done, l.rep.Complete = true, true
	}
	return nil
}

// one applies (or, in a dry run, previews) one object of a Clerk list and
// counts it in page. Its error stops the listing.
func (r *Reconciler) one(ctx context.Context, src *source, raw json.RawMessage, offset int, opts ReconcileOptions, page *Tally) (id string, err error) {
	page.Read++
	note := func(action string, err error) {
		if opts.OnNote != nil {
			opts.OnNote(Note{Kind: src.kind, Offset: offset, ID: id, Action: action, Err: err})
		}
	}
	d, err := clerkStateDelivery(src.kind, raw)
	if err != nil {
		page.Failed++
		note(NoteFailed, err)
		return "", nil
	}
	id = d.Event.ID()
	ch, invalid := d.Event.Decode(d.EventID, r.now())
	if opts.DryRun {
		if invalid != nil {
			page.Failed++
			note(NoteFailed, invalid)
			return id, nil
		}
		return id, r.preview(ctx, src, id, ch, page, note)
	}
	d.Origin = models.OriginBackfill
	if opts.Deletions {
		d.Origin = models.OriginReconcile
	}
	res, err := r.Service.Ingest(ctx, d)
	switch {
	case errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrRetryLater):
		// Stored as failed: invalid ones wait for an operator, the others
		// for the recovery sweep.
		page.Failed++
		note(NoteFailed, err)
		return id, nil
	case err != nil:
		return id, fmt.Errorf("apply %s %q: %w", src.kind, orNoID(id), err)
	case res.Duplicate:
		page.Duplicate++
	case res.Outcome == models.OutcomeApplied:
		page.Applied++
	case res.Outcome == models.OutcomeDeleted:
		page.DeletedHere++
	case res.Outcome == models.OutcomeStale:
		// Stale is also what a state equal to a webhook's is: tell them apart.
		if invalid != nil {
			page.Stale++
			break
		}
		cur, err := src.version(ctx, id, ch)
		if err != nil || cur == nil {
			page.Stale++
		} else {
			page.stale(*cur, ch.Version())
		}
	default:
		page.Failed++
		note(NoteFailed, fmt.Errorf("event %q is %s", res.EventID, res.Status))
	}
	return id, nil
}

// preview counts what applying ch to the object id would do, without
// writing, as models.Decide says.
func (r *Reconciler) preview(ctx context.Context, src *source, id string, ch models.Change, page *Tally, note func(string, error)) error {
	cur, err := src.version(ctx, id, ch)
	if err != nil {
		return fmt.Errorf("read %s %q: %w", src.kind, id, err)
	}
	v := ch.Version()
	switch models.Decide(cur, v) {
	case models.DecideCreate:
		page.Applied++
		note(NoteWouldCreate, nil)
	case models.DecideUpdate:
		page.Applied++
		note(NoteWouldUpdate, nil)
	case models.DecideUnchanged:
		page.Duplicate++
	case models.DecideDeleted:
		page.DeletedHere++
	default:
		page.stale(*cur, v)
	}
	return nil
}

// stale counts a state older than the stored one: unchanged when it is
// the stored state itself, read again with another event id (reconcile's
// states and the webhooks' share Clerk's times), stale otherwise.
func (t *Tally) stale(cur, ch models.Version) {
	if cur.SourceTime.Equal(ch.SourceTime) {
		t.Unchanged++
	} else {
		t.Stale++
	}
}

// deleteAbsent finds the active objects of l's kind written before the
// listings began that its listing did not contain, asks Clerk about each,
// and deletes the ones Clerk does not know, within opts.MaxDeletes.
func (r *Reconciler) deleteAbsent(ctx context.Context, l *listing, opts ReconcileOptions, runID string, started time.Time) error {
	src, rep := l.src, l.rep
	note := func(id, action string, err error) {
		if opts.OnNote != nil {
			opts.OnNote(Note{Kind: src.kind, Offset: -1, ID: id, Action: action, Err: err})
		}
	}
	rep.Local = 0
	err := src.walk(ctx, started, func(id string) error {
		rep.Local++
		if _, ok := l.seen[id]; !ok {
			rep.Absent = append(rep.Absent, id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read local %s: %w", src.kind.Plural(), err)
	}
	limited := opts.MaxDeletes >= 0
	var confirmed []string
	for i, id := range rep.Absent {
		if limited && len(confirmed) > opts.MaxDeletes {
			// Refused already; the rest stay unchecked.
			confirmed = append(confirmed, rep.Absent[i:]...)
			break
		}
		raw, err := src.check(ctx, id)
		switch {
		case errors.Is(err, models.ErrNotFound):
			confirmed = append(confirmed, id)
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			rep.Listed.Failed++
			note(id, NoteUnchecked, err)
		default:
			// Hidden from the list by a shift of the pages: apply its state
			// as the listing would have.
			note(id, NoteKept, nil)
			var t Tally
			if _, err := r.one(ctx, src, raw, -1, opts, &t); err != nil {
				return err
			}
			rep.Listed.Add(t)
		}
	}
	if limited && len(confirmed) > opts.MaxDeletes {
		rep.Refused, rep.ToDelete = true, confirmed
		for _, id := range confirmed {
			note(id, NoteWouldDelete, nil)
		}
		return nil
	}
	for _, id := range confirmed {
		if opts.DryRun {
			rep.Deleted++
			note(id, NoteWouldDelete, nil)
			continue
		}
		d, err := src.deletion(ctx, id, runID, started)
		if err != nil {
			return fmt.Errorf("delete %s %q: %w", src.kind, id, err)
		}
		d.Origin = models.OriginReconcile
		res, err := r.Service.Ingest(ctx, d)
		switch {
		case errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrRetryLater):
			rep.Listed.Failed++
			note(id, NoteFailed, err)
		case err != nil:
			return fmt.Errorf("delete %s %q: %w", src.kind, id, err)
		case res.Outcome == models.OutcomeApplied:
			rep.Deleted++
			note(id, NoteDeleted, nil)
		}
	}
	return nil
}

func orNoID(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}
