package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"testing"

	"github.com/usersync/usersync/repository/repotest"
)

func TestDevSecrets_FirstStartsAtOnceAllUseTheSecretsTheFileKeeps(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		dir := t.TempDir()
		const starts = 8
		got := make([]config, starts)
		errs := make([]error, starts)
		var ready, wg stdsync.WaitGroup
		ready.Add(starts)
		gate := make(chan struct{})
		for i := range starts {
			wg.Go(func() {
				ready.Done()
				<-gate
				got[i] = config{DataDir: dir}
				errs[i] = fillDevSecrets(&got[i], repotest.Discard())
			})
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		var file devSecrets
		b, err := os.ReadFile(filepath.Join(dir, secretsFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &file); err != nil {
			t.Fatal(err)
		}
		for i, c := range got {
			if errs[i] != nil {
				t.Fatalf("round %d, start %d: %v", round, i, errs[i])
			}
			if string(c.APIKeys[0]) != file.APIKey || string(c.AdminKeys[0]) != file.AdminKey || string(c.WebhookSecrets[0]) != file.WebhookSecret {
				t.Fatalf("round %d: start %d uses secrets other than the file's", round, i)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".secrets-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
		if fi, err := os.Stat(filepath.Join(dir, secretsFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("secrets file mode = %v, %v; want 0600", fi.Mode(), err)
		}
	}
}

func TestDevSecrets_AFileOfAnEarlierVersionGetsWhatItLacks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, secretsFile)
	if err := os.WriteFile(path, []byte(`{"apiKey":"usk_kept_0123456789abcdef"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := config{DataDir: dir}
	if err := fillDevSecrets(&c, repotest.Discard()); err != nil {
		t.Fatal(err)
	}
	again := config{DataDir: dir}
	if err := fillDevSecrets(&again, repotest.Discard()); err != nil {
		t.Fatal(err)
	}
	if string(c.APIKeys[0]) != "usk_kept_0123456789abcdef" || len(c.AdminKeys) != 1 || string(again.AdminKeys[0]) != string(c.AdminKeys[0]) {
		t.Errorf("keys %v, %v then %v; want the kept API key and one admin key, the same twice", strs(c.APIKeys), strs(c.AdminKeys), strs(again.AdminKeys))
	}
}

// logTo returns a JSON logger writing to buf, at the info level.
func logTo(buf *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(buf, nil)) }

func TestDevSecrets_AFullyConfiguredStartReadsAndWritesNothing(t *testing.T) {
	t.Parallel()
	// A data dir that cannot be created or written (under a regular file):
	// a start that needs none of its secrets still starts.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c := config{DataDir: filepath.Join(file, "data"), WebhookSecrets: []secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		APIKeys: []secret{"usk_mine_0123456789"}, AdminKeys: []secret{"usk_admin_mine_0123456789"}}
	if err := fillDevSecrets(&c, logTo(&logs)); err != nil {
		t.Fatalf("a start with every secret set, on a data dir it cannot write: %v", err)
	}
	if logs.Len() != 0 {
		t.Errorf("a start with every secret set logged: %s", logs.String())
	}
	dir := t.TempDir()
	c.DataDir = dir
	if err := fillDevSecrets(&c, logTo(&logs)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, secretsFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a start with every secret set wrote %s: %v", secretsFile, err)
	}
}

func TestDevSecrets_OnlyTheSecretsUsedAreSavedAndTheKeysAreNeverLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var logs bytes.Buffer
	// The webhook secret is set: only the two keys are generated.
	c := config{DataDir: dir, WebhookSecrets: []secret{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	if err := fillDevSecrets(&c, logTo(&logs)); err != nil {
		t.Fatal(err)
	}
	file, err := readDevSecrets(filepath.Join(dir, secretsFile))
	if err != nil {
		t.Fatal(err)
	}
	if file.WebhookSecret != "" || file.APIKey == "" || file.AdminKey == "" ||
		string(c.APIKeys[0]) != file.APIKey || string(c.AdminKeys[0]) != file.AdminKey {
		t.Errorf("the file keeps %+v, the start uses %v and %v: want the two keys generated, no webhook secret", file, strs(c.APIKeys), strs(c.AdminKeys))
	}
	first := logs.String()
	if !strings.Contains(first, `"msg":"development secrets generated`) || !strings.Contains(first, filepath.Join(dir, secretsFile)) ||
		!strings.Contains(first, "USERSYNC_ADMIN_KEYS") {
		t.Errorf("the first start's log does not say which secrets it generated, and where:\n%s", first)
	}
	// A later start with nothing set: it generates the webhook secret only,
	// logs its value (it signs test deliveries), and never a key's.
	logs.Reset()
	again := config{DataDir: dir}
	if err := fillDevSecrets(&again, logTo(&logs)); err != nil {
		t.Fatal(err)
	}
	second := logs.String()
	if string(again.APIKeys[0]) != file.APIKey || len(again.WebhookSecrets) != 1 ||
		!strings.Contains(second, `"webhook_secret":"`+string(again.WebhookSecrets[0])+`"`) {
		t.Errorf("the second start: keys %v, webhook secret %v; log:\n%s", strs(again.APIKeys), strs(again.WebhookSecrets), second)
	}
	// And a third start generates nothing: it says where its secrets are.
	logs.Reset()
	third := config{DataDir: dir}
	if err := fillDevSecrets(&third, logTo(&logs)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "generated") || strings.Contains(logs.String(), "whsec_") ||
		!strings.Contains(logs.String(), `"msg":"development secrets read from the file`) {
		t.Errorf("a start that generated nothing logged:\n%s", logs.String())
	}
	for _, l := range []string{first, second, logs.String()} {
		if strings.Contains(l, file.APIKey) || strings.Contains(l, file.AdminKey) {
			t.Errorf("a key's value was logged:\n%s", l)
		}
	}
}
