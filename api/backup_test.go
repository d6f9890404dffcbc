package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

// TestBackup_TheRouteWritesACopyOfTheEmbeddedStore: POST
// /v1/admin/backup starts a backup (202) that GET follows to done, with
// the file in the data dir's backups directory, a store of its own; it is
// for admins; without a store that backs up (MongoDB) both answer 501.
func TestBackup_TheRouteWritesACopyOfTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("backs up the embedded store")
	}
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(ctx) })
	h := newHarness(t, func(o *harnessOptions) { o.store = store })
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_backedup", UpdatedAt: t0, Email: "b@example.org"}))
	if r := h.postAs("/v1/admin/backup", testAdminKey); r.Code != http.StatusNotImplemented {
		t.Errorf("POST /v1/admin/backup without a store that backs up = %s, want 501", r)
	}

	e, err := api.New(api.Config{Logger: repotest.Discard(), WebhookSecrets: []string{testSecret},
		APIKeys: []string{testAPIKey}, AdminKeys: []string{testAdminKey}, DB: store, Backup: store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	h.url = srv.URL
	if r := h.postAs("/v1/admin/backup", testAPIKey); r.Code != http.StatusForbidden {
		t.Errorf("POST /v1/admin/backup with an API key = %s, want 403", r)
	}
	if r := h.get("/v1/admin/backup", testAdminKey); r.Code != http.StatusOK || r.JSON(t)["state"] != "none" {
		t.Errorf("GET /v1/admin/backup before any = %s, want none", r)
	}
	if r := h.postAs("/v1/admin/backup", testAdminKey); r.Code != http.StatusAccepted {
		t.Fatalf("POST /v1/admin/backup = %s, want 202", r)
	}
	var state map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		state = h.get("/v1/admin/backup", testAdminKey).JSON(t)
		if state["state"] != "running" || time.Now().After(deadline) {
			break
		}
	}
	file, _ := state["file"].(string)
	if state["state"] != "done" || file == "" || state["bytes"].(float64) <= 0 || state["finishedAt"] == nil {
		t.Fatalf("the backup = %v, want done with its file", state)
	}
	copied, err := os.ReadFile(filepath.Join(dir, sqlite.BackupDir, file))
	if err != nil {
		t.Fatal(err)
	}
	restoreDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(restoreDir, sqlite.FileName), copied, 0o600); err != nil {
		t.Fatal(err)
	}
	restored, err := sqlite.Open(ctx, restoreDir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close(ctx)
	if u, err := restored.Users().Get(ctx, "user_backedup"); err != nil || u.Email != "b@example.org" {
		t.Errorf("the user in the backup = %+v, %v", u, err)
	}
}
