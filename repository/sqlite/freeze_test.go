package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/sqlite"
)

// frozenFor bounds the freeze of frozenDisk: a process outside this one
// thaws the filesystem then, even if this process cannot run.
const frozenFor = 5 * time.Second

// frozenDisk mounts a small ext4 filesystem of a loop device for the
// test, or skips the test where that is not possible (it needs root,
// mkfs.ext4, mount with loop devices, and fsfreeze). It returns the mount
// and freeze, which freezes it (fsfreeze) for at most frozenFor; the
// filesystem is thawed when the test ends, and unmounted.
func frozenDisk(t *testing.T) (dir string, freeze func()) {
	t.Helper()
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the frozen-disk test needs %s (util-linux, e2fsprogs): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("the frozen-disk test needs root (to mount a loop device and freeze it)")
	}
	tmp := t.TempDir()
	img, dir := filepath.Join(tmp, "disk.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("cannot make an ext4 filesystem here (%v: %s)", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here (%v: %s); the frozen-disk test needs one", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	freeze = func() {
		t.Helper()
		// The thaw must not depend on this process: a process whose
		// runtime waits for a thread the frozen disk holds runs no
		// cleanup.
		thaw := exec.Command("sh", "-c", `sleep "$1"; exec fsfreeze --unfreeze "$2"`, "thaw",
			strconv.Itoa(int(frozenFor/time.Second)), dir)
		if err := thaw.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = exec.Command("fsfreeze", "--unfreeze", dir).Run() // fails if already thawed
			_ = thaw.Process.Kill()
			_ = thaw.Wait()
		})
		if out, err := exec.Command("fsfreeze", "--freeze", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot freeze %s here (%v: %s)", dir, err, out)
		}
	}
	return dir, freeze
}

// TestFrozenDisk_TheWriterHoldsItsWritesNotTheProcess: a write to a
// store on a frozen filesystem waits until the thaw, and holds nothing
// else. SQLite's shared-memory WAL index would be a file of the frozen
// disk mapped into memory: a write to one of its pages waits in the
// kernel, in a page fault, where the Go runtime cannot stop the
// goroutine, so the next stop of the world (a garbage collection) would
// wait for the thaw and every goroutine with it, a liveness probe's
// included. The store keeps the index in memory instead (no -shm file),
// so the collection goes ahead, and so do Ping, which reports the writes
// stalled (readiness's reason), and the reads.
func TestFrozenDisk_TheWriterHoldsItsWritesNotTheProcess(t *testing.T) {
	dir, freeze := frozenDisk(t)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "data"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	now := time.Now().UTC().Truncate(time.Millisecond)
	ch := func(user string) models.UserChange {
		return models.UserChange{UserID: user, EventID: "msg_" + user, SourceTime: now, DisplayName: user, Metadata: json.RawMessage(`{}`)}
	}
	if _, err := s.Users().Apply(ctx, ch("user_before"), now); err != nil {
		t.Fatal(err)
	}
	// A read connection opened now, kept by the pool: one opened with the
	// disk frozen would wait for the thaw when run as root (SQLite then
	// gives the log file the database's owner, a change to the disk).
	if _, err := s.Users().Get(ctx, "user_before"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Path() + "-shm"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s-shm = %v; want no shared-memory file (the WAL index in memory)", filepath.Base(s.Path()), err)
	}
	// The whole log in the database: the next write starts it over,
	// writing the WAL index's header before anything else (the write
	// that, to a mapped index, met the frozen disk in a page fault).
	if err := sqlite.Checkpoint(ctx, s); err != nil {
		t.Fatal(err)
	}

	freeze()
	frozenAt := time.Now()
	held := make(chan error, 1)
	go func() {
		_, err := s.Users().Apply(ctx, ch("user_frozen"), now)
		held <- err
	}()
	time.Sleep(300 * time.Millisecond) // the writer meets the frozen disk

	start := time.Now()
	runtime.GC() // stops the world, twice
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a garbage collection with the disk frozen took %v: it waited for the writer (the thaw came %v after the freeze)",
			took.Round(time.Millisecond), time.Since(frozenAt).Round(time.Millisecond))
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.Users().Apply(wctx, ch("user_gaveup"), now)
	cancel()
	if !errors.Is(err, models.ErrStalled) {
		t.Errorf("a write with a 200ms deadline, with the disk frozen = %v; want ErrStalled", err)
	}
	start = time.Now()
	if err := s.Ping(ctx); !errors.Is(err, models.ErrStalled) || !errors.Is(err, models.ErrUnavailable) {
		t.Errorf("Ping with the disk frozen = %v; want the writes reported stalled", err)
	}
	if _, err := s.Users().Get(ctx, "user_before"); err != nil {
		t.Errorf("a read with the disk frozen = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Ping and a read with the disk frozen took %v", took.Round(time.Millisecond))
	}
	if since := time.Since(frozenAt); since >= frozenFor {
		t.Fatalf("the checks with the disk frozen ended %v after the freeze, after the thaw: they waited for it", since.Round(time.Millisecond))
	}
	select {
	case err := <-held:
		t.Fatalf("the write to the frozen disk returned before the thaw: %v", err)
	default:
	}

	if out, err := exec.Command("fsfreeze", "--unfreeze", dir).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze --unfreeze: %v: %s", err, out)
	}
	select {
	case err := <-held:
		if err != nil {
			t.Errorf("the write held by the frozen disk, after the thaw = %v; want it applied", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write held by the frozen disk did not finish within 10s of the thaw")
	}
	if _, err := s.Users().Get(ctx, "user_frozen"); err != nil {
		t.Errorf("Get user_frozen after the thaw = %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after the thaw = %v", err)
	}
}
