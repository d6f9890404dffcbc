package models_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/usersync/usersync/models"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestChange_FromClerkFixtures(t *testing.T) {
	tests := []struct {
		file        string
		userEvent   bool
		userID      string
		email       string
		displayName string
		deleted     bool
		sourceTime  time.Time
	}{
		{"user.created.json", true, "user_29w83sxmDNGwOuEthce5gg56FcC", "example@example.org", "Example Example", false, time.UnixMilli(1654012591835)},
		{"user.updated.json", true, "user_29w83sxmDNGwOuEthce5gg56FcC", "jordan.rivera@example.com", "Jordan Rivera", false, time.UnixMilli(1654099012345)},
		{"user.deleted.json", true, "user_29w83sxmDNGwOuEthce5gg56FcC", "", "", true, time.UnixMilli(1654185400123)},
		{"user.created.multi-email.json", true, "user_2SS3GNsVEHibIcFNY6OA4j9lef2", "alex@example.com", "Alex Example", false, time.UnixMilli(1760618003273)},
		{"user.created.phone-only.json", true, "user_231Rs4m996yAJAsHmT3BFLkG8Mw", "", "+12025550143", false, time.UnixMilli(1760531402135)},
		{"openapi.user.deleted.json", true, "user_2g7np7Hrk0SN6kj5EDMLDaKNL0S", "", "", true, time.Unix(1716883200, 0)},
		{"session.created.json", false, "", "", "", false, time.Time{}},
		{"openapi.session.created.json", false, "", "", "", false, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ev, err := models.DecodeEvent(fixture(t, tc.file))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			// A session event is of the user kind too, not a user event.
			if isUser := ev.Kind() == models.KindUser && !models.IsSessionType(ev.Type); isUser != tc.userEvent {
				t.Fatalf("IsUserEvent() = %v, want %v", isUser, tc.userEvent)
			}
			if !tc.userEvent {
				return
			}
			ch, err := ev.UserChange("msg_1", time.Now())
			if err != nil {
				t.Fatalf("Change: %v", err)
			}
			want := models.UserChange{UserID: tc.userID, EventID: "msg_1", SourceTime: tc.sourceTime.UTC(), Deleted: tc.deleted, Email: tc.email, DisplayName: tc.displayName}
			ch.Metadata = nil
			if ch.UserID != want.UserID || ch.Email != want.Email || ch.DisplayName != want.DisplayName || ch.Deleted != want.Deleted || !ch.SourceTime.Equal(want.SourceTime) {
				t.Errorf("Change() = %+v\nwant       %+v", ch, want)
			}
			if ev.UserID() != tc.userID {
				t.Errorf("UserID() = %q, want %q", ev.UserID(), tc.userID)
			}
		})
	}
}

func TestChange_MetadataIsPublicOnly(t *testing.T) {
	ev, _ := models.DecodeEvent(fixture(t, "user.created.multi-email.json"))
	ch, err := ev.UserChange("msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(ch.Metadata, &meta); err != nil || meta["plan"] != "pro" || strings.Contains(string(ch.Metadata), "billing") {
		t.Errorf("metadata = %s, want public_metadata only", ch.Metadata)
	}
}

func TestDisplayName_FallsBackInOrder(t *testing.T) {
	s := func(v string) *string { return &v }
	phoneID, emailID := "idn_p", "idn_e"
	base := models.ClerkUser{
		ID:                    "user_1",
		PrimaryPhoneNumberID:  &phoneID,
		PhoneNumbers:          []models.ClerkPhone{{ID: "idn_other", PhoneNumber: "+1000"}, {ID: phoneID, PhoneNumber: "+1555"}},
		PrimaryEmailAddressID: &emailID,
	}
	tests := []struct {
		name        string
		first, last *string
		username    *string
		email       string
		want        string
	}{
		{"first and last", s("Ada"), s("Lovelace"), s("ada"), "a@x.org", "Ada Lovelace"},
		{"first only", s(" Ada "), nil, s("ada"), "a@x.org", "Ada"},
		{"last only", nil, s("Lovelace"), nil, "", "Lovelace"},
		{"blank names use username", s("  "), s(""), s("ada"), "a@x.org", "ada"},
		{"then email", nil, nil, nil, "a@x.org", "a@x.org"},
		{"then primary phone", nil, nil, s(" "), "", "+1555"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := base
			u.FirstName, u.LastName, u.Username = tc.first, tc.last, tc.username
			if got := u.DisplayName(tc.email); got != tc.want {
				t.Errorf("DisplayName(%q) = %q, want %q", tc.email, got, tc.want)
			}
		})
	}
	bare := models.ClerkUser{ID: "user_bare"}
	if got := bare.DisplayName(""); got != "user_bare" {
		t.Errorf("DisplayName of a bare user = %q, want its id", got)
	}
}

