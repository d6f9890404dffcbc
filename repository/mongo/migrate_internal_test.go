package mongo

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// TestCheckedDocID_AnEmptyKeyIsAnError: docID gives an empty key a new
// random _id each time, which made a migration re-key the same document
// for ever.
func TestCheckedDocID_AnEmptyKeyIsAnError(t *testing.T) {
	if _, err := checkedDocID(""); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("checkedDocID(\"\") error = %v, want ErrInvalid", err)
	}
	a, err1 := checkedDocID("user_1")
	b, err2 := checkedDocID("user_1")
	if err1 != nil || err2 != nil || a != b || a != docID("user_1") {
		t.Errorf("checkedDocID(user_1) = %v, %v / %v, %v; want docID's, the same each time", a, err1, b, err2)
	}
}

// TestRekeyTarget_OnlyUsersyncsUsers: the migration re-keys a user
// document only when it is of usersync's shape, and names any other by
// its _id alone, before it changes anything of it.
func TestRekeyTarget_OnlyUsersyncsUsers(t *testing.T) {
	id, err := rekeyTarget(extJSON(t, usersyncUser))
	if err != nil || id != docID("user_2abc") {
		t.Errorf("rekeyTarget(usersync's user) = %v, %v; want docID(user_2abc)", id, err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"no userId", `{"_id": {"$oid": "65f0c0ffee0000000000c001"}, "email": "bob@example.com", "sourceUpdatedAt": {"$date": "2025-01-01T00:00:00Z"}}`,
			`ObjectId("65f0c0ffee0000000000c001"): has no userId`},
		{"empty userId", `{"_id": 7, "userId": "", "email": "bob@example.com", "sourceUpdatedAt": {"$date": "2025-01-01T00:00:00Z"}}`, "7: has no userId"},
		{"userId not a string", `{"_id": 8, "userId": 42, "sourceUpdatedAt": {"$date": "2025-01-01T00:00:00Z"}}`, "8: has no userId"},
		{"no sourceUpdatedAt", `{"_id": "x", "userId": "user_1", "email": "bob@example.com"}`, `"x": has no sourceUpdatedAt`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rekeyTarget(extJSON(t, tc.doc))
			if !errors.Is(err, models.ErrForeignData) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rekeyTarget = %v, want ErrForeignData saying %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "bob@example.com") {
				t.Errorf("error %q shows the document's email", err)
			}
		})
	}
}

// TestWithID_KeepsEveryFieldAsItIs: a re-keyed user keeps every field,
// in order, with its type (an older migration decoded users into this
// version's struct: fields it did not know were dropped, and absent
// dates became year 1).
func TestWithID_KeepsEveryFieldAsItIs(t *testing.T) {
	raw := extJSON(t, `{"_id": {"$oid": "65f0c0ffee0000000000a001"}, "userId": "user_2abc",
		"sourceUpdatedAt": {"$date": "2025-01-02T03:04:05.678Z"}, "custom": {"n": {"$numberInt": "1"}, "l": {"$numberLong": "2"},
		"d": {"$numberDecimal": "1.10"}, "b": {"$binary": {"base64": "AQI=", "subType": "04"}}}, "tags": ["a", null],
		"deletedAt": null}`)
	id := docID("user_2abc")
	d, err := withID(raw, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := extJSON(t, `{"_id": {"$oid": "`+id.Hex()+`"}, "userId": "user_2abc",
		"sourceUpdatedAt": {"$date": "2025-01-02T03:04:05.678Z"}, "custom": {"n": {"$numberInt": "1"}, "l": {"$numberLong": "2"},
		"d": {"$numberDecimal": "1.10"}, "b": {"$binary": {"base64": "AQI=", "subType": "04"}}}, "tags": ["a", null],
		"deletedAt": null}`)
	if string(got) != string(wantDoc) {
		t.Errorf("withID = %s\nwant    %s", bson.Raw(got), wantDoc)
	}
}

func TestMigrationReport_SaysWhatItDidOrWouldDo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       migration
		dryRun  bool
		want    string
		changed int
	}{
		{"fresh", migration{mark: true, indexes: true}, false, "marked the database as usersync's, built the missing indexes", 0},
		{"marked", migration{indexes: true}, false, "built the missing indexes", 0},
		{"older", migration{mark: true, older: true, rekey: true, users: 10, rekeyed: 4, finished: 1, processed: 42, recounted: true,
			emails: 2, recomputed: true, indexes: true}, false,
			"re-keyed 4 of 10 users (1 left aside by a stopped run), counted 42 processed events into the outcome counters, " +
				"recomputed the email of 2 users from their last events, filled Clerk's creation time of 0 users from their last events, marked the database as usersync's, built the missing indexes", 6},
		{"older, dry run", migration{mark: true, older: true, rekey: true, users: 10, rekeyed: 3, processed: 42, emails: 1}, true,
			"would re-key 3 of 10 users, would count 42 processed events into the outcome counters, " +
				"would recompute the email of 1 users from their last events, would fill Clerk's creation time of 0 users from their last events, would mark the database as usersync's, would build the missing indexes", 4},
		{"schema 2", migration{mark: true, older: true, emails: 1, recomputed: true, indexes: true}, false,
			"recomputed the email of 1 users from their last events, filled Clerk's creation time of 0 users from their last events, marked the database as usersync's, built the missing indexes", 1},
		{"stopped", migration{mark: true, older: true, rekey: true, users: 10, rekeyed: 2}, false, "re-keyed 2 of 10 users", 2},
		{"refused", migration{}, false, "nothing done", 0},
	} {
		got := tc.m.report(tc.dryRun)
		if got.Summary != tc.want || got.Changed != tc.changed {
			t.Errorf("%s: report = %+v, want %q, %d changed", tc.name, got, tc.want, tc.changed)
		}
	}
}
