package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips the test
// where mounting is not permitted.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if repotest.UsesMongoDB() {
		t.Skip("fills the embedded store's disk")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); the disk-full test needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file into dir until the filesystem is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill the disk: %v", err)
			}
			return path
		}
	}
}

var engineErrors = regexp.MustCompile(`(?m)^usersync_engine_errors_total (\d+)`)

func TestWebhook_FullDiskIsUnavailableCountedAndNotReady(t *testing.T) {
	t.Parallel()
	dir := smallDisk(t, 8<<20)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	h := newHarness(t, func(o *harnessOptions) { o.store = store })
	before := newID()
	h.mustDeliver(before, userBody(t, "user.created", clerkUser{ID: "user_before", UpdatedAt: t0, Email: "before@example.org"}))

	filler := fill(t, dir)
	acked := []string{before}
	failedID, failedBody := "", []byte(nil)
	for i := 0; i < 200 && failedID == ""; i++ {
		id := newID()
		body := userBody(t, "user.created", clerkUser{ID: "user_full" + strconv.Itoa(i), UpdatedAt: t0,
			Meta: map[string]any{"pad": strings.Repeat("x", 50_000)}})
		r := h.deliver(id, body)
		switch r.Code {
		case http.StatusOK:
			acked = append(acked, id)
		case http.StatusServiceUnavailable:
			if code := r.JSON(t)["error"].(map[string]any)["code"]; code != "unavailable" {
				t.Fatalf("delivery on a full disk = %s, want code unavailable", r)
			}
			failedID, failedBody = id, body
		default:
			t.Fatalf("delivery on a full disk = %s, want 200 or 503", r)
		}
	}
	if failedID == "" {
		t.Fatal("the disk never filled up")
	}
	t.Logf("%d deliveries acknowledged before the disk was full", len(acked)-1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := store.Ping(ctx); err != nil {
		t.Fatalf("ping on a full disk: %v (the test wants a database that still answers)", err)
	}
	if r := h.get("/readyz", ""); r.Code != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "storage is full") {
		t.Errorf("/readyz on a full disk = %s, want 503 saying the storage is full", r)
	}
	if m := engineErrors.FindStringSubmatch(string(h.get("/metrics", "").Body)); m == nil || m[1] == "0" {
		t.Errorf("usersync_engine_errors_total = %v, want it counted", m)
	}

	// Space comes back: Svix's retry succeeds, and nothing acknowledged is lost.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	h.mustDeliver(failedID, failedBody)
	for _, id := range append(acked, failedID) {
		if ev := h.event(id); ev["status"] != "processed" {
			t.Errorf("acknowledged event %s is %v, want processed", id, ev["status"])
		}
	}
}

// TestWebhook_AReadOnlyDatabaseIsUnavailableCountedAndNotReady: writes
// are refused as by a read-only database (the store's own translation of
// SQLITE_READONLY is tested in repository/sqlite). Every webhook is a 503
// (Svix retries), counted as a database error, /readyz says why, and the
// retry succeeds once the database takes writes again.
func TestWebhook_AReadOnlyDatabaseIsUnavailableCountedAndNotReady(t *testing.T) {
	t.Parallel()
	h, flaky := newFlakyHarness(t)
	flaky.err = fmt.Errorf("test: %w: %w", models.ErrReadOnly, models.ErrUnavailable)
	flaky.fail.Store(true)
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_ro", UpdatedAt: t0})
	if r := h.deliver(id, body); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("delivery to a read-only database = %s, want 503", r)
	}
	if r := h.get("/readyz", ""); r.Code != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "cannot be written") {
		t.Errorf("/readyz with a read-only database = %s, want 503 saying it cannot be written", r)
	}
	if m := engineErrors.FindStringSubmatch(string(h.get("/metrics", "").Body)); m == nil || m[1] == "0" {
		t.Errorf("usersync_engine_errors_total = %v, want it counted", m)
	}
	flaky.fail.Store(false)
	h.mustDeliver(id, body) // Svix's retry
	if u := h.user("user_ro"); u == nil {
		t.Error("the retried delivery did not write the user")
	}
}
