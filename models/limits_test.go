package models_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// deep returns a JSON value nested n levels.
func deep(n int) string {
	return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
}

func TestChange_RefusesWhatUsersMustNotStore(t *testing.T) {
	now := time.UnixMilli(1760000000000)
	user := func(extra string) string {
		return `{"type":"user.updated","data":{"id":"user_1","updated_at":1760000000000` + extra + `}}`
	}
	tests := []struct {
		name, body, wantMsg string
	}{
		{"email over 512 characters", user(`,"primary_email_address_id":"e1","email_addresses":[{"id":"e1","email_address":"` + strings.Repeat("a", 600) + `@x.org"}]`), "data.email_addresses[0].email_address must be at most 512"},
		{"phone over 64 characters", user(`,"phone_numbers":[{"id":"p1","phone_number":"` + strings.Repeat("1", 65) + `"}]`), "data.phone_numbers[0].phone_number must be at most 64"},
		{"updated_at in the year 3000", `{"type":"user.updated","data":{"id":"user_1","updated_at":32503680000000}}`, "more than a day ahead"},
		{"delete timestamp in the year 3000", `{"type":"user.deleted","timestamp":32503680000000,"data":{"id":"user_1"}}`, "more than a day ahead"},
		{"metadata over 64 KiB", user(`,"public_metadata":{"a":"` + strings.Repeat("x", 70000) + `"}`), "at most 65536"},
		{"150 levels of metadata", user(`,"public_metadata":` + deep(150)), "deeper than 100 levels"},
		{"101 levels in the body", user(`,"public_metadata":` + deep(99)), "deeper than 100 levels"},
		{"updated_at twice in data", `{"type":"user.updated","data":{"id":"user_1","updated_at":1,"updated_at":1760000000000}}`, `ambiguous JSON: key "updated_at" appears twice in data`},
		{"id twice in data", `{"type":"user.updated","data":{"id":"user_1","id":"user_2","updated_at":1760000000000}}`, "ambiguous JSON"},
		{"a key twice in metadata", user(`,"public_metadata":{"plan":"free","plan":"pro"}`), `appears twice in data.public_metadata`},
		{"1e400 in metadata", user(`,"public_metadata":{"n":1e400}`), "data.public_metadata.n is a number beyond the range"},
		{"-1e400 in an array", user(`,"public_metadata":{"n":[1,-1e400]}`), "data.public_metadata.n[] is a number beyond"},
		{"a key twice, once escaped", user(`,"public_metadata":{"plan":"free","pl\u0061n":"pro"}`), `key "plan" appears twice in data.public_metadata`},
		{"a key twice among many", user(`,"public_metadata":{` + manyKeys(100) + `,"k7":0}`), `key "k7" appears twice in data.public_metadata`},
		{"a key twice deep in an array", user(`,"public_metadata":{"a":[{"b":{"c":1,"c":2}}]}`), `key "c" appears twice in data.public_metadata.a[].b`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := models.DecodeEvent([]byte(tc.body))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			_, err = ev.UserChange("msg_1", now)
			if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Change() error = %v, want ErrInvalid mentioning %q", err, tc.wantMsg)
			}
		})
	}
}

func TestChange_AcceptsWhatIsWithinTheLimits(t *testing.T) {
	now := time.UnixMilli(1760000000000)
	tests := []struct{ name, body string }{
		{"100 levels in the body", `{"type":"user.updated","data":{"id":"user_1","updated_at":1760000000000,"public_metadata":` + deep(97) + `}}`},
		{"updated_at within a day ahead", fmt.Sprintf(`{"type":"user.updated","data":{"id":"user_1","updated_at":%d}}`, now.Add(23*time.Hour).UnixMilli())},
		{"tiny and negative-zero numbers", `{"type":"user.updated","data":{"id":"user_1","updated_at":1760000000000,"public_metadata":{"a":1e-400,"b":-0,"c":1.7976931348623157e308}}}`},
		{"the same key in different objects", `{"type":"user.updated","data":{"id":"user_1","updated_at":1760000000000,"public_metadata":{"id":{"id":1},"x":[{"id":1},{"id":2}]}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := models.DecodeEvent([]byte(tc.body))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			if _, err := ev.UserChange("msg_1", now); err != nil {
				t.Errorf("Change() = %v, want no error", err)
			}
		})
	}
}

func TestDecodeEvent_RefusesAmbiguousOrNonUTF8Bodies(t *testing.T) {
	tests := []struct{ name, body, wantMsg string }{
		{"type twice", `{"type":"session.created","type":"user.created","data":{}}`, `ambiguous JSON: key "type" appears twice`},
		{"data twice", `{"type":"user.created","data":{},"data":{"id":"user_1"}}`, "ambiguous JSON"},
		{"not UTF-8", "{\"type\":\"user.created\",\"data\":{\"first_name\":\"\xff\xfe\"}}", "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := models.DecodeEvent([]byte(tc.body))
			if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("DecodeEvent() error = %v, want ErrInvalid mentioning %q", err, tc.wantMsg)
			}
		})
	}
}

func TestQuote_BoundsAndEscapes(t *testing.T) {
	if got := models.Quote("a\x00b"); got != `"a\x00b"` {
		t.Errorf("Quote = %s", got)
	}
	long := models.Quote(strings.Repeat("é", 1000))
	if !strings.HasSuffix(long, `"...`) || len([]rune(long)) != 64+5 {
		t.Errorf("Quote of 1000 characters = %s (%d runes)", long, len([]rune(long)))
	}
}

// manyKeys is "k0":0,"k1":0,… with n keys.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	return b.String()
}
