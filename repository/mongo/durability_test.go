package mongo_test

import (
	"context"
	stdsync "sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// TestOpen_WritesWaitForAMajorityAndEveryOperationHasADeadline looks at
// the commands the driver sends: writes carry w: "majority" unless the URI
// sets w, and an operation started without a deadline carries one
// (maxTimeMS) all the same.
func TestOpen_WritesWaitForAMajorityAndEveryOperationHasADeadline(t *testing.T) {
	for _, tc := range []struct {
		w     string // the URI's w, merged into its query; "" leaves it as it is
		wantW any
	}{
		{"", "majority"},
		{"1", int32(1)},
	} {
		var mu stdsync.Mutex
		cmds := map[string]bson.Raw{}
		mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
			mu.Lock()
			defer mu.Unlock()
			cmds[e.CommandName] = e.Command
		}}
		uri := mongotest.URI(t)
		if tc.w != "" {
			uri = mongotest.WithOption(uri, "w", tc.w)
		} else if mongotest.HasOption(uri, "w") {
			t.Skip("MONGODB_URI sets w: the default cannot be seen")
		}
		s := mongotest.OpenAt(t, uri, mongo.Options{Monitor: mon})
		ctx := context.Background() // no deadline of its own
		ev, _, err := s.Events().Record(ctx, newEvent("msg_wc", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Events().Get(ctx, ev.ID); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		// Record stores an event with an insert.
		insert, find := cmds["insert"], cmds["find"]
		mu.Unlock()
		wc, err := insert.LookupErr("writeConcern", "w")
		var got any
		if err == nil {
			if s, ok := wc.StringValueOK(); ok {
				got = s
			} else {
				got = wc.Int32()
			}
		}
		if got != tc.wantW {
			t.Errorf("URI w=%q: the store of an event: writeConcern.w = %v, want %v", tc.w, got, tc.wantW)
		}
		if _, err := find.LookupErr("maxTimeMS"); err != nil {
			t.Errorf("URI w=%q: a find without a deadline carries no maxTimeMS: %s", tc.w, find)
		}
	}
}
