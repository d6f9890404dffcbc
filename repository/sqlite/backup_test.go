package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/sqlite"
)

// storeFiles is the bytes of the store's database and write-ahead log.
func storeFiles(t *testing.T, s *sqlite.Store) []byte {
	t.Helper()
	var all []byte
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(s.Path() + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestBackup_CopiesWhileWritesGoOnAndHoldsBackNoErasure takes a backup in
// small steps while a user is written and a deleted user erased between
// two of them: the erasure leaves the store's files at once (the backup
// holds no read transaction between steps), and the backup is a usersync
// store with the write made during it and without the erased data.
func TestBackup_CopiesWhileWritesGoOnAndHoldsBackNoErasure(t *testing.T) {
	defer sqlite.SetBackupStep(2)()
	ctx := context.Background()
	s := open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	const secret = "Surname-Zqxwv-To-Erase"
	for i := range 40 {
		user := fmt.Sprintf("user_%02d", i)
		body := `{"data":{"pad":"` + strings.Repeat("p", 2000) + `"}}`
		if i == 7 {
			body = `{"data":{"last_name":"` + secret + `"}}`
		}
		ev := models.Event{EventID: "msg_" + user, Type: "user.created", EventType: models.EventCreated, UserID: user,
			RawBody: []byte(body), Source: models.SourceClerk, ReceivedAt: now, Status: models.StatusStored}
		ch := models.UserChange{UserID: user, EventID: ev.EventID, SourceTime: now, DisplayName: user, Metadata: json.RawMessage(`{}`)}
		if _, err := s.Deliver(ctx, ev, ch, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Users().Apply(ctx, models.UserChange{UserID: "user_07", EventID: "msg_gone", SourceTime: now.Add(time.Second), Deleted: true}, now); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(storeFiles(t, s), []byte(secret)) {
		t.Fatal("the store's files do not hold the data to erase: the test cannot see its erasure")
	}

	during, steps := false, 0
	b, err := s.Backup(ctx, now, func(int64) {
		if steps++; steps != 3 {
			return
		}
		during = true
		if _, err := s.Users().Apply(ctx, models.UserChange{UserID: "user_during", EventID: "msg_during", SourceTime: now,
			DisplayName: "During", Metadata: json.RawMessage(`{}`)}, now); err != nil {
			t.Errorf("a write during the backup: %v", err)
		}
		if res, err := s.EraseUser(ctx, "user_07", now); err != nil || res.Events != 1 {
			t.Errorf("an erasure during the backup = %+v, %v", res, err)
		}
		if bytes.Contains(storeFiles(t, s), []byte(secret)) {
			t.Error("the erased data stays in the store's files while the backup runs")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !during {
		t.Fatal("the backup took fewer than 3 steps: the test wrote nothing during it")
	}
	if want := filepath.Join(filepath.Dir(s.Path()), sqlite.BackupDir, "usersync-"+now.Truncate(time.Second).Format("20060102T150405Z")+".db"); b.Path != want || b.Bytes == 0 {
		t.Errorf("backup = %+v, want a file at %s", b, want)
	}
	copied, err := os.ReadFile(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(copied, []byte(secret)) {
		t.Error("the backup holds the data erased while it ran")
	}

	// The backup is a store of its own, with every user.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, sqlite.FileName), copied, 0o600); err != nil {
		t.Fatal(err)
	}
	restored, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatalf("open the backup: %v", err)
	}
	defer restored.Close(ctx)
	page, err := restored.Users().List(ctx, models.UserFilter{IncludeDeleted: true, Limit: 100})
	if err != nil || len(page.Users) != 41 {
		t.Fatalf("the backup lists %d users, %v; want 41", len(page.Users), err)
	}
	if u, err := restored.Users().Get(ctx, "user_during"); err != nil || u.DisplayName != "During" {
		t.Errorf("the user written during the backup: %+v, %v", u, err)
	}
	if ev, err := restored.Events().Get(ctx, "msg_user_07"); err != nil || ev.RawBody != nil || ev.ErasedAt == nil {
		t.Errorf("the erased event in the backup = %+v, %v; want it erased", ev, err)
	}
	if _, err := os.Stat(b.Path + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the partial file is left: %v", err)
	}
}
