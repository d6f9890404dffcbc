package mongo

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// Documents as the collections of a database may hold them.
const (
	// usersync's, as every version wrote them.
	usersyncUser = `{"_id": {"$oid": "65f0c0ffee0000000000a001"}, "userId": "user_2abc", "email": "ann@example.com",
		"displayName": "Ann", "metadata": {}, "createdAt": {"$date": "2025-01-02T03:04:05Z"},
		"updatedAt": {"$date": "2025-01-02T03:04:05Z"}, "deletedAt": null,
		"sourceUpdatedAt": {"$date": "2025-01-02T03:04:05Z"}, "lastEventId": "msg_1"}`
	usersyncEvent = `{"_id": {"$oid": "65f0c0ffee0000000000b001"}, "eventId": "msg_1", "type": "user.created",
		"eventType": "created", "userId": "user_2abc", "rawBody": "{}", "source": "clerk", "signature": "v1,x",
		"signatureValid": true, "receivedAt": {"$date": "2025-01-02T03:04:05Z"}, "status": "processed",
		"outcome": "applied", "attempts": 1}`
	usersyncEventNoID = `{"_id": {"$oid": "65f0c0ffee0000000000b002"}, "type": "user.created", "eventType": "created",
		"receivedAt": {"$date": "2025-01-02T03:04:05Z"}, "status": "failed", "attempts": 1, "error": "invalid payload"}`
	usersyncCounter = `{"_id": "outcome:applied:07", "n": {"$numberLong": "12"}}`
	usersyncLease   = `{"_id": "reconcile", "owner": "host-1", "expiresAt": {"$date": "2025-01-02T03:04:05Z"}}`
	usersyncBucket  = `{"_id": "m:001735787040", "start": {"$date": "2025-01-02T03:04:00Z"}, "n": {"received": {"$numberLong": "3"}}}`
	usersyncRun     = `{"_id": "001735787045000-65f0c0ffee0000000000d001", "kind": "reconcile", "trigger": "schedule",
		"startedAt": {"$date": "2025-01-02T03:04:05Z"}, "durationMs": {"$numberLong": "1500"}, "success": true}`
	usersyncSub = `{"_id": {"$oid": "65f0c0ffee0000000000f001"}, "subscriptionId": "csub_1", "payerKind": "user", "payerId": "user_2abc",
		"status": "active", "sourceUpdatedAt": {"$date": "2025-01-02T03:04:05Z"}, "lastEventId": "msg_2"}`
	usersyncItem = `{"_id": {"$oid": "65f0c0ffee0000000000f002"}, "itemId": "csub_item_1", "payerKind": "user", "payerId": "user_2abc",
		"status": "active", "plan": {"id": "cplan_1", "slug": "pro"}, "sourceUpdatedAt": {"$date": "2025-01-02T03:04:05Z"}, "lastEventId": "msg_2"}`
	usersyncAttempt = `{"_id": {"$oid": "65f0c0ffee0000000000f003"}, "attemptId": "pa_1", "paymentId": "cpa_1", "payerKind": "user",
		"payerId": "user_2abc", "status": "paid", "sourceUpdatedAt": {"$date": "2025-01-02T03:04:05Z"}, "lastEventId": "msg_3"}`
	usersyncPlan = `{"_id": {"$oid": "65f0c0ffee0000000000f004"}, "payerKind": "user", "payerId": "user_2abc", "plan": {"status": "active"},
		"items": "ab12", "rev": {"$numberLong": "1"}, "updatedAt": {"$date": "2025-01-02T03:04:05Z"}}`
	// An application's.
	appSubscription = `{"_id": 7, "customer": "bob", "plan": "gold"}`
	appUser         = `{"_id": {"$oid": "65f0c0ffee0000000000c001"}, "email": "bob@example.com", "name": "Bob",
		"passwordHash": "$2a$10$abc", "roles": ["admin"], "createdAt": {"$date": "2024-06-01T00:00:00Z"}}`
	appUserWithID = `{"_id": "user_2abc", "userId": "user_2abc", "plan": "pro"}` // a userId, but no sourceUpdatedAt
	appEvent      = `{"_id": 1, "kind": "login", "at": {"$date": "2024-06-01T00:00:00Z"}}`
	appCounter    = `{"_id": "pageviews", "n": 1022}`
	appLease      = `{"_id": "cron", "holder": "x"}`
	appActivity   = `{"_id": {"$oid": "65f0c0ffee0000000000e001"}, "user": "bob", "action": "login"}`
	appRun        = `{"_id": "nightly-1", "job": "export", "at": {"$date": "2024-06-01T00:00:00Z"}}`
)

