package repository

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// payloadDocsEngine is an engine with payload documents on or off.
type payloadDocsEngine struct {
	engine
	docs bool
}

func (e payloadDocsEngine) payloadDocs() bool { return e.docs }

// NewEventsForTest returns the events store of s with payload documents on
// or off.
func NewEventsForTest(s *Store, payloadDocs bool) *Events {
	ev := *s.Events
	ev.eng = payloadDocsEngine{s.Events.eng, payloadDocs}
	return &ev
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
	DocIDForTest     = docID
	UnavailableCodes = unavailableCodes
)

// TranslateForTest is translate.
func TranslateForTest(err error) error { return translate(err) }

// UserWriteFilter is the filter of Apply's conditional update of ch.
func UserWriteFilter(ch models.Change) bson.D {
	w, _ := newUserWrite(ch, time.Now())
	return w.filter
}
