package outbound

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
)

func TestNewSecret_IsAValidSecretSvixSignsWith(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b {
		t.Fatal("two secrets are the same")
	}
	if err := CheckSecret(a); err != nil {
		t.Fatalf("CheckSecret(NewSecret()): %v", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, "whsec_"))
	if !strings.HasPrefix(a, "whsec_") || err != nil || len(key) != 32 {
		t.Fatalf("secret is not whsec_ and the base64 of 32 bytes")
	}
	if _, err := svix.NewWebhook(a); err != nil {
		t.Fatalf("svix refuses the secret: %v", err)
	}
}

func TestCheckSecret_RefusesAnythingButAWhsecKeyOf24To64Bytes(t *testing.T) {
	key := func(n int) string { return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for _, s := range []string{key(24), key(32), key(64), "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"} {
		if err := CheckSecret(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{
		"", key(23), key(65), key(1000), "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"whsec_", "whsec_sekrit*sekrit*sekrit*sekrit*", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "whsec_ MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw==",
	} {
		err := CheckSecret(s)
		if !errors.Is(err, models.ErrInvalid) {
			t.Errorf("%.40q: %v, want invalid", s, err)
			continue
		}
		if body := strings.TrimPrefix(s, "whsec_"); len(body) >= 4 && strings.Contains(err.Error(), body[:4]) {
			t.Errorf("the error %q holds part of the secret", err)
		}
	}
}
