package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	t.Parallel()
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

// TestServe_TheConsolesDryRunCoversEveryKind starts the console's dry run
// on serve with a Clerk client: it reads users, organizations and
// memberships, reports each kind's counts and lists the organization and
// membership a run would delete, and deletes nothing.
func TestServe_TheConsolesDryRunCoversEveryKind(t *testing.T) {
	t.Parallel()
	const adminKey = "usk_console_admin"
	e := newBackfillEnv(t, someUsers(t, 1))
	e.clerkHas(t, []int{0}, []membership{{0, 0, 0}})
	e.created(t, 0)
	e.orgCreated(t, 1)                      // deleted in Clerk
	e.memberCreated(t, membership{1, 1, 0}) // with it
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_ADMIN_KEYS": adminKey, "USERSYNC_API_KEYS": "usk_console_api_key",
	}
	for k, v := range e.env {
		env[k] = v
	}
	base, _, stop := start(t, env)
	defer func() {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}()
	call := func(method string) (int, string) {
		req, _ := http.NewRequest(method, base+"/v1/reconcile/dry-run", nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		return send(t, req)
	}
	if code, body := call(http.MethodPost); code != http.StatusAccepted {
		t.Fatalf("POST /v1/reconcile/dry-run = %d %s, want 202", code, body)
	}
	type kind struct {
		Clerk, Deleted int
		Local          *int
		Complete       bool
	}
	var st struct {
		State  string
		Listed int
		Report *struct {
			ClerkUsers                        int
			Users, Organizations, Memberships *kind
		}
		Changes []struct{ Kind, ID, UserID, Action string }
	}
	for deadline := time.Now().Add(30 * time.Second); st.State != "done"; time.Sleep(20 * time.Millisecond) {
		code, body := call(http.MethodGet)
		if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
			t.Fatalf("GET /v1/reconcile/dry-run = %d %s (%v)", code, body, err)
		}
		if st.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("dry run: %s", body)
		}
	}
	r := st.Report
	if st.Listed != 3 || r == nil || r.ClerkUsers != 1 || r.Users == nil || r.Users.Clerk != 1 || r.Organizations == nil ||
		r.Organizations.Clerk != 1 || r.Organizations.Deleted != 1 || r.Organizations.Local == nil || *r.Organizations.Local != 1 ||
		!r.Organizations.Complete || r.Memberships == nil || r.Memberships.Clerk != 1 || r.Memberships.Deleted != 1 {
		t.Errorf("dry run listed %d; report %+v (users %+v, organizations %+v, memberships %+v); want 3 listed, 1 of each kind in Clerk, "+
			"1 local organization and 1 organization and 1 membership to delete", st.Listed, r, r.Users, r.Organizations, r.Memberships)
	}
	want := map[string]bool{"organization " + orgID(1) + " would_delete": true, "membership " + memberID(1) + " would_delete": true}
	for _, c := range st.Changes {
		if c.Kind == "user" && c.UserID != c.ID {
			t.Errorf("a user's change %+v has not its id as userId", c)
		}
		delete(want, c.Kind+" "+c.ID+" "+c.Action)
	}
	if len(want) != 0 {
		t.Errorf("changes %+v lack %v", st.Changes, want)
	}
	if !e.orgActive(t, 1) || !e.memberActive(t, 1) {
		t.Errorf("after a dry run: organization 1 active %v, membership 1 %v; want both", e.orgActive(t, 1), e.memberActive(t, 1))
	}
}
