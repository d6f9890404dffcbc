package mongo

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
			if strings.Contains(e.Key, ".") || strings.HasPrefix(e.Key, "$") || strings.Contains(e.Key, "\x00") {
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