func TestPrimaryEmail_IsTheOneNamedPrimary(t *testing.T) {
	id := "idn_2"
	u := models.ClerkUser{
		PrimaryEmailAddressID: &id,
		EmailAddresses: []models.ClerkEmail{
			{ID: "idn_1", EmailAddress: "first@example.com"},
			{ID: "idn_2", EmailAddress: " Second@EXAMPLE.com "},
		},
	}
	if got := u.PrimaryEmail(); got != "second@example.com" {
		t.Errorf("PrimaryEmail() = %q, want second@example.com", got)
	}
	missing := "idn_9"
	u.PrimaryEmailAddressID = &missing
	if got := u.PrimaryEmail(); got != "" {
		t.Errorf("PrimaryEmail() with a dangling id = %q, want none", got)
	}
	u.PrimaryEmailAddressID = nil
	if got := u.PrimaryEmail(); got != "" {
		t.Errorf("PrimaryEmail() with no primary = %q, want none (never the first entry)", got)
	}
}

func TestChange_RejectsPayloadsThatCanNeverApply(t *testing.T) {
	tests := []struct {
		name, body, wantMsg string
	}{
		{"no data", `{"type":"user.created"}`, "data must be an object"},
		{"data not an object", `{"type":"user.created","data":[1]}`, "data must be an object"},
		{"no id", `{"type":"user.updated","data":{"updated_at":1760000000000}}`, "data.id is required"},
		{"id of another object", `{"type":"user.updated","data":{"id":"sess_1","updated_at":1760000000000}}`, `data.id must be a Clerk id: "user_" followed by letters and digits`},
		{"no updated_at", `{"type":"user.created","data":{"id":"user_1"}}`, "data.updated_at is required"},
		{"updated_at a string", `{"type":"user.created","data":{"id":"user_1","updated_at":"x"}}`, "data.updated_at must be a JSON number"},
		{"metadata an array", `{"type":"user.created","data":{"id":"user_1","updated_at":1760000000000,"public_metadata":[1]}}`, "public_metadata must be an object"},
		{"delete without timestamp", `{"type":"user.deleted","data":{"id":"user_1"}}`, "timestamp"},
		{"delete with a negative timestamp", `{"type":"user.deleted","timestamp":-5,"data":{"id":"user_1"}}`, "timestamp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := models.DecodeEvent([]byte(tc.body))
			if err != nil {
				t.Fatalf("DecodeEvent: %v", err)
			}
			_, err = ev.UserChange("msg_1", time.Now())
			if !errors.Is(err, models.ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Change() error = %v, want ErrInvalid mentioning %q", err, tc.wantMsg)
			}
		})
	}
}

