package repository

// NewEventsForTest returns the events store of s with payload documents on
// or off.
func NewEventsForTest(s *Store, payloadDocs bool) *Events {
	return &Events{coll: s.Events.coll, payloadDocs: payloadDocs, locks: s.Events.locks}
}
