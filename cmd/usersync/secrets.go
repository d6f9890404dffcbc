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
// file, and logs them (one log line each, so that standard output stays
// log lines only). These are development secrets, made for this data dir:
// logging them is their purpose; secrets the operator sets are never
// logged.
//
// The file is created once, with every secret, atomically: two first
// starts at once (two terminals, a restart loop) must not each use
// secrets of their own while the file keeps only one set. Each writes a
// complete file under a temporary name and links it to secrets.json,
// which fails if the name exists; the one that loses reads the winner's.
func fillDevSecrets(c *config, log *slog.Logger) error {
	path := filepath.Join(c.DataDir, secretsFile)
	s, err := readDevSecrets(path)
	if errors.Is(err, fs.ErrNotExist) {
		s, err = createDevSecrets(c.DataDir, path)
	}
	if err != nil {
		return err
	}
	// A file written by an earlier usersync holds only the secrets that
	// were missing then: add the ones missing now.
	changed := false
	gen := func(v *string, prefix string, enc *base64.Encoding) {
		if *v == "" {
			*v, changed = prefix+random(24, enc), true
		}
	}
	var used [][2]string // variable, value
	if len(c.WebhookSecrets) == 0 {
		gen(&s.WebhookSecret, "whsec_", base64.StdEncoding)
		c.WebhookSecrets = []secret{secret(s.WebhookSecret)}
		used = append(used, [2]string{"CLERK_WEBHOOK_SECRET", s.WebhookSecret})
	}
	if len(c.APIKeys) == 0 {
		gen(&s.APIKey, "usk_", base64.RawURLEncoding)
		c.APIKeys = []secret{secret(s.APIKey)}
		used = append(used, [2]string{"USERSYNC_API_KEYS", s.APIKey})
	}
	if len(c.AdminKeys) == 0 {
		gen(&s.AdminKey, "usk_admin_", base64.RawURLEncoding)
		c.AdminKeys = []secret{secret(s.AdminKey)}
		used = append(used, [2]string{"USERSYNC_ADMIN_KEYS", s.AdminKey})
	}
	if changed {
		if err := replaceDevSecrets(c.DataDir, path, s); err != nil {
			return err
		}
	}
	for _, u := range used {
		log.Warn("development secret: set the variable to use your own",
			slog.String("variable", u[0]), slog.String("value", u[1]), slog.String("file", path))
	}
	return nil
}

// newDevSecrets generates every development secret.
func newDevSecrets() devSecrets {
	return devSecrets{
		WebhookSecret: "whsec_" + random(24, base64.StdEncoding),
		APIKey:        "usk_" + random(24, base64.RawURLEncoding),
		AdminKey:      "usk_admin_" + random(24, base64.RawURLEncoding),
	}
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

// createDevSecrets creates the secrets file with new secrets, unless
// another process creates it first: then it returns that one's.
func createDevSecrets(dir, path string) (devSecrets, error) {
	s := newDevSecrets()
	tmp, err := writeTemp(dir, s)
	if err != nil {
		return devSecrets{}, err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path) // never replaces: one creator wins
	if errors.Is(err, fs.ErrExist) {
		return readDevSecrets(path)
	}
	if err != nil {
		return devSecrets{}, fmt.Errorf("save generated secrets as %s: %w", path, err)
	}
	syncDir(dir)
	return s, nil
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
