package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
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
	// itself allows a few KB of metadata; a large record in users makes
	// every read of it, and every page of users, slower.
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

// checkBody checks the limits of checkJSON on a whole body, which must be
// valid JSON, and returns the first thing it refuses. envelope is true when
// that is a key twice in the envelope itself ("type" twice can make one
// reader see a user event and another a session event): such a body is
// refused before it is stored. Any other refusal makes an event that is
// stored as failed (and never applied).
func checkBody(body []byte) (err error, envelope bool) {
	c := &jsonCheck{b: body}
	err = c.run()
	return err, c.envelopeKey
}

// checkJSON walks the JSON value b, which sits at nesting level base (0 for
// a whole body), and refuses, wrapping ErrInvalid: a key twice in one object
// (ambiguous: readers disagree on which value counts), nesting deeper than
// MaxNesting, and numbers beyond float64's range. Numbers too small for
// float64 (1e-400) are not refused: they are read as 0.
func checkJSON(b []byte, name string, base int) error {
	return (&jsonCheck{b: b, name: name, base: base}).run()
}

// jsonCheck is one walk of checkJSON. It reads the bytes once and
// allocates nothing per value: the keys of the open objects are slices of
// b, and paths for messages are built only when there is an error.
type jsonCheck struct {
	b      []byte
	i      int
	name   string
	base   int
	frames []jsonFrame
	// envelopeKey is set when the walk stopped at a key twice in the
	// outermost object of a whole body.
	envelopeKey bool
	keys        [][]byte // the keys seen in the open objects, outermost first
}

// jsonFrame is one open object or array.
type jsonFrame struct {
	obj       bool
	firstKey  int                 // index in keys of this object's first key
	cur       []byte              // in an object: the raw key whose value is being read
	curQuoted bool                // cur holds escapes
	set       map[string]struct{} // the keys, once there are many
}

// manyKeys is how many keys an object may have before its keys are
// compared through a map rather than one by one.
const manyKeys = 32

var errNotJSON = errors.New("not JSON")

func (c *jsonCheck) run() error {
	err := c.value()
	if err == nil {
		c.space()
		if c.i != len(c.b) {
			err = errNotJSON
		}
	}
	if errors.Is(err, errNotJSON) {
		return Public(ErrInvalid, "%s is not valid JSON", orBody(c.name)).In(schemaField(c.name))
	}
	return err
}

func (c *jsonCheck) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *jsonCheck) value() error {
	c.space()
	if c.i >= len(c.b) {
		return errNotJSON
	}
	switch ch := c.b[c.i]; {
	case ch == '{' || ch == '[':
		return c.container(ch == '{')
	case ch == '"':
		_, _, err := c.str()
		return err
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	case ch == 't' || ch == 'f' || ch == 'n':
		for c.i < len(c.b) && c.b[c.i] >= 'a' && c.b[c.i] <= 'z' {
			c.i++
		}
		return nil
	}
	return errNotJSON
}

// str reads a string and returns its contents as in b, and whether they
// hold escapes.
func (c *jsonCheck) str() (raw []byte, escaped bool, err error) {
	c.i++ // the opening quote
	start := c.i
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case '\\':
			escaped = true
			c.i += 2
		case '"':
			raw = c.b[start:c.i]
			c.i++
			return raw, escaped, nil
		default:
			c.i++
		}
	}
	return nil, false, errNotJSON
}

func (c *jsonCheck) number() error {
	start, exp := c.i, false
	for c.i < len(c.b) {
		ch := c.b[c.i]
		if ch == 'e' || ch == 'E' {
			exp = true
		} else if !(ch >= '0' && ch <= '9' || ch == '-' || ch == '+' || ch == '.') {
			break
		}
		c.i++
	}
	// Only an exponent, or more than 308 digits, can pass float64's range.
	if !exp && c.i-start < 309 {
		return nil
	}
	if f, err := strconv.ParseFloat(string(c.b[start:c.i]), 64); err != nil && math.IsInf(f, 0) {
		p := c.path(len(c.frames))
		return Public(ErrInvalid, "%s is a number beyond the range of a 64-bit float", p).In(schemaField(p))
	}
	return nil
}

func (c *jsonCheck) container(obj bool) error {
	if c.base+len(c.frames)+1 > MaxNesting {
		return Public(ErrInvalid, "%s nests deeper than %d levels", orBody(c.name), MaxNesting).In(schemaField(c.path(len(c.frames))))
	}
	c.i++ // { or [
	c.frames = append(c.frames, jsonFrame{obj: obj, firstKey: len(c.keys)})
	defer func() {
		f := c.frames[len(c.frames)-1]
		c.keys = c.keys[:f.firstKey]
		c.frames = c.frames[:len(c.frames)-1]
	}()
	end := byte(']')
	if obj {
		end = '}'
	}
	c.space()
	if c.i < len(c.b) && c.b[c.i] == end {
		c.i++
		return nil
	}
	for {
		if obj {
			if err := c.key(); err != nil {
				return err
			}
		}
		if err := c.value(); err != nil {
			return err
		}
		c.space()
		if c.i >= len(c.b) {
			return errNotJSON
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case end:
			c.i++
			return nil
		default:
			return errNotJSON
		}
	}
}

