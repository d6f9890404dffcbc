package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
)

// TestServe_CountsWebhooksForTheConsoleAndFlushesThemAtShutdown runs
// serve on a store of the test's, delivers a signed webhook, and stops:
// the console answers at /admin, and the counts serve kept in memory are
// in the store's activity buckets once it has stopped.
func TestServe_CountsWebhooksForTheConsoleAndFlushesThemAtShutdown(t *testing.T) {
	const secret, adminKey = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "usk_console_admin"
	store, env := repotest.NewStoreEnv(t)
	env["USERSYNC_ADDR"] = "127.0.0.1:0"
	env["CLERK_WEBHOOK_SECRET"], env["USERSYNC_ADMIN_KEYS"], env["USERSYNC_API_KEYS"] = secret, adminKey, "usk_console_api_key"
	started := time.Now().UTC()
	base, _, stop := start(t, env)

	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is Svix's retry: received once
		sig, err := wh.Sign("msg_console", time.Now(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
		req.Header.Set("svix-id", "msg_console")
		req.Header.Set("svix-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set("svix-signature", sig)
		if code, body := send(t, req); code != http.StatusOK {
			t.Fatalf("webhook: %d %s", code, body)
		}
	}
	page, _ := http.NewRequest(http.MethodGet, base+"/admin", nil)
	if code, _ := send(t, page); code != http.StatusOK {
		t.Errorf("GET /admin = %d, want 200", code)
	}
	runs, _ := http.NewRequest(http.MethodGet, base+"/v1/reconcile/runs", nil)
	runs.Header.Set("Authorization", "Bearer "+adminKey)
	if code, body := send(t, runs); code != http.StatusOK {
		t.Errorf("GET /v1/reconcile/runs = %d %s, want 200", code, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v", err)
	}

	buckets, err := store.Activity().Buckets(context.Background(), models.ActivityMinute,
		started.Truncate(time.Minute), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, b := range buckets {
		for k, n := range b.Counts {
			got[k] += n
		}
	}
	if len(got) != 2 || got[models.ActivityReceived] != 1 || got[models.ActivityApplied] != 1 {
		t.Errorf("activity after serve stopped = %v, want 1 received and 1 applied", got)
	}
}
