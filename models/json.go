package models

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
)

// NormalizeJSON rewrites a JSON value the way usersync stores numbers, on
// every store: an integer that fits 64 bits stays that integer, any other
// number becomes the nearest float64 (written as Go writes it), a number
// beyond float64 keeps its digits. Keys keep their order; nothing is
// HTML-escaped.
func NormalizeJSON(raw []byte) ([]byte, error) { return RewriteJSON(raw, nil) }

// RewriteJSON is NormalizeJSON with every object key passed through key
// (nil: kept).
func RewriteJSON(raw []byte, key func(string) string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	type frame struct {
		object bool
		n      int  // values written
		key    bool // the next string is a key
	}
	var stack []*frame
	sep := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.object && !f.key {
			out.WriteByte(':')
			return
		}
		if f.n > 0 {
			out.WriteByte(',')
		}
	}
	done := func() {
		if len(stack) == 0 {
			return
		}
		f := stack[len(stack)-1]
		if f.object {
			if f.key {
				f.key = false
				return
			}
			f.key = true
		}
		f.n++
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				sep()
				out.WriteByte(byte(v))
				stack = append(stack, &frame{object: v == '{', key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				out.WriteByte(byte(v))
				done()
			}
			continue
		case string:
			isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key
			sep()
			if isKey && key != nil {
				v = key(v)
			}
			writeJSON(&out, v)
		case json.Number:
			sep()
			out.WriteString(normalNumber(v))
		default:
			sep()
			writeJSON(&out, v)
		}
		done()
	}
}

func normalNumber(n json.Number) string {
	if i, err := n.Int64(); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return string(n) // beyond float64: keep the digits
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// writeJSON writes v as JSON, without escaping <, > and &.
func writeJSON(out *bytes.Buffer, v any) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	out.Truncate(out.Len() - 1) // Encode ends with a newline
}
