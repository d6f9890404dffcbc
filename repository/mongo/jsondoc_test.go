package mongo

import (
	"encoding/json"

	"reflect"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestJSONDoc_RoundTripsKeysExactly(t *testing.T) {
	tests := []string{
		`{}`,
		`{"a":1,"b":[true,false,null,"s",1.5,-2,[],{}]}`,
		`{"a.b":1,"$set":2,"x$":3,"%":4,"%2E":5,"%24":6,"$":7,".":8,"":9}`,
		`{"nul\u0000key":"v","ключ":"значение","😀":"<&>"}`,
		`{"n":{"$in":[{"a.b.c":{"$":{}}}]}}`,
	}
	for _, in := range tests {
		d, err := jsonToDoc([]byte(in))
		if err != nil {
			t.Fatalf("jsonToDoc(%s): %v", in, err)
		}
		for _, e := range d {
			if strings.HasPrefix(e.Key, "$") || strings.Contains(e.Key, "\x00") {
				t.Errorf("stored key %q would be refused", e.Key)
			}
		}
		out, err := docToJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != in {
			t.Errorf("round trip of %s = %s", in, out)
		}
	}
}

// TestJSONDoc_EscapesOnlyWhatMongoDBRefuses: a NUL and a leading "$" are
// escaped, a "." is not, and keys escaped by earlier versions ("%2E")
// still read back as they were sent.
func TestJSONDoc_EscapesOnlyWhatMongoDBRefuses(t *testing.T) {
	d, err := jsonToDoc([]byte(`{"a.b":{"$c":1,"x\u0000":2,"50%":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	inner := d[0].Value.(bson.D)
	if d[0].Key != "a.b" || inner[0].Key != "%24c" || inner[1].Key != "x%00" || inner[2].Key != "50%25" {
		t.Errorf("stored keys %q and %v, want a.b, then %%24c, x%%00, 50%%25", d[0].Key, inner)
	}
	old := bson.D{{Key: "a%2Eb", Value: bson.D{{Key: "%24c", Value: int64(1)}}}}
	if got, err := docToJSON(old); err != nil || string(got) != `{"a.b":{"$c":1}}` {
		t.Errorf("docToJSON(escaped by an earlier version) = %s, %v", got, err)
	}
}

func FuzzJSONDoc(f *testing.F) {
	f.Add([]byte(`{"a.b":{"$c":[1,2.5e300,"x",null]},"a.b":true}`))
	f.Add([]byte(`{"big":123456789012345678901234567890,"neg":-0,"f":1e-7}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]any
		if json.Unmarshal(in, &want) != nil || want == nil {
			return
		}
		d, err := jsonToDoc(in)
		if err != nil {
			t.Fatalf("jsonToDoc(%q): %v", in, err)
		}
		out, err := docToJSON(d)
		if err != nil {
			t.Fatalf("docToJSON: %v", err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %q is not JSON: %v", out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %q = %q", in, out)
		}
	})
}
