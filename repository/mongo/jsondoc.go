package mongo

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

	"go.mongodb.org/mongo-driver/v2/bson"
)

// JSON objects from Clerk (payloads, metadata) are application-defined: any
// key may appear. Keys are stored as they are, except where MongoDB needs
// them escaped:
//   - a NUL cannot be in a BSON key at all (keys are C strings): "%00";
//   - a leading "$": MongoDB 5+ stores $-prefixed names on an insert (and
//     the insert of an upsert), but an update operator refuses them in the
//     value it sets once it matches a document, and Apply writes metadata
//     with $set on an existing user: "%24";
//   - "%" itself, so that the escape reverses exactly: "%25".
//
// A "." is stored as it is: MongoDB 5+ stores dotted names, and no query
// or update of usersync addresses a key of a payload or of metadata by
// path (such a name would read as a path; tools such as mongoexport
// mishandle them: read these documents with $getField). Earlier versions
// escaped it as "%2E" (FerretDB 1.x refused it); decoding still reverses
// that, and since "%" is always escaped, no key stored now reads as one of
// those. Duplicate keys keep the last value, as encoding/json does.
//
// Reads (the "%2E" of keyUnescaper): keys of metadata and payloads
// written by versions before 730d0a2 (2026-11-25, "The MongoDB store
// stops carrying FerretDB"), in databases of any schema: no upgrade
// rewrites them, and such a document stays until a newer state replaces
// it.
// Remove: only after an upgrade step rewrites those keys, in the first
// release after no database is left that has not run it; until then
// keep it.

var keyEscaper = strings.NewReplacer("%", "%25", "\x00", "%00")
var keyUnescaper = strings.NewReplacer("%25", "%", "%2E", ".", "%00", "\x00", "%24", "$")

func escapeKey(k string) string {
	k = keyEscaper.Replace(k)
	if strings.HasPrefix(k, "$") {
		k = "%24" + k[1:]
	}
	return k
}

func unescapeKey(k string) string { return keyUnescaper.Replace(k) }

// jsonToDoc converts a JSON object into a BSON document with escaped keys.
// Integers that fit int64 stay integers; other numbers become doubles.
func jsonToDoc(raw []byte) (bson.D, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	d, ok := v.(bson.D)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return d, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var d bson.D
			index := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				k := escapeKey(kt.(string))
				if i, ok := index[k]; ok {
					d[i].Value = v
					continue
				}
				index[k] = len(d)
				d = append(d, bson.E{Key: k, Value: v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if d == nil {
				d = bson.D{}
			}
			return d, nil
		case '[':
			a := bson.A{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, err
		}
		if math.IsInf(f, 0) {
			return string(t), nil // beyond float64: keep the digits
		}
		return f, nil
	default: // string, bool, nil
		return t, nil
	}
}

// docToJSON is the inverse of jsonToDoc.
func docToJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case bson.D:
		buf.WriteByte('{')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, unescapeKey(e.Key))
			buf.WriteByte(':')
			if err := writeJSON(buf, e.Value); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case bson.A:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case nil:
		buf.WriteString("null")
	case int32, int64, bool:
		fmt.Fprint(buf, t)
	case float64:
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		buf.Write(b)
	case string:
		writeString(buf, t)
	case bson.DateTime:
		writeString(buf, t.Time().UTC().Format(time.RFC3339Nano))
	default:
		return fmt.Errorf("cannot render %T as JSON", v)
	}
	return nil
}

// writeString writes s as a JSON string without HTML escaping, so text
// comes back as it was sent.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}
