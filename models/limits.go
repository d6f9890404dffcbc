package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what a user event may carry. Every path that applies an event
// (webhook, replay, recovery sweep, backfill) decodes it with DecodeEvent
// and Change, so they all apply the same limits.
const (
	// MaxMetadataBytes bounds public_metadata, compacted JSON. Clerk
	// itself allows a few KB of metadata; a large document in users makes
	// every read of the collection slower, on the embedded engine most.
	MaxMetadataBytes = 64 << 10
	// MaxNesting bounds how deep objects and arrays nest in a body (the
	// envelope is level 1). MongoDB refuses documents nested deeper than
	// 100 levels.
	MaxNesting = 100
	// MaxFutureSkew is how far ahead of the server's clock a Clerk time
	// may be. A state from the far future would make every later real
	// update of its user stale for ever.
	MaxFutureSkew = 24 * time.Hour
)

// maxQuoted is how many characters of a client's value an error message
// shows.
const maxQuoted = 64

// Quote returns s as a Go-quoted string of at most 64 characters (longer
// values are cut and marked with "..."), so that error messages can name a
// client's value without echoing it unbounded or unescaped.
func Quote(s string) string {
	if utf8.RuneCountInString(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	i, n := 0, 0
	for i = range s {
		if n == maxQuoted {
			break
		}
		n++
	}
	return strconv.Quote(s[:i]) + "..."
}

// checkEnvelope refuses a body that is not UTF-8 or names a top-level key
// twice ("type" twice can make one reader see a user event and another a
// session event). Its error wraps ErrInvalid.
func checkEnvelope(body []byte) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: body is not valid UTF-8 (Clerk sends JSON)", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: body is not a JSON object", ErrInvalid)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: body is not a JSON object", ErrInvalid)
		}
		k, _ := tok.(string)
		if seen[k] {
			return fmt.Errorf("%w: ambiguous JSON: key %s appears twice in the body", ErrInvalid, Quote(k))
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("%w: body is not a JSON object", ErrInvalid)
		}
	}
	return nil
}

// jsonFrame is one open object or array while checkJSON walks a value.
type jsonFrame struct {
	obj  bool
	key  bool   // in an object: the next token is a key
	name string // the path of this value, for messages
	keys map[string]bool
	cur  string // in an object: the key whose value is being read
}

// checkJSON walks the JSON value b, which sits at nesting level base (0 for
// a whole body), and refuses, wrapping ErrInvalid: a key twice in one object
// (ambiguous: readers disagree on which value counts), nesting deeper than
// MaxNesting, and numbers beyond float64's range. Numbers too small for
// float64 (1e-400) are not refused: they are read as 0.
func checkJSON(b []byte, name string, base int) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*jsonFrame
	path := func() string {
		if len(stack) == 0 {
			return name
		}
		top := stack[len(stack)-1]
		if top.obj {
			return join(top.name, top.cur)
		}
		return top.name + "[]"
	}
	done := func() { // a value ended
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s is not valid JSON", ErrInvalid, orBody(name))
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].key {
			top := stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				done()
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				return fmt.Errorf("%w: ambiguous JSON: key %s appears twice in %s", ErrInvalid, Quote(k), orBody(top.name))
			}
			top.keys[k], top.key, top.cur = true, false, k
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if base+len(stack)+1 > MaxNesting {
					return fmt.Errorf("%w: %s nests deeper than %d levels", ErrInvalid, orBody(name), MaxNesting)
				}
				f := &jsonFrame{obj: t == '{', key: t == '{', name: path()}
				if f.obj {
					f.keys = map[string]bool{}
				}
				stack = append(stack, f)
			default: // ']'; '}' is read as a key position above
				stack = stack[:len(stack)-1]
				done()
			}
		case json.Number:
			if f, err := strconv.ParseFloat(string(t), 64); err != nil && math.IsInf(f, 0) {
				return fmt.Errorf("%w: %s is a number beyond the range of a 64-bit float", ErrInvalid, path())
			}
			done()
		default:
			done()
		}
	}
}

func join(name, key string) string {
	// Keys are the client's: bounded and escaped when they are unusual.
	if len(key) > maxQuoted || strings.ContainsAny(key, ".[]\"\\ ") || !isPrint(key) {
		key = Quote(key)
	}
	if name == "" {
		return key
	}
	return name + "." + key
}

func isPrint(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func orBody(name string) string {
	if name == "" {
		return "the body"
	}
	return name
}

// checkMetadata bounds the compacted size of public_metadata.
func checkMetadata(meta []byte) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, meta); err != nil {
		return fmt.Errorf("%w: data.public_metadata is not valid JSON", ErrInvalid)
	}
	if buf.Len() > MaxMetadataBytes {
		return fmt.Errorf("%w: data.public_metadata is %d bytes; at most %d (64 KiB) are accepted",
			ErrInvalid, buf.Len(), MaxMetadataBytes)
	}
	return nil
}

// checkNotFuture refuses a Clerk time more than MaxFutureSkew ahead of now.
func checkNotFuture(field string, t, now time.Time) error {
	if t.After(now.Add(MaxFutureSkew)) {
		return fmt.Errorf("%w: %s (%s) is more than a day ahead of the server's clock",
			ErrInvalid, field, t.UTC().Format(time.RFC3339))
	}
	return nil
}
