package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	stdsync "sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
	"github.com/usersync/usersync/sync"
)

// clerkBody is the user.created fixture of package models as event typ of
// user id at Clerk time updatedAt (Unix ms), with email.
func clerkBody(t *testing.T, typ, id string, updatedAt int64, email string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../models/testdata/user.created.json")
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	env["type"] = typ
	d := env["data"].(map[string]any)
	d["id"], d["updated_at"] = id, updatedAt
	d["email_addresses"].([]any)[0].(map[string]any)["email_address"] = email
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sessionBody is the session.created fixture of package models as a
// session of user id active at activeAt (Unix ms), its user null.
func sessionBody(t *testing.T, id string, activeAt int64) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../models/testdata/session.created.json")
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	d := env["data"].(map[string]any)
	d["user_id"], d["user"], d["last_active_at"], d["created_at"] = id, nil, activeAt, activeAt-1000
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRoundTrips_PerDeliveryKind counts the commands one delivery sends
// through the store, on the path of a webhook (sync.Service.Ingest), and
// prints them per kind of delivery, through a batch (the default, alone
// in it here) and alone (Options.DeliveryBatch 1).
//   - Alone, the floor is the event's insert, the user's conditional
//     upsert and the mark; a duplicate of a processed event is its refused
//     insert and the read of the stored event; a stale event reads the
//     user's state to explain why the write did not go through.
//   - In a batch, the floor is the find that tells duplicates, the
//     upsert, and the insert of the event processed already; a duplicate
//     is the find alone; a stale event leaves the batch once its write is
//     refused (its event stored) and goes on alone: the write again, the
//     read, the mark.
//   - A new user reads back the activity of its session events stored
//     before it: one find (one for all the new users of a batch).
//   - A sign-in (a session event of a known user) is, in a batch, the
//     find of its event, the find of the batch's session users, its
//     activity's write in the batch's users command and the insert; an
//     older activity writes nothing; alone, the insert, the activity's
//     write and the mark.
func TestRoundTrips_PerDeliveryKind(t *testing.T) {
	ctx := context.Background()
	var mu stdsync.Mutex
	var db string
	var cmds []string
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.DatabaseName == db {
			cmds = append(cmds, e.CommandName)
		}
	}}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		c := cmds
		cmds = nil
		return c
	}
	const t0 = int64(1_760_000_000_000)
	tests := []struct {
		name   string
		before [][2]string // deliveries first: event id, body kind
		id     string
		body   string
		want   []string
	}{
		{"new user", nil, "msg_a", "created", []string{"find", "update", "find", "insert"}},
		{"update", [][2]string{{"msg_a", "created"}}, "msg_b", "updated", []string{"find", "update", "insert"}},
		{"duplicate", [][2]string{{"msg_a", "created"}}, "msg_a", "created", []string{"find"}},
		{"stale", [][2]string{{"msg_a", "created"}, {"msg_b", "updated"}}, "msg_c", "old",
			[]string{"find", "update", "insert", "update", "find", "update"}},
		{"new user alone", nil, "msg_a", "created", []string{"insert", "update", "find", "update"}},
		{"update alone", [][2]string{{"msg_a", "created"}}, "msg_b", "updated", []string{"insert", "update", "update"}},
		{"duplicate alone", [][2]string{{"msg_a", "created"}}, "msg_a", "created", []string{"insert", "find"}},
		{"stale alone", [][2]string{{"msg_a", "created"}, {"msg_b", "updated"}}, "msg_c", "old", []string{"insert", "update", "find", "update"}},
		{"sign-in", [][2]string{{"msg_a", "created"}}, "msg_s", "session", []string{"find", "find", "update", "insert"}},
		{"older sign-in", [][2]string{{"msg_a", "created"}, {"msg_s", "session"}}, "msg_s0", "old session", []string{"find", "find", "insert"}},
		{"sign-in alone", [][2]string{{"msg_a", "created"}}, "msg_s", "session", []string{"insert", "update", "update"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := mongo.Options{Monitor: mon}
			if strings.HasSuffix(tc.name, " alone") {
				o.DeliveryBatch = 1
			}
			s := mongotest.OpenWith(t, o)
			mu.Lock()
			db = s.Database().Name()
			mu.Unlock()
			svc := sync.New(s.Events(), s, nil)
			bodies := map[string][]byte{
				"created": clerkBody(t, "user.created", "user_rt", t0, "rt@example.com"),
				"updated": clerkBody(t, "user.updated", "user_rt", t0+1000, "rt2@example.com"),
				"old":     clerkBody(t, "user.updated", "user_rt", t0-1000, "rt0@example.com"),
				// Sign-ins whose user is null: their activity alone.
				"session":     sessionBody(t, "user_rt", t0+5000),
				"old session": sessionBody(t, "user_rt", t0+4000),
			}
			deliver := func(id, kind string) sync.Result {
				t.Helper()
				ce, err := models.DecodeEvent(bodies[kind])
				if err != nil {
					t.Fatal(err)
				}
				res, err := svc.Ingest(ctx, sync.Delivery{EventID: id, Signature: "v1,x", Body: bodies[kind], Event: ce})
				if err != nil {
					t.Fatalf("deliver %s: %v", id, err)
				}
				return res
			}
			for _, d := range tc.before {
				deliver(d[0], d[1])
			}
			take()
			res := deliver(tc.id, tc.body)
			got := take()
			fmt.Printf("round trips per delivery: %-16s %d %v (%s, outcome %s)\n", tc.name, len(got), got, res.Status, res.Outcome)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s: commands %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}
