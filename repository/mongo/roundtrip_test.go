package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// TestRoundTrips_PerDeliveryKind counts the commands one delivery sends
// through the store, on the path of a webhook (sync.Service.Ingest: store
// the event, apply it, mark it), and prints them per kind of delivery.
// The floor is the event's insert, the user's conditional upsert and the
// mark; a duplicate of a processed event is its refused insert and the
// read of the stored event; a stale
// event reads the user's state to explain why the write did not go
// through.
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
		{"new user", nil, "msg_a", "created", []string{"insert", "update", "update"}},
		{"update", [][2]string{{"msg_a", "created"}}, "msg_b", "updated", []string{"insert", "update", "update"}},
		{"duplicate", [][2]string{{"msg_a", "created"}}, "msg_a", "created", []string{"insert", "find"}},
		// The batch's conditional write is refused; the delivery goes on
		// alone and writes again before it reads what explains it.
		{"stale", [][2]string{{"msg_a", "created"}, {"msg_b", "updated"}}, "msg_c", "old", []string{"insert", "update", "update", "find", "update"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mongotest.OpenWith(t, mongo.Options{Monitor: mon})
			mu.Lock()
			db = s.Database().Name()
			mu.Unlock()
			svc := sync.New(s.Events(), s, nil)
			bodies := map[string][]byte{
				"created": clerkBody(t, "user.created", "user_rt", t0, "rt@example.com"),
				"updated": clerkBody(t, "user.updated", "user_rt", t0+1000, "rt2@example.com"),
				"old":     clerkBody(t, "user.updated", "user_rt", t0-1000, "rt0@example.com"),
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
			fmt.Printf("round trips per delivery: %-10s %d %v (%s, outcome %s)\n", tc.name, len(got), got, res.Status, res.Outcome)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%s: commands %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}
