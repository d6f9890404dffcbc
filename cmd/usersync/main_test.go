package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/repository/repotest"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	dir, err := os.MkdirTemp("", "usersync-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := repotest.Run(m)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is an io.Writer that tests may read while run writes.
type syncBuffer struct {
	mu  stdsync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listening = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`)

// start runs usersync with env until the test ends; it returns the base URL
// and a function that stops it and returns run's error.
func start(t *testing.T, env map[string]string) (string, *syncBuffer, func() error) {
	t.Helper()
	return startSeams(t, env, seams{})
}

// startSeams is start with seams.
func startSeams(t *testing.T, env map[string]string, seams seams) (string, *syncBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	errc := make(chan error, 1)
	go func() { errc <- runSeams(ctx, nil, func(k string) string { return env[k] }, out, os.Stderr, seams) }()
	stop := stdsync.OnceValue(func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("run did not return within 30 s of cancel")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			t.Cleanup(func() { _ = stop() })
			return "http://" + m[1], out, stop
		}
		select {
		case err := <-errc:
			t.Fatalf("run returned early: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("usersync did not start:\n%s", out)
	return "", nil, nil
}

func TestRun_ServesWithNothingConfigured(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	dir := t.TempDir()
	env := map[string]string{"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": dir}
	base, out, stop := start(t, env)

	var secrets devSecrets
	b, err := os.ReadFile(filepath.Join(dir, secretsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &secrets); err != nil {
		t.Fatal(err)
	}
	// The webhook secret is logged (test deliveries are signed with it),
	// the keys never: they are in the file.
	if secrets.WebhookSecret == "" || !strings.Contains(out.String(), secrets.WebhookSecret) {
		t.Errorf("generated webhook secret %q not logged at start-up:\n%s", secrets.WebhookSecret, out)
	}
	for _, s := range []string{secrets.APIKey, secrets.AdminKey} {
		if s == "" || strings.Contains(out.String(), s) {
			t.Errorf("generated key %q not generated, or logged at start-up:\n%s", s, out)
		}
	}

	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(secrets.WebhookSecret)
	now := time.Now()
	sig, _ := wh.Sign("msg_run", now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", "msg_run")
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	if code, body := send(t, req); code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v, want nil", err)
	}
	if !strings.Contains(out.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop in the log:\n%s", out)
	}

	// Restarted on the same data dir: same secrets, same data.
	base, out2, _ := start(t, env)
	if !strings.Contains(out2.String(), "development secrets read from the file") || strings.Contains(out2.String(), secrets.APIKey) {
		t.Errorf("restart did not say it reuses the generated keys, or logged one:\n%s", out2)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/users/user_29w83sxmDNGwOuEthce5gg56FcC", nil)
	req.Header.Set("Authorization", "Bearer "+secrets.APIKey)
	if code, body := send(t, req); code != http.StatusOK || !strings.Contains(body, "example@example.org") {
		t.Errorf("user after restart: %d %s", code, body)
	}
}

func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRun_RefusesToStartWithoutWhatItNeeds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"MongoDB without a webhook secret", map[string]string{"MONGODB_URI": "mongodb://127.0.0.1:1/", "USERSYNC_API_KEYS": "usk_test_api_0123456789"}, "CLERK_WEBHOOK_SECRET"},
		{"MongoDB without keys", map[string]string{"MONGODB_URI": "mongodb://127.0.0.1:1/", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "USERSYNC_API_KEYS"},
		{"a secret that is not whsec_", map[string]string{"CLERK_WEBHOOK_SECRET": "hunter2"}, "CLERK_WEBHOOK_SECRET"},
		{"Clerk's name of the secret counts as set", map[string]string{"MONGODB_URI": "mongodb://127.0.0.1:1/", "CLERK_WEBHOOK_SIGNING_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "USERSYNC_API_KEYS and USERSYNC_ADMIN_KEYS are not set"},
		{"an API key of 8 characters", map[string]string{"USERSYNC_API_KEYS": "usk_test_api_0123456789,hunter22"}, "USERSYNC_API_KEYS: key 2 of 2 is 8 characters long; a key must have at least 16"},
		{"an admin key of 3 characters", map[string]string{"USERSYNC_ADMIN_KEYS": "abc"}, "USERSYNC_ADMIN_KEYS: key 1 of 1 is 3 characters long"},
		{"a key with both roles", map[string]string{"USERSYNC_API_KEYS": "usk_test_api_0123456789", "USERSYNC_ADMIN_KEYS": "usk_admin_0123456789,usk_test_api_0123456789"}, "USERSYNC_API_KEYS and USERSYNC_ADMIN_KEYS: key 1 of USERSYNC_API_KEYS is also an admin key"},
		{"both names of the secret, different", map[string]string{"CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "CLERK_WEBHOOK_SIGNING_SECRET": "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}, "CLERK_WEBHOOK_SECRET and CLERK_WEBHOOK_SIGNING_SECRET"},
		{"an unknown log level", map[string]string{"USERSYNC_LOG_LEVEL": "loud"}, "USERSYNC_LOG_LEVEL"},
		{"an unknown log format", map[string]string{"USERSYNC_LOG_FORMAT": "xml"}, "USERSYNC_LOG_FORMAT"},
		{"a bare port as the address", map[string]string{"USERSYNC_ADDR": "8081"}, `USERSYNC_ADDR: "8081" is not host:port: did you mean ":8081"`},
		{"an unreachable MongoDB", map[string]string{"MONGODB_URI": "mongodb://127.0.0.1:1/", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "USERSYNC_API_KEYS": "usk_test_api_0123456789"}, "MONGODB_URI"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["USERSYNC_DATA_DIR"] = repotest.DataDir(t)
			tc.env["USERSYNC_ADDR"] = cmp.Or(tc.env["USERSYNC_ADDR"], "127.0.0.1:0")
			// A server that starts after all is stopped, and fails the test.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, nil, func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error naming %s", err, tc.want)
			}
			for _, v := range []string{"USERSYNC_API_KEYS", "USERSYNC_ADMIN_KEYS"} {
				for k := range strings.SplitSeq(tc.env[v], ",") {
					if err != nil && k != "" && strings.Contains(err.Error(), k) {
						t.Errorf("run = %v, which shows a key", err)
					}
				}
			}
		})
	}
}

func TestRun_NeverLogsSecrets(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t),
		"CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_API_KEYS":    "usk_configured_api", "USERSYNC_ADMIN_KEYS": "usk_configured_admin",
	}
	_, out, stop := start(t, env)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "usk_configured_api", "usk_configured_admin"} {
		if strings.Contains(out.String(), s) {
			t.Errorf("configured secret %q appears in the output:\n%s", s, out)
		}
	}
}

func TestLockDir_OneProcessPerEmbeddedEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(dir); err == nil || !strings.Contains(err.Error(), "in use by another usersync process") {
		t.Errorf("second lock = %v, want an error saying the engine is in use", err)
	}
	unlock()
	again, err := lockDir(dir)
	if err != nil {
		t.Errorf("lock after unlock: %v", err)
	} else {
		again()
	}
}
