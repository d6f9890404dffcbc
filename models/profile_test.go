package models_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

func ptime(t time.Time) *time.Time { t = t.UTC(); return &t }

func TestProfile_FromClerkFixtures(t *testing.T) {
	tests := []struct {
		file string
		want models.Profile
	}{
		{"user.created.json", models.Profile{
			FirstName: "Example", LastName: "Example", ImageURL: "https://img.clerk.com/xxxxxx", ExternalID: "567772",
			LastSignInAt: ptime(time.UnixMilli(1654012591514)), SourceCreatedAt: ptime(time.UnixMilli(1654012591514)),
		}},
		{"user.updated.json", models.Profile{
			FirstName: "Jordan", LastName: "Rivera", ImageURL: "https://img.clerk.com/xxxxxx", ExternalID: "567772",
			LastSignInAt: ptime(time.UnixMilli(1654098800000)), SourceCreatedAt: ptime(time.UnixMilli(1654012591514)),
		}},
		{"user.created.phone-only.json", models.Profile{
			ImageURL:    "https://img.clerk.com/eyJ0eXBlIjoiZGVmYXVsdCIsImlpZCI6Imluc18yelNCTnRydXJIT2hXRmptZWRkbFVFUm1xSlUiLCJyaWQiOiJ1c2VyXzIzMVJzNG05OTZ5QUpBc0htVDNCRkxrRzhNdyJ9",
			PhoneNumber: "+12025550143", SourceCreatedAt: ptime(time.UnixMilli(1760531402117)),
		}},
		{"user.created.multi-email.json", models.Profile{
			FirstName: "Alex", LastName: "Example", Username: "alex_example", ExternalID: "crm-000123",
			SourceCreatedAt: ptime(time.UnixMilli(1760618003251)),
			ImageURL:        "https://img.clerk.com/eyJ0eXBlIjoiZGVmYXVsdCIsImlpZCI6Imluc18yelNCTnRydXJIT2hXRmptZWRkbFVFUm1xSlUiLCJyaWQiOiJ1c2VyXzJTUzNHTnNWRUhpYkljRk5ZNk9BNGo5bGVmMiJ9",
		}},
		// Three numbers; the primary is the second, never simply the first.
		{"user.updated.multi-phone.json", models.Profile{
			FirstName: "Sam", LastName: "Okafor", Username: "sam_okafor", ExternalID: "acct-4417",
			ImageURL:     "https://img.clerk.com/eyJ0eXBlIjoiZGVmYXVsdCIsImlpZCI6Imluc18yelNCTnRydXJIT2hXRmptZWRkbFVFUm1xSlUiLCJyaWQiOiJ1c2VyXzIzMVJzNG05OTZ5QUpBc0htVDNCRkxrRzhNdyJ9",
			PhoneNumber:  "+442079460958",
			LastSignInAt: ptime(time.UnixMilli(1760617790000)),
			Banned:       true, Locked: true, SourceCreatedAt: ptime(time.UnixMilli(1760531402117)),
		}},
		{"user.deleted.json", models.Profile{}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ev, err := models.DecodeEvent(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			ch, err := ev.UserChange("msg_1", time.Now())
			if err != nil {
				t.Fatalf("Change: %v", err)
			}
			if !profileEqual(ch.Profile, tc.want) {
				t.Errorf("Change().Profile = %+v\nwant               %+v", ch.Profile, tc.want)
			}
		})
	}
}

func profileEqual(a, b models.Profile) bool {
	same := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	at, bt, ac, bc := a.LastSignInAt, b.LastSignInAt, a.SourceCreatedAt, b.SourceCreatedAt
	a.LastSignInAt, b.LastSignInAt, a.SourceCreatedAt, b.SourceCreatedAt = nil, nil, nil, nil
	return a == b && same(at, bt) && same(ac, bc)
}

// TestProfile_StringsAreBounded: names are cut, over-long identifiers left
// out. (A phone number over MaxPhoneNumber is refused by validation: see
// TestChange_RefusesWhatUsersMustNotStore.)
func TestProfile_StringsAreBounded(t *testing.T) {
	long := func(n int) string { return strings.Repeat("é", n) }
	data := map[string]any{
		"id": "user_1", "updated_at": 1760617803140,
		"first_name": "  " + long(models.MaxName+10) + " ", "last_name": long(models.MaxName),
		"username": long(models.MaxName + 1), "external_id": long(models.MaxExternalID + 1),
		"image_url":       "https://img.example/" + strings.Repeat("a", models.MaxImageURL),
		"last_sign_in_at": nil, "banned": nil, "locked": nil,
	}
	body, _ := json.Marshal(map[string]any{"type": "user.updated", "data": data})
	ev, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := ev.UserChange("msg_1", time.Now())
	if err != nil {
		t.Fatalf("Change: %v", err)
	}
	want := models.Profile{FirstName: long(models.MaxName), LastName: long(models.MaxName)}
	if !profileEqual(ch.Profile, want) {
		t.Errorf("Profile = %+v, want names cut to %d characters and over-long identifiers left out", ch.Profile, models.MaxName)
	}
}

func TestProfile_TypesAreCheckedLikeOtherFields(t *testing.T) {
	tests := []struct {
		field   string
		value   any
		invalid bool
	}{
		{"banned", "yes", true},
		{"locked", 1, true},
		{"image_url", 42, true},
		{"last_sign_in_at", "yesterday", true},
		{"last_sign_in_at", -5, false}, // read as no time
		{"external_id", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"type": "user.updated", "data": map[string]any{"id": "user_1", "updated_at": 1760617803140, tc.field: tc.value}})
			ev, err := models.DecodeEvent(body)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := ev.UserChange("msg_1", time.Now())
			if tc.invalid {
				if !errors.Is(err, models.ErrInvalid) {
					t.Errorf("Change with %s=%v: %v, want ErrInvalid", tc.field, tc.value, err)
				}
				return
			}
			if err != nil || ch.LastSignInAt != nil || ch.ExternalID != "" {
				t.Errorf("Change with %s=%v = %+v, %v; want no value", tc.field, tc.value, ch.Profile, err)
			}
		})
	}
}