func docs(t *testing.T, js ...string) []bson.Raw {
	var out []bson.Raw
	for _, j := range js {
		out = append(out, extJSON(t, j))
	}
	return out
}

// TestDecideOwnership_AnotherProgramsDataIsRefused judges databases as
// the survey reads them, without a server: empty ones and usersync's are
// accepted, one whose usersync-named collections hold an application's
// documents or indexes and no mark is refused, naming MONGODB_DATABASE
// and the collection, and one of an older usersync needs migrate.
func TestDecideOwnership_AnotherProgramsDataIsRefused(t *testing.T) {
	users := func(js ...string) collSurvey { return collSurvey{sample: docs(t, js...)} }
	mark := &markDoc{ID: markID, Schema: schemaVersion}
	for _, tc := range []struct {
		name    string
		sv      survey
		want    ownership
		wantErr string // "" for no error; else a collection name the error must name
	}{
		{"no collection", survey{}, ownFresh, ""},
		{"usersync's collections, empty", survey{colls: map[string]collSurvey{
			UsersCollection: {}, EventsCollection: {}, CountersCollection: {}}}, ownFresh, ""},
		{"an application's other collections only", survey{}, ownFresh, ""}, // the survey reads only usersync's names
		{"marked", survey{mark: mark, colls: map[string]collSurvey{UsersCollection: users(usersyncUser)}}, ownMarked, ""},
		{"marked by an older schema", survey{mark: &markDoc{ID: markID, Schema: 1}}, ownOlder, ""},
		{"marked at schema 2, emails folded the Unicode way", survey{mark: &markDoc{ID: markID, Schema: 2}}, ownOlder, ""},
		{"marked by a newer usersync", survey{mark: &markDoc{ID: markID, Schema: schemaVersion + 1}}, 0, "newer usersync"},
		{"an older usersync's, no mark", survey{colls: map[string]collSurvey{
			UsersCollection: users(usersyncUser), EventsCollection: {sample: docs(t, usersyncEvent, usersyncEventNoID)},
			CountersCollection: {sample: docs(t, usersyncCounter)}, LeasesCollection: {sample: docs(t, usersyncLease)},
			ActivityCollection: {sample: docs(t, usersyncBucket)}, RunsCollection: {sample: docs(t, usersyncRun)}}}, ownOlder, ""},
		{"an earlier version's mark", survey{legacyMark: true, colls: map[string]collSurvey{
			UsersCollection: users(usersyncUser), CountersCollection: {sample: docs(t, usersyncCounter, `{"_id": "migration:schema_2", "done": true}`)}}},
			ownOlder, ""},
		{"marked, with usersync's billing", survey{mark: mark, colls: map[string]collSurvey{
			SubscriptionsCollection: {sample: docs(t, usersyncSub)}, SubscriptionItemsCollection: {sample: docs(t, usersyncItem),
				indexes: []indexSpec{{Name: "_id_"}, {Name: "payerKind_1_payerId_1_sourceUpdatedAt_-1"}}},
			PaymentAttemptsCollection: {sample: docs(t, usersyncAttempt), indexes: []indexSpec{{Name: "_id_"},
				{Name: "paymentId_1_sourceUpdatedAt_-1__id_-1"}, {Name: "payerKind_1_payerId_1_sourceUpdatedAt_-1__id_-1"},
				{Name: "sourceUpdatedAt_-1__id_-1"}}},
			BillingPlansCollection: {sample: docs(t, usersyncPlan)}}}, ownMarked, ""},
		{"marked by an earlier version, with an application's subscriptions", survey{mark: mark, colls: map[string]collSurvey{
			SubscriptionsCollection: {sample: docs(t, appSubscription)}}}, 0, `"subscriptions"`},
		{"an application's subscriptions", survey{colls: map[string]collSurvey{SubscriptionsCollection: {sample: docs(t, appSubscription)}}},
			0, `"subscriptions"`},
		{"an application's billing plans", survey{colls: map[string]collSurvey{BillingPlansCollection: {sample: docs(t, appSubscription)}}},
			0, `"billing_plans"`},
		{"an application's users", survey{colls: map[string]collSurvey{UsersCollection: users(appUser)}}, 0, `"users"`},
		{"an application's users after usersync's", survey{colls: map[string]collSurvey{UsersCollection: users(usersyncUser, appUser)}}, 0, `"users"`},
		{"an application's users with a userId", survey{colls: map[string]collSurvey{UsersCollection: users(appUserWithID)}}, 0, "sourceUpdatedAt"},
		{"an earlier version's mark over an application's users", survey{legacyMark: true, colls: map[string]collSurvey{
			UsersCollection: users(appUser), CountersCollection: {sample: docs(t, `{"_id": "migration:schema_2", "done": true}`)}}}, 0, `"users"`},
		{"an application's events", survey{colls: map[string]collSurvey{EventsCollection: {sample: docs(t, appEvent)}}}, 0, `"user_events"`},
		{"an application's counters", survey{colls: map[string]collSurvey{CountersCollection: {sample: docs(t, appCounter)}}}, 0, `"counters"`},
		{"an application's leases", survey{colls: map[string]collSurvey{LeasesCollection: {sample: docs(t, appLease)}}}, 0, `"leases"`},
		{"an application's activity", survey{colls: map[string]collSurvey{ActivityCollection: {sample: docs(t, appActivity)}}}, 0, `"event_activity"`},
		{"an application's runs", survey{colls: map[string]collSurvey{RunsCollection: {sample: docs(t, appRun)}}}, 0, `"reconcile_runs"`},
		{"an application's empty users with its index", survey{colls: map[string]collSurvey{UsersCollection: {indexes: []indexSpec{
			{Name: "_id_"}, {Name: "name_1"}}}}}, 0, "name_1"},
		{"an application's empty users with email_1 not unique", survey{colls: map[string]collSurvey{UsersCollection: {indexes: []indexSpec{
			{Name: "_id_"}, {Name: "email_1"}}}}}, 0, "email_1"},
		{"usersync's indexes of every version", survey{colls: map[string]collSurvey{UsersCollection: {indexes: []indexSpec{
			{Name: "_id_"}, {Name: "userId_1", Unique: true}, {Name: "email_1", Unique: true, Sparse: true},
			{Name: "updatedAt_-1"}, {Name: "deletedAt_1_updatedAt_-1"}}}}}, ownFresh, ""},
		{"an application's users of usersync's shape, with none of usersync's records", survey{colls: map[string]collSurvey{
			UsersCollection: users(usersyncUser), EventsCollection: {}}}, 0, "none of usersync's own records"},
		{"an older usersync's users and its event log", survey{colls: map[string]collSurvey{
			UsersCollection: users(usersyncUser), EventsCollection: {sample: docs(t, usersyncEvent)}}}, ownOlder, ""},
		{"an application's empty users with a validator", survey{colls: map[string]collSurvey{
			UsersCollection: {validator: true, indexes: []indexSpec{{Name: "_id_"}}}}}, 0, "validator"},
		{"an application's view named users", survey{colls: map[string]collSurvey{UsersCollection: {kind: "view"}}}, 0, "view"},
		{"prefixed", survey{prefix: "usersync_", colls: map[string]collSurvey{UsersCollection: users(appUser)}}, 0, `"usersync_users"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.sv.db = "app"
			got, err := decideOwnership(tc.sv)
			switch {
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Errorf("decideOwnership = %v, %v; want %v", got, err, tc.want)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("decideOwnership = %v, %v; want an error saying %s", got, err, tc.wantErr)
			case tc.wantErr != "" && tc.wantErr != "newer usersync":
				for _, want := range []string{`database "app"`, "MONGODB_DATABASE", "database of its own", "USERSYNC_COLLECTION_PREFIX", "nothing was changed"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if !errors.Is(err, models.ErrForeignData) {
					t.Errorf("error %v does not wrap ErrForeignData", err)
				}
				for _, private := range []string{"bob@example.com", "$2a$10", "Bob"} {
					if strings.Contains(err.Error(), private) {
						t.Errorf("error %q shows the document's %q", err, private)
					}
				}
			}
		})
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, ok := range []string{"", "usersync_", "team-a.", "U1"} {
		if err := checkPrefix(ok); err != nil {
			t.Errorf("checkPrefix(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"$x", "a b", "system.", "a\x00", strings.Repeat("a", 65)} {
		if err := checkPrefix(bad); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("checkPrefix(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}