// key reads an object's key and its colon, and refuses a key the object
// has had already (compared unescaped).
func (c *jsonCheck) key() error {
	c.space()
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return errNotJSON
	}
	raw, escaped, err := c.str()
	if err != nil {
		return err
	}
	c.space()
	if c.i >= len(c.b) || c.b[c.i] != ':' {
		return errNotJSON
	}
	c.i++
	top := &c.frames[len(c.frames)-1]
	top.cur, top.curQuoted = raw, escaped
	k := raw
	if escaped {
		k = []byte(unquote(raw, true))
	}
	dup := false
	if top.set != nil {
		_, dup = top.set[string(k)]
		top.set[string(k)] = struct{}{}
	} else {
		for _, seen := range c.keys[top.firstKey:] {
			if dup = bytes.Equal(seen, k); dup {
				break
			}
		}
		c.keys = append(c.keys, k)
		if n := len(c.keys) - top.firstKey; n > manyKeys {
			top.set = make(map[string]struct{}, 2*n)
			for _, seen := range c.keys[top.firstKey:] {
				top.set[string(seen)] = struct{}{}
			}
		}
	}
	if dup {
		c.envelopeKey = c.base == 0 && c.name == "" && len(c.frames) == 1
		p := c.path(len(c.frames) - 1)
		return Public(ErrInvalid, "ambiguous JSON: key %s appears twice in %s", Quote(string(k)), orBody(p)).
			In(schemaField(p)).For("duplicate_key")
	}
	return nil
}

// path is the path of the value the first n open frames lead to, for
// messages: keys joined by dots, "[]" for an array's elements.
func (c *jsonCheck) path(n int) string {
	p := c.name
	for _, f := range c.frames[:n] {
		if f.obj {
			p = join(p, unquote(f.cur, f.curQuoted))
		} else {
			p += "[]"
		}
	}
	return p
}

// unquote returns the contents raw of a JSON string as text.
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return string(raw)
	}
	return s
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

// checkMetadata bounds the compacted size of a public_metadata, the
// payload's field.
func checkMetadata(meta []byte, field string) error {
	var buf bytes.Buffer
	if err := json.Compact(&buf, meta); err != nil {
		return Public(ErrInvalid, "%s is not valid JSON", field).In(field)
	}
	if buf.Len() > MaxMetadataBytes {
		return Public(ErrInvalid, "%s is %d bytes; at most %d (64 KiB) are accepted",
			field, buf.Len(), MaxMetadataBytes).In(field)
	}
	return nil
}

// checkNotFuture refuses a Clerk time more than MaxFutureSkew ahead of now.
func checkNotFuture(field string, t, now time.Time) error {
	if t.After(now.Add(MaxFutureSkew)) {
		return Public(ErrInvalid, "%s (%s) is more than a day ahead of the server's clock",
			field, t.UTC().Format(time.RFC3339)).In(field)
	}
	return nil
}

// schemaFields are the names a field path may be logged with: the keys of
// Clerk's envelope and of the user data usersync reads. A key a client made
// up is payload data, and is never logged.
var schemaFields = func() map[string]bool {
	names := map[string]bool{
		"body": true, "type": true, "data": true, "timestamp": true, "object": true, "instance_id": true,
		"event_attributes": true, "private_metadata": true, "unsafe_metadata": true,
	}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
				names[name] = true
			}
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[ClerkUser]())
	walk(reflect.TypeFor[clerkSession]())
	walk(reflect.TypeFor[ClerkMembership]())   // its organization and public_user_data too
	walk(reflect.TypeFor[ClerkSubscription]()) // its payer and items, their plans and seats
	walk(reflect.TypeFor[ClerkSubscriptionItem]())
	walk(reflect.TypeFor[ClerkPaymentAttempt]())
	return names
}()

// schemaField is the start of path (keys joined by dots, "[]" or "[0]"
// for an array's elements) made only of schemaFields, for logs and
// metrics: a path into public_metadata ends at data.public_metadata, and
// an array's elements are all "[]".
func schemaField(path string) string {
	var kept []string
	for part := range strings.SplitSeq(path, ".") {
		name, _, elems := strings.Cut(part, "[")
		if !schemaFields[name] {
			break
		}
		if elems {
			name += "[]"
		}
		kept = append(kept, name)
		if strings.HasSuffix(name, "_metadata") {
			break // what is inside is the client's
		}
	}
	if len(kept) == 0 {
		return "body"
	}
	return strings.Join(kept, ".")
}
