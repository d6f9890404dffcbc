package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

// damagedStore writes users into an embedded store, closes it, lets
// damage change the file's bytes, and opens it again for a harness.
func damagedStore(t *testing.T, damage func(file []byte)) *harness {
	t.Helper()
	if repotest.UsesMongoDB() {
		t.Skip("damages the embedded store's file")
	}
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *harnessOptions) { o.store = store })
	for i := range 40 {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_%02d", i), UpdatedAt: t0,
			Meta: map[string]any{"note": fmt.Sprintf("MARK-%02d-%s", i, strings.Repeat("x", 200))}}))
	}
	if err := store.Close(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sqlite.FileName)
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage(file)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err = sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(ctx) })
	return newHarness(t, func(o *harnessOptions) { o.store = store })
}

// TestStore_DamagedPagesAre503AndNotReady: a page SQLite finds damaged
// (SQLITE_CORRUPT) and a stored value that is not what was written (JSON
// broken inside a record, which SQLite's checks do not see) answer the
// documented 503, never a 500, and /readyz reports the file damaged from
// then on.
func TestStore_DamagedPagesAre503AndNotReady(t *testing.T) {
	t.Parallel()
	for name, damage := range map[string]func(file []byte){
		"a damaged page": func(file []byte) {
			at := bytes.Index(file, []byte("MARK-20-"))
			page := at / 4096 * 4096
			copy(file[page:page+16], bytes.Repeat([]byte{0xff}, 16))
		},
		"a damaged value": func(file []byte) {
			at := bytes.Index(file, []byte("MARK-20-"))
			copy(file[at:], `"}}}}}}}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			h := damagedStore(t, damage)
			if r := h.get("/readyz", ""); r.Code != http.StatusOK {
				t.Fatalf("/readyz before anything read the damage = %s", r)
			}
			for _, path := range []string{"/v1/users/user_20", "/v1/users?limit=100"} {
				if r := h.get(path, testAPIKey); r.Code != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "damaged") {
					t.Errorf("GET %s = %s; want 503 saying the file is damaged", path, r)
				}
			}
			if r := h.get("/readyz", ""); r.Code != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "damaged") {
				t.Errorf("/readyz after a damaged read = %s; want 503 saying the file is damaged", r)
			}
		})
	}
}

// TestWebhook_AFrozenDiskAnswers503AndIsNotReady: with the store's writer
// held (a frozen data dir), a delivery is answered 503 once its write
// could not start within its 10 s deadline, rather than hanging until the
// disk answers, and /readyz reports the writes stalled; after the thaw
// both recover.
func TestWebhook_AFrozenDiskAnswers503AndIsNotReady(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits for a delivery's 10 s deadline")
	}
	if repotest.UsesMongoDB() {
		t.Skip("holds the embedded store's writer")
	}
	ctx := context.Background()
	disk := &repotest.FrozenDisk{}
	store, err := sqlite.Open(ctx, t.TempDir(), sqlite.Options{WriteGate: disk.Gate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(ctx) })
	h := newHarness(t, func(o *harnessOptions) { o.store = store })
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_before", UpdatedAt: t0}))

	disk.Freeze()
	r := h.deliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_frozen", UpdatedAt: t0}))
	ready := h.get("/readyz", "")
	disk.Thaw()
	if r.Code != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "stalled") {
		t.Errorf("delivery with the disk frozen = %s; want 503 saying the writes are stalled", r)
	}
	if ready.Code != http.StatusServiceUnavailable || !strings.Contains(string(ready.Body), "stalled") {
		t.Errorf("/readyz with the disk frozen = %s; want 503 saying the writes are stalled", ready)
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_frozen", UpdatedAt: t0}))
	if r := h.get("/readyz", ""); r.Code != http.StatusOK {
		t.Errorf("/readyz after the thaw = %s", r)
	}
}