func TestDecodeEvent_RejectsNonEvents(t *testing.T) {
	for _, body := range []string{``, `null`, `[]`, `"user.created"`, `{"type":1}`, `{"type":""}`, `{"data":{}}`, `{"type":"user.created"`} {
		if _, err := models.DecodeEvent([]byte(body)); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("DecodeEvent(%q) error = %v, want ErrInvalid", body, err)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		f.Add(fixture(f, filepath.Base(file)))
	}
	f.Add([]byte(`{"type":"user.updated","data":{"id":"user_1","updated_at":1,"first_name":"\u00e9\ud83d\ude00","public_metadata":{"a.b":{"$x":1}}}}`))
	f.Add([]byte(`{"type":"user.deleted","timestamp":1e3,"data":{"id":"user_1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := models.DecodeEvent(body)
		if err != nil {
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("DecodeEvent error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if !(ev.Kind() == models.KindUser) {
			return
		}
		ch, err := ev.UserChange("msg_fuzz", time.Now())
		if err != nil {
			if !errors.Is(err, models.ErrInvalid) {
				t.Fatalf("Change error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if !strings.HasPrefix(ch.UserID, "user_") || ch.UserID != ev.UserID() {
			t.Errorf("UserID = %q (envelope says %q)", ch.UserID, ev.UserID())
		}
		if ch.SourceTime.IsZero() || ch.SourceTime.Unix() <= 0 {
			t.Errorf("SourceTime = %v", ch.SourceTime)
		}
		if ch.Deleted {
			return
		}
		if n := utf8.RuneCountInString(ch.DisplayName); n < 1 || n > models.MaxDisplayName || !utf8.ValidString(ch.DisplayName) {
			t.Errorf("DisplayName %q has %d runes", ch.DisplayName, n)
		}
		if ch.Email != strings.ToLower(ch.Email) {
			t.Errorf("Email %q is not lowercased", ch.Email)
		}
		var meta map[string]any
		if err := json.Unmarshal(ch.Metadata, &meta); err != nil || meta == nil {
			t.Errorf("Metadata %q is not a JSON object: %v", ch.Metadata, err)
		}
	})
}

// TestUserID_OfAnInvalidEventIsBounded: the user id kept with a failed
// event (and logged with it) is an id or nothing, never a large string.
func TestUserID_OfAnInvalidEventIsBounded(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"user_2abc", "user_2abc"},
		{"user_" + strings.Repeat("x", 123), "user_" + strings.Repeat("x", 123)},
		{"user_" + strings.Repeat("x", 124), ""},
		{"user_" + strings.Repeat("x", 100_000), ""},
	} {
		body, _ := json.Marshal(map[string]any{"type": "user.updated", "data": map[string]any{"id": tc.id}})
		ev, err := models.DecodeEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.UserID(); got != tc.want {
			t.Errorf("UserID() of an id of %d bytes = %d bytes, want %d", len(tc.id), len(got), len(tc.want))
		}
	}
}

func TestNormalizeEmail_LowercasesASCIILettersOnly(t *testing.T) {
	for in, want := range map[string]string{
		" Kate@Example.COM\t":    "kate@example.com",
		"\u212Aate@example.com":  "\u212Aate@example.com", // the Kelvin sign is not k
		"\u0130stanbul@x.org":    "\u0130stanbul@x.org",   // nor İ i
		"ÉLISE@x.org":            "Élise@x.org",
		"kate@example.com\u00a0": "kate@example.com\u00a0", // no-break space is not trimmed
		"":                       "",
	} {
		if got := models.NormalizeEmail(in); got != want {
			t.Errorf("NormalizeEmail(%q) = %q, want %q", in, got, want)
		}
	}
}

// A user id the webhook accepts is one the sync route and reconcile accept
// too, and the other way round: one rule (Kind.IsID) on every path.
func TestClerkIDs_TheWebhookAcceptsExactlyTheIdsTheOtherPathsDo(t *testing.T) {
	ids := []string{"user_29w83sxmDNGwOuEthce5gg56FcC", "user_1", "user_", "user_a-b", "user_a.b", "user_../x", "user_a b",
		"user_é", "sess_1", "user_" + strings.Repeat("a", 123), "user_" + strings.Repeat("a", 124)}
	now := time.UnixMilli(1760000000000)
	for _, id := range ids {
		for _, typ := range []string{"user.updated", "user.deleted"} {
			body := fmt.Sprintf(`{"type":%q,"timestamp":1760000000000,"data":{"id":%q,"updated_at":1760000000000}}`, typ, id)
			ev, err := models.DecodeEvent([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ev.UserChange("msg_1", now)
			if got, want := err == nil, models.KindUser.IsID(id); got != want {
				t.Errorf("%s of %q: accepted %v (%v), but KindUser.IsID says %v", typ, id, got, err, want)
			}
		}
		body := fmt.Sprintf(`{"type":"organizationMembership.updated","data":{"id":"orgmem_1","updated_at":1760000000000,
			"organization":{"id":"org_1","updated_at":1760000000000},"public_user_data":{"user_id":%q}}}`, id)
		ev, err := models.DecodeEvent([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev.MembershipChange("msg_1", now); (err == nil) != models.KindUser.IsID(id) {
			t.Errorf("a membership of member %q: %v, but KindUser.IsID says %v", id, err, models.KindUser.IsID(id))
		}
	}
	for _, id := range []string{"org_1", "org_a-b", "org_", "orgmem_1"} {
		body := fmt.Sprintf(`{"type":"organization.updated","data":{"id":%q,"updated_at":1760000000000}}`, id)
		ev, err := models.DecodeEvent([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ev.OrganizationChange("msg_1", now); (err == nil) != models.KindOrganization.IsID(id) {
			t.Errorf("organization %q: %v, but KindOrganization.IsID says %v", id, err, models.KindOrganization.IsID(id))
		}
	}
}
