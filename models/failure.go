package models

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxReasonBytes bounds a failure reason.
const MaxReasonBytes = 96

// MaxFailureScan bounds how many failed events one grouping of failures
// reads: failed events are the exceptions of the inbox, and the bound keeps
// the cost of an incident with very many of them fixed.
const MaxFailureScan = 10000

// FailureReason is the reason of a processing error, for grouping failed
// events: a short string without the ids, emails, quoted values and
// numbers that make every error's text unique, so that the events that
// failed the same way share one reason. The same error text always gives
// the same reason; an empty error gives "unknown".
func FailureReason(msg string) string {
	switch {
	case msg == "":
		return "unknown"
	case strings.Contains(msg, ErrEmailTaken.Error()):
		return "email_taken"
	case strings.Contains(msg, ErrStorageFull.Error()):
		return "storage_full"
	case strings.Contains(msg, ErrUnavailable.Error()):
		return "unavailable"
	case strings.Contains(msg, "was erased"):
		return "erased"
	}
	// The sentinel a message starts with is its class; what follows,
	// without its variable parts, is the detail.
	class, rest := "error", msg
	for _, s := range []error{ErrRetryLater, ErrInvalid, ErrConflict, ErrNotFound} {
		if r, ok := strings.CutPrefix(msg, s.Error()+": "); ok {
			class, rest = reasonClass(s), r
			break
		}
		if msg == s.Error() {
			return reasonClass(s)
		}
	}
	detail := redactWords(rest)
	if detail == "" {
		return class
	}
	r := class + ": " + detail
	if len(r) > MaxReasonBytes {
		cut := MaxReasonBytes
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut]
	}
	return r
}

func reasonClass(s error) string {
	switch s {
	case ErrRetryLater:
		return "retry_later"
	case ErrInvalid:
		return "invalid"
	case ErrConflict:
		return "conflict"
	case ErrNotFound:
		return "not_found"
	}
	return "error"
}

// redactWords replaces the variable parts of s: quoted strings become
// "…"; the indexes of a field path (data.email_addresses[0]) are
// dropped; other words with a digit, an @ or an underscore (ids, emails,
// numbers) become …; runs of spaces become one.
func redactWords(s string) string {
	var b strings.Builder
	inQuote := false
	for _, w := range strings.Fields(s) {
		if inQuote {
			if strings.HasSuffix(w, `"`) {
				inQuote = false
			}
			continue
		}
		if strings.HasPrefix(w, `"`) {
			inQuote = !(len(w) > 1 && strings.HasSuffix(w, `"`))
			w = `"…"`
		} else {
			core := strings.TrimRight(w, ":,;")
			tail := w[len(core):]
			w = core
			if strings.HasPrefix(w, "data.") {
				w = dropIndexes(w)
			}
			if strings.ContainsFunc(w, func(r rune) bool { return unicode.IsDigit(r) || r == '@' }) ||
				(strings.Contains(w, "_") && !strings.Contains(w, ".")) {
				w = "…"
			}
			w += tail
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// dropIndexes removes the digits between brackets: a[0].b → a[].b.
func dropIndexes(w string) string {
	var b strings.Builder
	in := false
	for _, r := range w {
		switch {
		case r == '[':
			in = true
		case r == ']':
			in = false
		case in && unicode.IsDigit(r):
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FailureGroup counts the failed events that share a reason.
type FailureGroup struct {
	Reason string
	Count  int64
	// GaveUp counts the ones the recovery sweep no longer retries.
	GaveUp int64
	// Latest is the newest of them: when it was received, its id, and its
	// error as stored (an example of the reason).
	LatestAt      time.Time
	LatestEventID string
	LatestError   string
}

// FailureGroups is the failed events grouped by reason, the largest
// group first. Scanned counts the failed events read; Complete is false
// when there were more than the bound allowed to read.
type FailureGroups struct {
	Groups   []FailureGroup
	Scanned  int
	Complete bool
}

// GroupFailures groups failed, newest first, by FailureReason of their
// error: a group counts its events, those the recovery sweep gave up on
// (no RetryAt), and names its newest one (by EventID, else ID). The
// largest group comes first, then the most recent. scanned and complete
// are what the store read: complete is false when more failed events
// exist than it read.
func GroupFailures(failed []Event, complete bool) FailureGroups {
	out := FailureGroups{Groups: []FailureGroup{}, Scanned: len(failed), Complete: complete}
	at := map[string]int{}
	for _, ev := range failed {
		reason := FailureReason(ev.Error)
		i, ok := at[reason]
		if !ok {
			// Newest first: the first event of a reason is its latest.
			key := ev.EventID
			if key == "" {
				key = ev.ID
			}
			i = len(out.Groups)
			at[reason] = i
			out.Groups = append(out.Groups, FailureGroup{
				Reason: reason, LatestAt: ev.ReceivedAt.UTC(), LatestEventID: key, LatestError: ev.Error,
			})
		}
		out.Groups[i].Count++
		if ev.RetryAt == nil {
			out.Groups[i].GaveUp++
		}
	}
	slices.SortStableFunc(out.Groups, func(a, b FailureGroup) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return b.LatestAt.Compare(a.LatestAt)
	})
	return out
}
