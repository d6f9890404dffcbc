package repository

import "time"

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
	EventListFilter  = eventListFilter
	EventLogOrder    = eventLogOrder
	DueStoredFilter  = dueStoredFilter
	DueFailedFilter  = dueFailedFilter
	RetentionFilter  = retentionFilter
	CountersFilter   = outcomeCountersFilter
	DocIDForTest     = docID
	UnavailableCodes = unavailableCodes
)

// TranslateForTest is translate.
func TranslateForTest(err error) error { return translate(err) }

var _ = time.Second
