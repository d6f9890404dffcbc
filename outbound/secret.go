package outbound

import (
	"crypto/rand"
	"encoding/base64"
	"strings"

	"github.com/usersync/usersync/models"
)

// SecretPrefix starts every signing secret, as in Standard Webhooks and svix.
const SecretPrefix = "whsec_"

// The bounds of a secret's key, in bytes: svix's own secrets are 24 bytes,
// NewSecret's 32.
const (
	minSecretKey = 24
	maxSecretKey = 64
)

// maxSecretLen is the longest secret CheckSecret accepts: the prefix and
// the base64 of maxSecretKey bytes.
var maxSecretLen = len(SecretPrefix) + base64.StdEncoding.EncodedLen(maxSecretKey)

// NewSecret returns a fresh signing secret: "whsec_" and the base64
// (standard encoding) of 32 random bytes.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// CheckSecret checks a signing secret: "whsec_" and the base64 (standard
// encoding) of 24 to 64 bytes. The error wraps models.ErrInvalid, may be
// shown to the client, and never holds the secret or any part of it.
func CheckSecret(s string) error {
	bad := func(msg string) error {
		return models.Public(models.ErrInvalid, "%s", msg).In("secret")
	}
	if s == "" {
		return bad("secret is required")
	}
	if !strings.HasPrefix(s, SecretPrefix) {
		return bad("secret must start with " + SecretPrefix)
	}
	if len(s) > maxSecretLen {
		return bad("secret is too long: its key must be 24 to 64 bytes")
	}
	body := s[len(SecretPrefix):]
	// base64's decoder skips line breaks; a secret has none.
	key, err := base64.StdEncoding.Strict().DecodeString(body)
	if err != nil || strings.ContainsAny(body, "\r\n") {
		return bad("secret must be " + SecretPrefix + " followed by standard base64")
	}
	if len(key) < minSecretKey || len(key) > maxSecretKey {
		return bad("secret's key must be 24 to 64 bytes")
	}
	return nil
}
