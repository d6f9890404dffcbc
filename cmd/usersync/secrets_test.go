package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	stdsync "sync"
	"testing"

	"github.com/usersync/usersync/repository/repotest"
)

func TestDevSecrets_FirstStartsAtOnceAllUseTheSecretsTheFileKeeps(t *testing.T) {
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
