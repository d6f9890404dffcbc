package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	gosync "sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
)

// TestBackfillAndReconcile_TheChangesTheyApplyReachTheEndpoints: a
// backfill's and a reconcile's changes (a webhook outage repaired) are
// recorded by the commands and sent by a dispatcher, from where they came.
func TestBackfillAndReconcile_TheChangesTheyApplyReachTheEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newBackfillEnv(t, someUsers(t, 3))
	secret, _ := outbound.NewSecret()
	var mu gosync.Mutex
	got := map[string][]string{} // user id → the types and origins received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, _ := svix.NewWebhook(secret)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
		}
		var m struct {
			Type   string `json:"type"`
			Origin string `json:"origin"`
			Data   struct {
				UserID string `json:"userId"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		got[m.Data.UserID] = append(got[m.Data.UserID], m.Type+" from "+m.Origin)
		mu.Unlock()
	}))
	defer srv.Close()
	now := time.Now().UTC()
	if err := e.store.Outbound().PutEndpoint(ctx, models.Endpoint{ID: "ep_app", URL: srv.URL, Enabled: true, Secret: secret,
		EventTypes: []string{"user.*"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	e.mustCommand(t, "backfill")
	e.clerk.Remove(userID(1)) // deleted in Clerk while webhooks were down
	e.mustReconcile(t)
	d := outbound.NewDispatcher(outbound.Options{Store: e.store, Render: api.Renderer(e.store, nil, 0), Owner: "test",
		Sender: outbound.NewSender(outbound.SenderOptions{AllowPrivate: true})})
	if err := d.Step(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, want := range [][]string{
		{"user.updated from backfill"},
		{"user.deleted from reconcile"}, // the newest state in place of the backfill's, not sent yet
		{"user.updated from backfill"},
	} {
		if g := got[userID(i)]; len(g) != len(want) || g[0] != want[0] {
			t.Errorf("user %d: got %v, want %v", i, g, want)
		}
	}
}
