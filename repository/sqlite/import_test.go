package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/sqlite"
)

// TestImportEarlier_AFerretDBDataDirIsImportedOnceAndKept imports the data
// dir an earlier version wrote with its embedded engine (FerretDB 1.24),
// and checks every user and event against what that version's API
// answered for it (testdata/ferretdb-1.24).
func TestImportEarlier_AFerretDBDataDirIsImportedOnceAndKept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("testdata/ferretdb-1.24/usersync.sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db", "usersync.sqlite"), fixture, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := sqlite.ImportEarlier(ctx, dir, "usersync")
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Imported || rep.Users != 4 || rep.Events != 8 {
		t.Errorf("ImportEarlier = %+v, want 4 users and 8 events imported", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); !os.IsNotExist(err) {
		t.Errorf("the old files are still where they were: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rep.KeptAs, "usersync.sqlite")); err != nil {
		t.Errorf("the old files were not kept: %v", err)
	}
	if again, err := sqlite.ImportEarlier(ctx, dir, "usersync"); err != nil || again.Imported {
		t.Errorf("a second ImportEarlier = %+v, %v; want nothing to do", again, err)
	}

	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	var users struct {
		Data []struct {
			UserID, Email, DisplayName, FirstName, LastName, PhoneNumber string
			Metadata                                                     json.RawMessage
			CreatedAt, UpdatedAt                                         time.Time
			DeletedAt, LastSignInAt                                      *time.Time
		}
	}
	readJSON(t, "testdata/ferretdb-1.24/users.json", &users)
	if len(users.Data) != 4 {
		t.Fatalf("fixture has %d users", len(users.Data))
	}
	for _, want := range users.Data {
		got, err := s.Users().Get(ctx, want.UserID)
		if err != nil {
			t.Errorf("user %s: %v", want.UserID, err)
			continue
		}
		if got.Email != want.Email || got.DisplayName != want.DisplayName || got.FirstName != want.FirstName ||
			got.LastName != want.LastName || got.PhoneNumber != want.PhoneNumber || !got.CreatedAt.Equal(want.CreatedAt) ||
			!got.UpdatedAt.Equal(want.UpdatedAt) || (got.DeletedAt == nil) != (want.DeletedAt == nil) ||
			(got.LastSignInAt == nil) != (want.LastSignInAt == nil) {
			t.Errorf("user %s = %+v, want %+v", want.UserID, got, want)
		}
		var g, w any
		_ = json.Unmarshal(got.Metadata, &g)
		_ = json.Unmarshal(want.Metadata, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("user %s metadata = %s, want %s", want.UserID, got.Metadata, want.Metadata)
		}
	}
	if page, err := s.Users().List(ctx, models.UserFilter{Email: "meta@example.com", Limit: 10}); err != nil || len(page.Users) != 1 {
		t.Errorf("email lookup after import = %+v, %v", page, err)
	}

	var events struct {
		Data []struct {
			EventID, Type, UserID, Error string
			Status                       models.EventStatus
			Outcome                      models.Outcome
			Attempts                     int
			ReceivedAt                   time.Time
		}
	}
	readJSON(t, "testdata/ferretdb-1.24/events.json", &events)
	for _, want := range events.Data {
		got, err := s.Events().Get(ctx, want.EventID)
		if err != nil {
			t.Errorf("event %s: %v", want.EventID, err)
			continue
		}
		if got.Type != want.Type || got.UserID != want.UserID || got.Status != want.Status || got.Outcome != models.ReadOutcome(string(want.Outcome)) ||
			got.Attempts != want.Attempts || got.Error != want.Error || !got.ReceivedAt.Equal(want.ReceivedAt) || len(got.RawBody) == 0 {
			t.Errorf("event %s = %+v, want %+v", want.EventID, got, want)
		}
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByStatus[models.StatusProcessed] != 7 || st.ByStatus[models.StatusFailed] != 1 || st.ByOutcome[models.OutcomeDeleted] != 1 {
		t.Errorf("stats after import = %+v, %v", st, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestOpen_RefusesAFileOfAnotherProgram: a data dir holding another
// program's SQLite file at the store's name is refused, unchanged.
func TestOpen_RefusesAFileOfAnotherProgram(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, sqlite.FileName)
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`CREATE TABLE users (id TEXT PRIMARY KEY, plan TEXT); INSERT INTO users VALUES ('u1', 'pro')`); err != nil {
		t.Fatal(err)
	}
	other.Close()
	fixture, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(ctx, dir, sqlite.Options{}); !errors.Is(err, models.ErrForeignData) {
		t.Fatalf("Open of a foreign file = %v, want ErrForeignData", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, fixture) {
		t.Error("the foreign file was changed")
	}
}

// TestOpen_RefusesAnotherProgramsEmptyDatabase: another program's SQLite
// database with no tables yet (its version number set, or its own
// application id) is refused as another program's, unchanged, not taken
// for a usersync store of a newer schema.
func TestOpen_RefusesAnotherProgramsEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	for _, pragma := range []string{"PRAGMA user_version = 7", "PRAGMA application_id = 1234"} {
		dir := t.TempDir()
		path := filepath.Join(dir, sqlite.FileName)
		other, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Exec(pragma); err != nil {
			t.Fatal(err)
		}
		other.Close()
		fixture, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sqlite.Open(ctx, dir, sqlite.Options{})
		if !errors.Is(err, models.ErrForeignData) || !strings.Contains(err.Error(), "another program's empty SQLite database") ||
			strings.Contains(err.Error(), "newer") {
			t.Errorf("Open of a file after %q = %v; want ErrForeignData saying it is another program's empty database", pragma, err)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, fixture) {
			t.Errorf("the file after %q was changed", pragma)
		}
	}
}

// TestOpen_RefusesAFileItCannotWrite: a store on a read-only disk is
// refused at open, naming the file, not at the first webhook.
func TestOpen_RefusesAFileItCannotWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); the test needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	s, err := sqlite.Open(ctx, dir, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close(ctx)
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(ctx, dir, sqlite.Options{})
	if err == nil || !(strings.Contains(err.Error(), "cannot be written") || strings.Contains(err.Error(), "cannot be opened for writing")) {
		t.Fatalf("Open on a read-only disk = %v, want a refusal saying it cannot be written", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, sqlite.FileName)) {
		t.Errorf("the refusal %q does not name the file", err)
	}
}
