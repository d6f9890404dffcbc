package api

import (
	"log/slog"
	"net/http"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// maxUnknownTypes bounds the unknown types counted by name; a delivery of
// any other is counted under other.
const maxUnknownTypes = 64

// maxUnknownTypeName bounds an unknown type's name (Clerk's are under 40
// bytes); a longer one is counted under other.
const maxUnknownTypeName = 64

// typeCounts counts webhook deliveries by their event type, in memory,
// since the process started: a delivery writes nothing. Every delivery
// whose signature checks and whose body names a type is counted, whatever
// became of it (a duplicate or a retry counts again). A type of Clerk's
// catalog is counted by name; any other is unknown, counted by name up to
// maxUnknownTypes names, then under other.
type typeCounts struct {
	since time.Time
	known map[string]*typeCount // Clerk's catalog, fixed at start: read without the lock

	mu      stdsync.Mutex
	unknown map[string]*typeCount
	order   []string // of unknown, in order of first receipt
	other   typeCount
	full    bool // a name was counted under other because unknown was full
}

// typeCount is the deliveries of one type and when the last arrived.
type typeCount struct {
	n    atomic.Int64
	last atomic.Int64 // Unix nanoseconds; 0: never
}

func (c *typeCount) add(at time.Time) {
	c.n.Add(1)
	c.last.Store(at.UnixNano())
}

func newTypeCounts(since time.Time) *typeCounts {
	tc := &typeCounts{since: since, known: map[string]*typeCount{}, unknown: map[string]*typeCount{}}
	for _, c := range models.ClerkEventTypes {
		tc.known[c.Type] = &typeCount{}
	}
	return tc
}

// unknownNote is what a delivery of an unknown type has to say, once.
type unknownNote int

const (
	noteNone    unknownNote = iota
	noteNewName             // the first delivery of this unknown type
	noteFull                // the first one counted under other because the names are full
)

// note counts one delivery of type t at at. It returns noteNewName the
// first time an unknown t is counted by name, and noteFull the first time
// one is not because maxUnknownTypes are: each is logged once.
func (tc *typeCounts) note(t string, at time.Time) unknownNote {
	if c, ok := tc.known[t]; ok {
		c.add(at)
		return noteNone
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c, ok := tc.unknown[t]; ok {
		c.add(at)
		return noteNone
	}
	if !isTypeName(t) {
		tc.other.add(at)
		return noteNone
	}
	if len(tc.unknown) >= maxUnknownTypes {
		tc.other.add(at)
		if tc.full {
			return noteNone
		}
		tc.full = true
		return noteFull
	}
	c := &typeCount{}
	c.add(at)
	tc.unknown[t] = c
	tc.order = append(tc.order, t)
	return noteNewName
}

// isTypeName reports whether t can be named as an unknown type: at most
// maxUnknownTypeName bytes of letters, digits, '.', '_' and '-', as
// Clerk's types are. Anything else is counted, not named.
func isTypeName(t string) bool {
	if t == "" || len(t) > maxUnknownTypeName {
		return false
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// countType counts the delivery of an event of type t, and logs an
// unknown type the first time it arrives.
func (s *server) countType(c echo.Context, t string) {
	switch s.metrics.types.note(t, s.now()) {
	case noteNewName:
		s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "unknown event type",
			slog.String("type", t), slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
	case noteFull:
		s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "unknown event type",
			slog.String("type", otherType), slog.Int("named", maxUnknownTypes),
			slog.String("request_id", c.Response().Header().Get(echo.HeaderXRequestID)))
	}
}

type eventTypesResponse struct {
	Since   string             `json:"since"`
	Types   []eventTypeJSON    `json:"types"`
	Unknown []unknownTypeJSON  `json:"unknown"`
	Other   receivedCountsJSON `json:"other"`
}

type receivedCountsJSON struct {
	Received       int64   `json:"received"`
	LastReceivedAt *string `json:"lastReceivedAt"`
}

type eventTypeJSON struct {
	Type     string      `json:"type"`
	Fate     models.Fate `json:"fate"`
	Kind     models.Kind `json:"kind,omitempty"`
	Projects string      `json:"projects,omitempty"`
	receivedCountsJSON
}

type unknownTypeJSON struct {
	Type string `json:"type"`
	receivedCountsJSON
}

func (c *typeCount) json() receivedCountsJSON {
	r := receivedCountsJSON{Received: c.n.Load()}
	if ns := c.last.Load(); ns != 0 {
		at := formatTime(time.Unix(0, ns))
		r.LastReceivedAt = &at
	}
	return r
}

// eventTypes answers GET /v1/event-types: every type of Clerk's catalog
// with its fate, and the deliveries of each and of unknown types since
// this process started.
func (s *server) eventTypes(c echo.Context) error {
	if err := bind(c, &struct{}{}); err != nil {
		return err // it takes no parameters
	}
	tc := s.metrics.types
	r := eventTypesResponse{Since: formatTime(tc.since), Types: make([]eventTypeJSON, 0, len(models.ClerkEventTypes)),
		Unknown: []unknownTypeJSON{}}
	for _, t := range models.ClerkEventTypes {
		r.Types = append(r.Types, eventTypeJSON{Type: t.Type, Fate: t.Fate(), Kind: models.KindOf(t.Type), Projects: t.Projects,
			receivedCountsJSON: tc.known[t.Type].json()})
	}
	tc.mu.Lock()
	for _, name := range tc.order {
		r.Unknown = append(r.Unknown, unknownTypeJSON{Type: name, receivedCountsJSON: tc.unknown[name].json()})
	}
	r.Other = tc.other.json()
	tc.mu.Unlock()
	return c.JSON(http.StatusOK, r)
}
