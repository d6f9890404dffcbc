package mongo

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
)

// payloadDocsEngine is an engine with payload documents on or off.
type payloadDocsEngine struct {
	engine
	docs bool
}

func (e payloadDocsEngine) payloadDocs() bool { return e.docs }

// SetPayloadDocsForTest turns the payload documents of s's events on or off.
func SetPayloadDocsForTest(s *Store, payloadDocs bool) {
	ev := *s.events
	ev.eng = payloadDocsEngine{s.events.eng, payloadDocs}
	s.events = &ev
}

// Queries used by the explain test.
var (
	UserListQuery    = userListQuery
	EventListFilter  = eventListFilter
	EventLogOrder    = eventLogOrder
	DueStoredFilter  = dueStoredFilter
	DueFailedFilter  = dueFailedFilter
	RetentionFilter  = retentionFilter
	ClaimCond        = claimCond
	NotProcessed     = notProcessed
	CountersFilter   = outcomeCountersFilter
	ChangesFilter    = changesFilter
	ChangesOrder     = changesOrder
	EraseDueFilter   = eraseDueFilter
	EventsToErase    = userEventsToErase
	WalkFilter       = walkFilter
	DocIDForTest     = docID
	UnavailableCodes = unavailableCodes
)

// ClientOptionsForTest is clientOptions.
func ClientOptionsForTest(uri string, o Options) (*options.ClientOptions, error) {
	return clientOptions(uri, o)
}

// TranslateForTest is translate.
func TranslateForTest(err error) error { return translate(err) }

// ConflictIndexForTest is the index that refused the write err reports.
func ConflictIndexForTest(err error) string { return conflictIndex(err) }

// UserWriteFilter is the filter of Apply's conditional update of ch.
func UserWriteFilter(ch models.Change) bson.D {
	w, _ := newUserWrite(ch, time.Now())
	return w.filter
}

// WithDriverSearchForTest returns the events store of s with its
// searches asked through the driver, as on MongoDB.
func WithDriverSearchForTest(s *Store) *Events {
	ev := *s.events
	ev.search = driverSearch{}
	return &ev
}

// SearchesInSQL reports whether the events store of s asks its searches
// in SQL (the embedded engine).
func SearchesInSQL(s *Store) bool {
	_, ok := s.events.search.(sqliteSearch)
	return ok
}

// ProcessedBeforeForTest is the search of DeleteProcessedBefore: the
// events it would delete, as "<_id> <outcome>".
func ProcessedBeforeForTest(ctx context.Context, e *Events, cutoff time.Time, limit int) ([]string, error) {
	docs, err := e.search.processedBefore(ctx, e, cutoff, limit)
	var found []string
	for _, d := range docs {
		found = append(found, d.ID.Hex()+" "+d.Outcome)
	}
	return found, err
}

// SQLiteQuery is one of the embedded engine's searches of events, with
// arguments, and the index it must use.
type SQLiteQuery struct {
	Name, SQL, Index string
	Args             []any
}

// SQLiteEventQueries are the searches of events in SQL on table.
func SQLiteEventQueries(table string, now time.Time) []SQLiteQuery {
	ms := now.UnixMilli()
	stored, failed := string(models.StatusStored), string(models.StatusFailed)
	return []SQLiteQuery{
		{"due stored", dueStoredSQL(table), table + "_usersync_status", []any{stored, ms, 10}},
		{"due failed", dueFailedSQL(table), table + "_usersync_retryAt", []any{ms, 10}},
		{"processed before", processedBeforeSQL(table), table + "_usersync_processedAt", []any{ms, 10}},
		{"count stored", countStatusSQL(table), table + "_usersync_status", []any{stored}},
		{"count failed", countStatusSQL(table), table + "_usersync_status", []any{failed}},
		{"count gave up", countGaveUpSQL(table), table + "_usersync_retryAt", []any{failed}},
	}
}
