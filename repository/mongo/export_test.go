package mongo

import (
	"context"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// Queries used by the explain test.
var (
	UserListQuery           = userListQuery
	EventListFilter         = eventListFilter
	EventLogOrder           = eventLogOrder
	DueStoredFilter         = dueStoredFilter
	DueFailedFilter         = dueFailedFilter
	RetentionFilter         = retentionFilter
	ClaimCond               = claimCond
	NotProcessed            = notProcessed
	CountersFilter          = outcomeCountersFilter
	ChangesFilter           = changesFilter
	ChangesOrder            = changesOrder
	EraseDueFilter          = eraseDueFilter
	EventsToErase           = userEventsToErase
	MembershipEventsToErase = membershipEventsToErase
	UnprocessedFilter       = unprocessedFilter
	DiscardedFilter         = discardedFilter
	WalkFilter              = walkFilter
	DocIDForTest            = docID
	OrgListQuery            = orgListQuery
	MemberListFilter        = membershipListFilter
	CascadeFilter           = cascadeFilter
	TakePairFilter          = takePairFilter
	UnavailableCodes        = unavailableCodes
	FailedFilter            = failedFilter
	ActivityRange           = activityRangeFilter
	ActivityPrune           = activityPruneFilter
	ActivityOrder           = activityOrder
	RunsOrder               = runsOrder
	RunsPrune               = runsPruneFilter
	InvitationListFilter    = invitationListFilter
	InvitationOrder         = invitationOrder
	InvitationCascadeFilter = invitationCascadeFilter
)

// InvitationWriteFilter is the filter of Invitations.Apply's conditional
// upsert of ch.
func InvitationWriteFilter(ch models.InvitationChange) bson.D {
	filter, _, _ := invitationWrite(ch, time.Now())
	return filter
}

// OrgWindowFilter is the filter of a page of organizations f within a
// window of _id closed on both sides, from f.After (see idWindowForTest).
func OrgWindowFilter(f models.OrganizationFilter) (bson.D, error) {
	return orgWindowFilter(f, idWindowForTest(f.After))
}

// MemberWindowFilter is the filter of a page of memberships f after the
// cursor after within a window of _id closed on both sides (see
// idWindowForTest).
func MemberWindowFilter(f models.MembershipFilter, after string) (bson.D, error) {
	return membershipWindowFilter(f, after, idWindowForTest(after))
}

// UserWindowFilter is the filter of a page of users f within a window of
// _id closed on both sides, from f.After (see idWindowForTest).
func UserWindowFilter(f models.UserFilter) (bson.D, error) {
	filter, _, err := userWindowQuery(f, idWindowForTest(f.After))
	return filter, err
}

// EventWindowFilter is the filter of a page of the event log f within a
// window of receivedAt closed on both sides: the hour below top, as a
// walk down from top reads it.
func EventWindowFilter(f models.EventFilter, top time.Time) bson.D {
	return eventWindowFilter(f, window{lo: timeKey(top.Add(-time.Hour)), hi: timeKey(top)})
}

// LogWindowed is logWindowed: whether a page of the log is walked in
// windows.
var LogWindowed = logWindowed

// idWindowForTest is a window of a walk of _id from the cursor after (an
// _id in hex, or none), a sixteenth of the rest of the _id space wide.
func idWindowForTest(after string) window {
	var lo uint64
	if oid, err := bson.ObjectIDFromHex(after); err == nil {
		lo = idKey(oid)
	}
	return window{lo: lo, hi: lo + (math.MaxUint64-lo)/16 + 1}
}

// ClientOptionsForTest is clientOptions.
func ClientOptionsForTest(uri string, o Options) (*options.ClientOptions, error) {
	return clientOptions(uri, o)
}

// TranslateForTest is translate.
func TranslateForTest(err error) error { return translate(err) }

// ConflictIndexForTest is the index that refused the write err reports.
func ConflictIndexForTest(err error) string { return conflictIndex(err) }

// UserWriteFilter is the filter of Apply's conditional update of ch.
func UserWriteFilter(ch models.UserChange) bson.D {
	w, _ := newUserWrite(ch, time.Now())
	return w.filter
}

// ProcessedBeforeForTest is the search of DeleteProcessedBefore: the
// events it would delete, as "<_id> <outcome>".
func ProcessedBeforeForTest(ctx context.Context, e *Events, cutoff time.Time, limit int) ([]string, error) {
	docs, err := e.processedBefore(ctx, cutoff, limit)
	var found []string
	for _, d := range docs {
		found = append(found, d.ID.Hex()+" "+d.Outcome)
	}
	return found, err
}

// SetAfterTakeForTest makes Apply of s call fn after it took an email
// from another user and before it writes again.
func SetAfterTakeForTest(s *Store, fn func()) { s.users.afterTake = fn }

// OrgWriteFilter is the filter of Organizations.Apply's conditional
// update of ch.
func OrgWriteFilter(ch models.OrganizationChange) bson.D {
	f, _, _ := orgWrite(ch, time.Now())
	return f
}

// MembershipWriteFilter is the filter of Memberships.Apply's conditional
// update of ch.
func MembershipWriteFilter(ch models.MembershipChange) bson.D {
	w, _ := newMembershipWrite(ch, time.Now())
	return w.filter
}

// CollectionsForTest names the collections s reads and writes, by role.
func CollectionsForTest(s *Store) map[string]string {
	return map[string]string{
		"users": s.users.coll.Name(), "organizations": s.orgs.coll.Name(), "memberships": s.members.coll.Name(),
		"memberships' users": s.members.users.Name(), "events": s.events.coll.Name(), "events' users": s.events.users.Name(),
	}
}

// ErrDuplicateForTest is the error of a unique violation other than the
// email index's, which stays inside the store.
var ErrDuplicateForTest = errDuplicate

// MaxConflictTriesForTest is maxConflictTries.
const MaxConflictTriesForTest = maxConflictTries

// RetryConflictsForTest is retryConflicts of write.
func RetryConflictsForTest(ctx context.Context, write func() error) error {
	_, err := retryConflicts(ctx, func() (struct{}, error) { return struct{}{}, write() })
	return err
}

// UniqueRuleOf says what the unique index named index of the collection
// coll (a base name) keeps, or "" when it is not one of uniqueRules.
func UniqueRuleOf(coll, index string) string {
	for _, r := range uniqueRules {
		if r.base == coll && r.index == index {
			return r.keeps
		}
	}
	return ""
}

// Batch is deliveries written together, as deliveries in flight at once
// are, before each goes on alone (Finish).
type Batch struct {
	s     *Store
	batch []*delivery
}

// WriteBatch writes the deliveries of evs and chs as one batch.
func WriteBatch(ctx context.Context, s *Store, evs []models.Event, chs []models.Change, now time.Time) *Batch {
	b := &Batch{s: s}
	for i := range evs {
		b.batch = append(b.batch, &delivery{ctx: ctx, ev: evs[i], ch: chs[i], now: now, done: make(chan struct{})})
	}
	s.writeBatch(b.batch)
	return b
}

// Finish takes each delivery on from where the batch left it, and returns
// what each Deliver returns.
func (b *Batch) Finish() ([]models.Delivered, []error) {
	ds, errs := make([]models.Delivered, len(b.batch)), make([]error, len(b.batch))
	for i, r := range b.batch {
		ds[i], errs[i] = b.s.finish(r)
	}
	return ds, errs
}

// SetBeforePlanWrite makes f run between a recomputation's reads of a
// payer's plan and items and its write of the plan.
func SetBeforePlanWrite(s *Store, f func()) { s.billing.beforePlanWrite = f }

// ItemsQuery is the read of a payer's items; AttemptsFilter and
// AttemptOrder are a page of payment attempts.
var (
	ItemsQuery     = itemsQuery
	AttemptsFilter = attemptsFilter
	AttemptOrder   = attemptOrder
	SubOrder       = subOrder
	SubsWindowed   = subsWindowed
)

// SubsFilter is the filter of a page of subscriptions f; when f is
// walked in windows, of its first window from top (a day wide).
func SubsFilter(f models.SubscriptionFilter, top time.Time) (bson.D, error) {
	if !subsWindowed(f) {
		return subsFilter(f, nil)
	}
	w := windowPlan{start: timeKey(top), desc: true, width: defaultSubsWidth, end: timeKey(top.Add(-365 * 24 * time.Hour))}.window(1)
	return subsFilter(f, &w)
}

// BillingWriteFilter is the filter of the conditional upsert of a
// billing object's state of version v.
func BillingWriteFilter(id string, v models.Version) bson.D {
	filter, _ := stateWrite(docID(id), v, nil, time.Time{})
	return filter
}

// SetBeforeDeliveryWrite runs f between the read of deliveries and their
// compare-and-set write (nil: nothing).
func SetBeforeDeliveryWrite(s *Store, f func()) { s.outbound.beforeWrite = f }

// Queries of outbound webhooks, for the explain test.
var (
	OutboxFilter               = outboxFilter
	OutboxOrder                = outboxOrder
	OutboxIndex                = outboxIndex
	DueDeliveriesFilter        = dueFilter
	DueDeliveriesOrder         = dueOrder
	BacklogFilter              = backlogFilter
	BacklogOrder               = backlogOrder
	DueIndex                   = dueIndex
	SendAttemptsOrder          = sendAttemptsOrder
	SendAttemptsBeforeFilter   = sendAttemptsBeforeFilter
	RequeueWindowFilter        = requeueWindowFilter
	DeliveriesPageFilter       = deliveriesPageFilter
	EndpointDeliveriesFilter   = endpointDeliveriesFilter
	UserDeliveriesFilter       = userDeliveriesFilter
	MembershipDeliveriesFilter = membershipDeliveriesFilter
)

// SendAttemptsWindowFilter is the filter of a page of attempts f within a
// window of _id closed on both sides: the hour below top, as a walk down
// from top reads it.
func SendAttemptsWindowFilter(f models.AttemptFilter, top time.Time) (bson.D, error) {
	return sendAttemptsFilter(f, attemptWindow{lo: bson.NewObjectIDFromTimestamp(top.Add(-time.Hour)),
		hi: bson.NewObjectIDFromTimestamp(top), hasLo: true, hasHi: true})
}

// ActivityWriteFilter is the filter of a session's activity write.
func ActivityWriteFilter(userID string, at time.Time) bson.D {
	f, _ := activityWrite(userID, at)
	return f
}

// SessionWriteFilter is the filter of the write of the user state a
// session event embeds.
func SessionWriteFilter(ch models.SessionChange) bson.D {
	w, err := sessionWrite(ch, *ch.User, time.Now())
	if err != nil {
		panic(err)
	}
	return w.filter
}

// SessionEventsFilter is the find of a new user's session events, and
// the index it names.
func SessionEventsFilter(userIDs ...string) (bson.D, string) {
	return sessionEventsFilter(userIDs...), userEventsIndex
}
