package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// olderUser is a user as an older usersync wrote it: a random _id, and a
// field this version does not know, which a migration must keep.
func olderUser(uid string, at time.Time) bson.D {
	return bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "userId", Value: uid}, {Key: "email", Value: uid + "@example.com"},
		{Key: "displayName", Value: "Old " + uid}, {Key: "metadata", Value: bson.D{{Key: "plan", Value: "pro"}}},
		{Key: "createdAt", Value: at}, {Key: "updatedAt", Value: at}, {Key: "deletedAt", Value: nil},
		{Key: "sourceUpdatedAt", Value: at.Add(-time.Hour)}, {Key: "lastEventId", Value: "msg_" + uid},
		{Key: "legacyField", Value: bson.D{{Key: "kept", Value: int32(7)}}},
	}
}

// olderDatabase gives a new database the data of an older usersync: n
// users with random _ids, two processed events, no mark.
func olderDatabase(t *testing.T, n int) *mongo.Store {
	t.Helper()
	ctx := context.Background()
	s := mongotest.Unprepared(t, mongotest.URI(t), mongotest.DatabaseName(), mongo.Options{})
	at := time.Now().UTC().Truncate(time.Millisecond)
	var docs []any
	for i := range n {
		docs = append(docs, olderUser(fmt.Sprintf("user_old_%02d", i), at))
	}
	if _, err := s.Database().Collection(mongo.UsersCollection).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	for i, o := range []models.Outcome{models.OutcomeApplied, models.OutcomeStale} {
		if _, err := s.Database().Collection(mongo.EventsCollection).InsertOne(ctx, bson.D{
			{Key: "_id", Value: bson.NewObjectID()}, {Key: "eventId", Value: fmt.Sprintf("msg_old_%d", i)},
			{Key: "type", Value: "user.updated"}, {Key: "eventType", Value: "updated"},
			{Key: "status", Value: models.StatusProcessed}, {Key: "outcome", Value: o},
			{Key: "receivedAt", Value: at}, {Key: "processedAt", Value: at}, {Key: "attempts", Value: 1},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// usersByUserID reads every user document, by userId.
func usersByUserID(t *testing.T, db *driver.Database) map[string]bson.Raw {
	t.Helper()
	cur, err := db.Collection(mongo.UsersCollection).Find(context.Background(), bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(context.Background())
	out := map[string]bson.Raw{}
	for cur.Next(context.Background()) {
		uid, _ := cur.Current.Lookup("userId").StringValueOK()
		if _, dup := out[uid]; dup {
			t.Errorf("user %s twice", uid)
		}
		out[uid] = append(bson.Raw(nil), cur.Current...)
	}
	return out
}

// withoutID is raw without its _id, as extended JSON.
func withoutID(t *testing.T, raw bson.Raw) string {
	t.Helper()
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	var rest bson.D
	for _, e := range d {
		if e.Key != "_id" {
			rest = append(rest, e)
		}
	}
	b, _ := bson.MarshalExtJSON(rest, true, false)
	return string(b)
}

// saysOnlyWould reports whether a migration's summary speaks of each
// thing it lists as something it would do, not as done: the summary of a
// dry run (the caller says that it was one).
func saysOnlyWould(summary string) bool {
	for _, part := range strings.Split(summary, ", ") {
		if !strings.HasPrefix(part, "would ") && part != "nothing done" {
			return false
		}
	}
	return true
}

// TestMigrate_ReKeysAnOlderDatabaseKeepingEveryField runs migrate on an
// older usersync's data: Prepare refuses it first, naming migrate and
// creating nothing; the dry run says what migrate will do and changes
// nothing; migrate gives every user its derived _id with every other
// field as it was, counts the processed events, marks the database, and
// a second run has nothing to do.
func TestMigrate_ReKeysAnOlderDatabaseKeepingEveryField(t *testing.T) {
	ctx := context.Background()
	const n = 25
	s := olderDatabase(t, n)
	before := usersByUserID(t, s.Database())
	snap := snapshot(t, s.Database())

	if err := s.Prepare(ctx); !errors.Is(err, models.ErrNeedsMigration) || !strings.Contains(err.Error(), "usersync migrate") {
		t.Fatalf("Prepare of an older database = %v, want ErrNeedsMigration naming usersync migrate", err)
	}
	sameSnapshot(t, "Prepare", snapshot(t, s.Database()), snap)

	rep, err := s.Migrate(ctx, true)
	if err != nil || rep.Changed != n || !saysOnlyWould(rep.Summary) ||
		!strings.Contains(rep.Summary, fmt.Sprintf("would re-key %d of %d users", n, n)) {
		t.Errorf("dry run = %+v, %v; want %d users to re-key, nothing changed", rep, err, n)
	}
	sameSnapshot(t, "the dry run", snapshot(t, s.Database()), snap)

	rep, err = s.Migrate(ctx, false)
	if err != nil || rep.Changed != n {
		t.Fatalf("Migrate = %+v, %v; want %d users re-keyed", rep, err, n)
	}
	after := usersByUserID(t, s.Database())
	if len(after) != n {
		t.Errorf("%d users after, want %d", len(after), n)
	}
	for uid, old := range before {
		got, ok := after[uid]
		if !ok {
			t.Errorf("user %s lost", uid)
			continue
		}
		if id, _ := got.Lookup("_id").ObjectIDOK(); id != mongo.DocIDForTest(uid) {
			t.Errorf("user %s has _id %s, want the derived one", uid, id.Hex())
		}
		if g, w := withoutID(t, got), withoutID(t, old); g != w {
			t.Errorf("user %s changed:\n got  %s\n want %s", uid, g, w)
		}
	}
	if err := s.Prepare(ctx); err != nil {
		t.Errorf("Prepare after migrate: %v", err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByOutcome[models.OutcomeApplied] != 1 || st.ByOutcome[models.OutcomeStale] != 1 {
		t.Errorf("Stats after migrate = %+v, %v; want the two processed events counted", st, err)
	}
	if rep, err := s.Migrate(ctx, false); err != nil || rep.Changed != 0 {
		t.Errorf("Migrate again = %+v, %v; want nothing to do", rep, err)
	}
}

// TestMigrate_FinishesWhatAStoppedRunLeftAside leaves the database as a
// migration stopped at each step would: a user copied aside and still in
// users, and one copied aside and removed from users. The next run loses
// neither.
func TestMigrate_FinishesWhatAStoppedRunLeftAside(t *testing.T) {
	ctx := context.Background()
	s := olderDatabase(t, 3)
	users := s.Database().Collection(mongo.UsersCollection)
	aside := s.Database().Collection("users_rekey")
	before := usersByUserID(t, s.Database())
	for _, uid := range []string{"user_old_00", "user_old_01"} {
		if _, err := aside.InsertOne(ctx, before[uid]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := users.DeleteOne(ctx, bson.D{{Key: "_id", Value: before["user_old_01"].Lookup("_id")}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Migrate(ctx, false)
	if err != nil || rep.Changed != 3 || !strings.Contains(rep.Summary, "2 left aside by a stopped run") {
		t.Fatalf("Migrate = %+v, %v; want the 2 aside finished and the third re-keyed", rep, err)
	}
	after := usersByUserID(t, s.Database())
	for uid, old := range before {
		if got, ok := after[uid]; !ok || withoutID(t, got) != withoutID(t, old) {
			t.Errorf("user %s = %s, want %s", uid, got, old)
		}
	}
	if names, _ := s.Database().ListCollectionNames(ctx, bson.D{{Key: "name", Value: "users_rekey"}}); len(names) != 0 {
		t.Errorf("users_rekey left after the migration")
	}
}

// TestMigrate_StopsAtAUserDocumentWithoutUserID: a user document without
// a userId among usersync's (past what the first look samples) stops the
// migration with an error naming it; it is left as it was, and the run
// ends (an earlier version gave such a document a new random _id on each
// pass, for ever, deleting it each time).
func TestMigrate_StopsAtAUserDocumentWithoutUserID(t *testing.T) {
	ctx := context.Background()
	s := olderDatabase(t, 30)
	odd := bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "email", Value: "odd@example.com"},
		{Key: "sourceUpdatedAt", Value: time.Now().UTC().Truncate(time.Millisecond)}}
	if _, err := s.Database().Collection(mongo.UsersCollection).InsertOne(ctx, odd); err != nil {
		t.Fatal(err)
	}
	oddID := odd[0].Value.(bson.ObjectID)
	for _, dryRun := range []bool{true, false} {
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			_, err = s.Migrate(ctx, dryRun)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("Migrate(dryRun %t) does not end", dryRun)
		}
		if !errors.Is(err, models.ErrForeignData) || !strings.Contains(err.Error(), oddID.Hex()) || !strings.Contains(err.Error(), "no userId") {
			t.Errorf("Migrate(dryRun %t) = %v; want ErrForeignData naming the document %s", dryRun, err, oddID.Hex())
		}
		if strings.Contains(fmt.Sprint(err), "odd@example.com") {
			t.Errorf("error %q shows the document's email", err)
		}
	}
	var got bson.D
	if err := s.Database().Collection(mongo.UsersCollection).FindOne(ctx, bson.D{{Key: "_id", Value: oddID}}).Decode(&got); err != nil ||
		fmt.Sprint(got) != fmt.Sprint(odd) {
		t.Errorf("the document without userId = %v, %v; want it as it was, %v", got, err, odd)
	}
}

// TestMigrate_RecomputesTheEmailsOfASchema2Database: a database of schema
// 2 folded emails the Unicode way, so a look-alike written with the Kelvin
// sign took "kate@example.com" from its owner. serve refuses it, naming
// migrate; migrate recomputes every active user's email from its last
// applied payload, the newest claim of an email winning it.
func TestMigrate_RecomputesTheEmailsOfASchema2Database(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	payload := func(user, email string) []byte {
		return []byte(`{"type":"user.updated","data":{"id":"` + user + `","primary_email_address_id":"idn_1",` +
			`"email_addresses":[{"id":"idn_1","email_address":"` + email + `"}]}}`)
	}
	for i, u := range []struct{ id, email, stored string }{
		{"user_owner", "Kate@example.com", ""},
		{"user_kelvin", "\u212Aate@example.com", "kate@example.com"},
		{"user_plain", "Plain@example.com", "plain@example.com"},
	} {
		event := "msg_" + u.id
		ev := models.Event{EventID: event, Type: "user.updated", EventType: models.EventUpdated, UserID: u.id,
			RawBody: payload(u.id, u.email), Source: models.SourceClerk, ReceivedAt: at, Status: models.StatusStored}
		if _, _, err := s.Events().Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ch := models.UserChange{UserID: u.id, EventID: event, SourceTime: at.Add(time.Duration(i) * time.Second),
			DisplayName: u.id, Metadata: []byte(`{}`)}
		if _, err := s.Users().Apply(ctx, ch, at); err != nil {
			t.Fatal(err)
		}
		if u.stored != "" {
			// As schema 2 stored it.
			if _, err := s.Database().Collection(mongo.UsersCollection).UpdateOne(ctx, bson.D{{Key: "userId", Value: u.id}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "email", Value: u.stored}}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.Database().Collection(mongo.MetaCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "usersync"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "schema", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); !errors.Is(err, models.ErrNeedsMigration) {
		t.Fatalf("Prepare of a schema 2 database = %v, want ErrNeedsMigration", err)
	}
	if rep, err := s.Migrate(ctx, true); err != nil || rep.Changed != 2 {
		t.Errorf("dry run = %+v, %v; want 2 emails to recompute", rep, err)
	}
	rep, err := s.Migrate(ctx, false)
	if err != nil || rep.Changed != 2 || strings.Contains(rep.Summary, "re-key") {
		t.Fatalf("Migrate = %+v, %v; want 2 emails recomputed and nothing re-keyed", rep, err)
	}
	for id, want := range map[string]string{"user_owner": "kate@example.com", "user_kelvin": "\u212Aate@example.com", "user_plain": "plain@example.com"} {
		if u, err := s.Users().Get(ctx, id); err != nil || u.Email != want {
			t.Errorf("%s after migrate: %q, %v; want %q", id, u.Email, err, want)
		}
	}
	if err := s.Prepare(ctx); err != nil {
		t.Errorf("Prepare after migrate: %v", err)
	}
	if rep, err := s.Migrate(ctx, false); err != nil || rep.Changed != 0 {
		t.Errorf("Migrate again = %+v, %v; want nothing to do", rep, err)
	}
}

// TestMigrate_FillsClerksCreationTimeOfUsersWrittenBefore: on a schema 2
// database, whose users have no sourceCreatedAt, migrate fills it from
// the payload of each user's last applied event, as the embedded store's
// upgrade does (milliseconds or seconds), and leaves a user whose payload
// has none, or whose body was erased, without; updatedAt does not move.
func TestMigrate_FillsClerksCreationTimeOfUsersWrittenBefore(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	at := time.Now().UTC().Truncate(time.Millisecond)
	users := s.Database().Collection(mongo.UsersCollection)
	for _, u := range []struct{ id, created string }{
		{"user_ms", `,"created_at":1654012591514`},
		{"user_s", `,"created_at":1654012591`},
		{"user_none", ``},
		{"user_text", `,"created_at":"yesterday"`},
	} {
		event := "msg_" + u.id
		body := []byte(`{"type":"user.updated","data":{"id":"` + u.id + `","updated_at":1654012591835` + u.created + `}}`)
		if _, _, err := s.Events().Record(ctx, models.Event{EventID: event, Type: "user.updated", EventType: models.EventUpdated,
			UserID: u.id, RawBody: body, Source: models.SourceClerk, ReceivedAt: at, Status: models.StatusStored}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Users().Apply(ctx, models.UserChange{UserID: u.id, EventID: event, SourceTime: at, DisplayName: u.id,
			Metadata: []byte(`{}`)}, at); err != nil {
			t.Fatal(err)
		}
	}
	// As schema 2 left them: no sourceCreatedAt.
	if _, err := users.UpdateMany(ctx, bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: "sourceCreatedAt", Value: ""}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Database().Collection(mongo.MetaCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "usersync"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "schema", Value: 2}}}}); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Migrate(ctx, true); err != nil || !strings.Contains(rep.Summary, "would fill Clerk's creation time of 2 users") {
		t.Errorf("dry run = %+v, %v; want 2 creation times to fill", rep, err)
	}
	if rep, err := s.Migrate(ctx, false); err != nil || !strings.Contains(rep.Summary, "filled Clerk's creation time of 2 users") {
		t.Fatalf("Migrate = %+v, %v; want 2 creation times filled", rep, err)
	}
	ms, sec := time.UnixMilli(1654012591514).UTC(), time.Unix(1654012591, 0).UTC()
	for id, want := range map[string]*time.Time{"user_ms": &ms, "user_s": &sec, "user_none": nil, "user_text": nil} {
		u, err := s.Users().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := u.Profile.SourceCreatedAt
		if (got == nil) != (want == nil) || got != nil && !got.Equal(*want) {
			t.Errorf("%s: sourceCreatedAt %v, want %v", id, got, want)
		}
		if !u.UpdatedAt.Equal(at) {
			t.Errorf("%s: updatedAt moved to %v", id, u.UpdatedAt)
		}
	}
}
