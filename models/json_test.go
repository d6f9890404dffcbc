package models

import (
	"encoding/json"
	"testing"
)

func TestNormalizeJSON_NumbersAsStoredKeysInOrder(t *testing.T) {
	for in, want := range map[string]string{
		`{"b":1,"a":2}`: `{"b":1,"a":2}`,
		`{"negZero":-0,"tiny":1e-400,"big":1e300}`: `{"negZero":0,"tiny":0,"big":1e+300}`,
		`{"int":9007199254740993}`:                 `{"int":9007199254740993}`,
		`{"huge":123456789012345678901234567890}`:  `{"huge":1.2345678901234568e+29}`,
		`{"html":"<&>","nested":[{"x":[]},{}]}`:    `{"html":"<&>","nested":[{"x":[]},{}]}`,
		`{"beyond":1e400}`:                         `{"beyond":1e400}`,
	} {
		got, err := NormalizeJSON([]byte(in))
		if err != nil || string(got) != want {
			t.Errorf("NormalizeJSON(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
}

// FuzzNormalizeJSON: whatever valid JSON comes in, what comes out is valid
// JSON, and normalising it again changes nothing.
func FuzzNormalizeJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5,"x",null,true,{"b":-0}]}`, `{"k\u0000":"\ud83d\ude00"}`, `[1e400]`, `"s"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		once, err := NormalizeJSON(in)
		if err != nil {
			t.Fatalf("NormalizeJSON(%q): %v", in, err)
		}
		if !json.Valid(once) {
			t.Fatalf("NormalizeJSON(%q) = %q, not JSON", in, once)
		}
		twice, err := NormalizeJSON(once)
		if err != nil || string(twice) != string(once) {
			t.Fatalf("NormalizeJSON is not idempotent: %q → %q → %q (%v)", in, once, twice, err)
		}
	})
}
