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
// file, generating and saving the ones the file lacks, and logs them (one
// log line each, so that standard output stays log lines only). These
// are development secrets, made for this data dir: logging them is their
// purpose; secrets the operator sets are never logged.
func fillDevSecrets(c *config, log *slog.Logger) error {
	path := filepath.Join(c.DataDir, secretsFile)
	var s devSecrets
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	default:
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("read %s: %w (delete it to generate new secrets)", path, err)
		}
	}
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
		b, _ := json.MarshalIndent(s, "", "  ")
		if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("save generated secrets: %w", err)
		}
	}
	for _, u := range used {
		log.Warn("development secret: set the variable to use your own",
			slog.String("variable", u[0]), slog.String("value", u[1]), slog.String("file", path))
	}
	return nil
}

// random returns n random bytes encoded with enc.
func random(n int, enc *base64.Encoding) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return enc.EncodeToString(b)
}
