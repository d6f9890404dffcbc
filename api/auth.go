package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

type role int

const (
	roleNone role = iota
	roleAPI
	roleAdmin
)

// keyring maps the SHA-256 of each key to its role, so that a lookup does
// not compare secrets byte by byte.
type keyring map[[32]byte]role

func newKeyring(apiKeys, adminKeys []string) keyring {
	k := keyring{}
	for _, key := range apiKeys {
		k[sha256.Sum256([]byte(key))] = roleAPI
	}
	for _, key := range adminKeys {
		k[sha256.Sum256([]byte(key))] = roleAdmin
	}
	return k
}

const (
	roleKey    = "usersync.role"
	keyHashKey = "usersync.key_hash"
)

// requireKey admits requests whose bearer key has at least role min.
func (s *server) requireKey(min role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			auth := c.Request().Header.Get(echo.HeaderAuthorization)
			scheme, key, ok := strings.Cut(auth, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
				return models.Public(models.ErrUnauthorized, "send an API key as \"Authorization: Bearer <key>\"")
			}
			r := s.keys[sha256.Sum256([]byte(strings.TrimSpace(key)))]
			switch {
			case r == roleNone:
				return models.Public(models.ErrUnauthorized, "unknown API key")
			case r < min:
				return models.Public(models.ErrForbidden, "this needs an admin key")
			}
			c.Set(roleKey, r)
			c.Set(keyHashKey, sha256.Sum256([]byte(strings.TrimSpace(key))))
			return next(c)
		}
	}
}

// requireMetricsKey admits requests to /metrics with the metrics key, or
// any request when none is set.
func (s *server) requireMetricsKey(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.metricsKey == nil {
			return next(c)
		}
		scheme, key, ok := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(key)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], s.metricsKey[:]) != 1 {
			return models.Public(models.ErrUnauthorized, "send the metrics key (USERSYNC_METRICS_KEY) as \"Authorization: Bearer <key>\"")
		}
		return next(c)
	}
}

// keyHash is the SHA-256 of the request's key (zero without one): what
// per-key bounds count by, never the key itself.
func keyHash(c echo.Context) [32]byte {
	h, _ := c.Get(keyHashKey).([32]byte)
	return h
}

// isAdmin reports whether the request was made with an admin key.
func isAdmin(c echo.Context) bool {
	r, _ := c.Get(roleKey).(role)
	return r == roleAdmin
}
