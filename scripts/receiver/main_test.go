package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_dGhlIG5ldyBzZWNyZXQgb2YgdGhlIGVuZHBvaW50"
)

// post sends body to h signed with each of secrets, as usersync signs
// during a rotation, and returns the status.
func post(t *testing.T, h http.Handler, body string, secrets ...string) int {
	t.Helper()
	now := time.Now()
	var sigs []string
	for _, s := range secrets {
		wh, err := svix.NewWebhook(s)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_1", now, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		sigs = append(sigs, sig)
	}
	req := httptest.NewRequest(http.MethodPost, "/hooks/usersync", bytes.NewReader([]byte(body)))
	req.Header.Set("webhook-id", "msg_1")
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", strings.Join(sigs, " "))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestReceiver_VerifiesWithAnyOfItsSecrets: a message verifies with the
// receiver's secret, one of two signatures of a rotation verifying is
// enough, and a message no secret verifies is refused.
func TestReceiver_VerifiesWithAnyOfItsSecrets(t *testing.T) {
	var out bytes.Buffer
	secrets := []string{newSecret}
	h := handler(func() ([]string, error) { return secrets, nil }, &out)
	body := `{"type":"user.created","data":{"userId":"user_1"}}`
	if code := post(t, h, body, newSecret); code != http.StatusNoContent {
		t.Errorf("signed with its secret: %d, want 204", code)
	}
	if code := post(t, h, body, oldSecret, newSecret); code != http.StatusNoContent {
		t.Errorf("signed with the old and the new secret: %d, want 204", code)
	}
	if code := post(t, h, body, oldSecret); code != http.StatusUnauthorized {
		t.Errorf("signed with another secret: %d, want 401", code)
	}
	secrets = nil
	if code := post(t, h, body, newSecret); code != http.StatusUnauthorized {
		t.Errorf("with no secret: %d, want 401", code)
	}
	want := "verified user.created, webhook-id msg_1, 1 signature\n" +
		"verified user.created, webhook-id msg_1, 2 signatures\n" +
		"NOT verified: no secret verifies its signatures, webhook-id msg_1\n" +
		"NOT verified: no secret to verify with, webhook-id msg_1\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}
