package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// devSecrets are the secrets generated for local use with the embedded
// engine, kept in the data dir so that they survive restarts.
type devSecrets struct {
	WebhookSecret string `json:"webhookSecret,omitempty"`
	APIKey        string `json:"apiKey,omitempty"`
	AdminKey      string `json:"adminKey,omitempty"`
}

const secretsFile = "secrets.json"

// fillDevSecrets sets every secret c lacks from the data dir's secrets
// file, generating the ones the file lacks too. With every secret set,
// it reads and writes nothing: a data dir it cannot write (a read-only
// mount) is no reason to refuse a start that needs no secret of it.
//
// Only the secrets this start uses are generated and saved. The log says
// so when it generates any: one warning naming the file and the variables
// it stands in for, with the value of a generated webhook secret only
// (sendevent, or whoever signs the test deliveries, needs it); the keys'
// values are never logged (they are in the file, mode 0600). A start that
// generates nothing says where its secrets come from, without values.
//
// The file is created atomically: two first starts at once (two
// terminals, a restart loop) must not each use secrets of their own while
// the file keeps only one set. Each writes a complete file under a
// temporary name and links it to secrets.json, which fails if the name
// exists; the one that loses reads the winner's.
func fillDevSecrets(c *config, log *slog.Logger) error {
	type need struct {
		variable string
		value    *string
		prefix   string
		enc      *base64.Encoding
		set      func(string)
	}
	var s devSecrets
	var needs []need
	if len(c.WebhookSecrets) == 0 {
		needs = append(needs, need{"CLERK_WEBHOOK_SECRET", &s.WebhookSecret, "whsec_", base64.StdEncoding,
			func(v string) { c.WebhookSecrets = []secret{secret(v)} }})
	}
	if len(c.APIKeys) == 0 {
		needs = append(needs, need{"USERSYNC_API_KEYS", &s.APIKey, "usk_", base64.RawURLEncoding,
			func(v string) { c.APIKeys = []secret{secret(v)} }})
	}
	if len(c.AdminKeys) == 0 {
		needs = append(needs, need{"USERSYNC_ADMIN_KEYS", &s.AdminKey, "usk_admin_", base64.RawURLEncoding,
			func(v string) { c.AdminKeys = []secret{secret(v)} }})
	}
	if len(needs) == 0 {
		return nil
	}
	path := filepath.Join(c.DataDir, secretsFile)
	var err error
	generated := map[string]bool{}
	// fill generates what s lacks of the secrets needed.
	fill := func() {
		for _, n := range needs {
			if *n.value == "" {
				*n.value, generated[n.variable] = n.prefix+random(24, n.enc), true
			}
		}
	}
	s, err = readDevSecrets(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fill()
		var won bool
		if s, won, err = createDevSecrets(c.DataDir, path, s); err != nil {
			return err
		}
		if !won {
			// Another start created the file first: use its secrets, and
			// add what it lacks.
			clear(generated)
			fill()
			if len(generated) > 0 {
				err = replaceDevSecrets(c.DataDir, path, s)
			}
		}
	case err == nil:
		// A file written by another start, or an earlier usersync, may
		// lack a secret needed now: add it.
		fill()
		if len(generated) > 0 {
			err = replaceDevSecrets(c.DataDir, path, s)
		}
	}
	if err != nil {
		return err
	}
	var made, kept []string
	for _, n := range needs {
		n.set(*n.value)
		if generated[n.variable] {
			made = append(made, n.variable)
		} else {
			kept = append(kept, n.variable)
		}
	}
	if len(made) > 0 {
		attrs := []any{slog.String("file", path), slog.Any("variables", made)}
		if generated["CLERK_WEBHOOK_SECRET"] {
			attrs = append(attrs, slog.String("webhook_secret", s.WebhookSecret))
		}
		log.Warn("development secrets generated and saved in the file: set the variables to use your own", attrs...)
	}
	if len(kept) > 0 {
		log.Info("development secrets read from the file: set the variables to use your own",
			slog.String("file", path), slog.Any("variables", kept))
	}
	return nil
}

// readDevSecrets reads the secrets file; its error wraps fs.ErrNotExist
// when there is none.
func readDevSecrets(path string) (devSecrets, error) {
	var s devSecrets
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	if err != nil {
		return s, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read %s: %w (delete it to generate new secrets)", path, err)
	}
	return s, nil
}

// createDevSecrets creates the secrets file with s, unless another
// process creates it first: then it returns that one's, and won false.
func createDevSecrets(dir, path string, s devSecrets) (_ devSecrets, won bool, err error) {
	tmp, err := writeTemp(dir, s)
	if err != nil {
		return devSecrets{}, false, err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path) // never replaces: one creator wins
	if errors.Is(err, fs.ErrExist) {
		s, err = readDevSecrets(path)
		return s, false, err
	}
	if err != nil {
		return devSecrets{}, false, fmt.Errorf("save generated secrets as %s: %w", path, err)
	}
	syncDir(dir)
	return s, true, nil
}

// replaceDevSecrets replaces the secrets file with s, atomically.
func replaceDevSecrets(dir, path string, s devSecrets) error {
	tmp, err := writeTemp(dir, s)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save generated secrets as %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// writeTemp writes s to a new file in dir, readable by its owner only, and
// flushes it to disk before it is given its name.
func writeTemp(dir string, s devSecrets) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".secrets-*.json") // mode 0600
	if err != nil {
		return "", fmt.Errorf("save generated secrets: %w", err)
	}
	b, _ := json.MarshalIndent(s, "", "  ")
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("save generated secrets: %w", err)
	}
	return f.Name(), nil
}

// syncDir flushes dir's entries, so that a new name survives a crash. A
// failure only risks regenerating the secrets after one.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// random returns n random bytes encoded with enc.
func random(n int, enc *base64.Encoding) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return enc.EncodeToString(b)
}
