package api_test

import (
	"context"
	"net/http"
	stdsync "sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"

	repository "github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/repotest"
)

// commandLog records the commands the driver sends to one database.
type commandLog struct {
	db    string
	mu    stdsync.Mutex
	names []string
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if e.DatabaseName == l.db { // not the driver's own traffic, such as endSessions on admin
				l.names = append(l.names, e.CommandName)
			}
		},
	}
}

// take returns the commands recorded since the last take.
func (l *commandLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.names
	l.names = nil
	return names
}

// newCountingHarness is a harness whose store reports every command it
// sends to its database.
func newCountingHarness(t *testing.T) (*harness, *commandLog) {
	t.Helper()
	log := &commandLog{}
	store := repotest.NewStoreAt(t, repotest.URI(t), repository.Options{Monitor: log.monitor()})
	log.mu.Lock()
	log.db = store.Database().Name()
	log.mu.Unlock()
	h := newHarness(t, func(o *harnessOptions) { o.store = store })
	log.take() // index creation
	return h, log
}

// TestWebhook_RoundTripsPerEvent counts the engine round trips of one
// webhook. A new event is stored, applied, marked processed and counted
// (on the embedded engine the user and the event are read by _id before
// they are written); a duplicate is refused by the unique index and the
// stored event read back by _id.
func TestWebhook_RoundTripsPerEvent(t *testing.T) {
	const uid = "user_rt"
	created := userBody(t, "user.created", clerkUser{ID: uid, UpdatedAt: t0, Email: "rt@example.com", First: "R"})
	updated := userBody(t, "user.updated", clerkUser{ID: uid, UpdatedAt: t0 + 1000, Email: "rt2@example.com", First: "T"})
	tests := []struct {
		name string
		// before delivers what the store holds first; it returns the
		// delivery to measure.
		before    func(h *harness) (id string, body []byte)
		max       int // on MongoDB; on the embedded engine, maxSerial
		maxSerial int
		wantDup   bool
	}{
		{"new user.created", func(*harness) (string, []byte) {
			return newID(), created
		}, 4, 5, false},
		{"user.updated of a known user", func(h *harness) (string, []byte) {
			h.mustDeliver(newID(), created)
			return newID(), updated
		}, 4, 6, false},
		{"duplicate of a processed event", func(h *harness) (string, []byte) {
			id := newID()
			h.mustDeliver(id, created)
			return id, created
		}, 2, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, log := newCountingHarness(t)
			id, body := tc.before(h)
			log.take()

			// Svix signs every attempt afresh.
			r := h.post(body, sign(t, testSecret, id, time.Now(), body))
			cmds := log.take()
			if r.Code != http.StatusOK {
				t.Fatalf("delivery: %s", r)
			}
			if res := r.JSON(t); res["status"] != "processed" || res["duplicate"] != tc.wantDup {
				t.Errorf("answer = %v, want processed with duplicate=%v", res, tc.wantDup)
			}
			t.Logf("%d round trips: %v", len(cmds), cmds)
			if len(cmds) == 0 {
				t.Fatal("no command seen: the monitor is not counting")
			}
			max := tc.max
			if !repotest.UsesMongoDB() {
				max = tc.maxSerial
			}
			if len(cmds) > max {
				t.Errorf("%d round trips %v, want at most %d", len(cmds), cmds, max)
			}
		})
	}
}
