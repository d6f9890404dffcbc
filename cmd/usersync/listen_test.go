package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/repository/repotest"
)

func TestRun_TheWebhookApartAndTheMetricsBehindAKey(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	const (
		secret     = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		apiKey     = "usk_apart_api_0123456789"
		metricsKey = "usk_apart_metrics_0123456789"
	)
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_WEBHOOK_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t),
		"CLERK_WEBHOOK_SECRET": secret, "USERSYNC_API_KEYS": apiKey, "USERSYNC_METRICS_KEY": metricsKey,
	}
	base, out, _ := start(t, env)
	m := regexp.MustCompile(`"webhook_addr":"([^"]+)"`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no webhook_addr in the listening line:\n%s", out)
	}
	hook := "http://" + m[1]

	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(base string) int {
		wh, _ := svix.NewWebhook(secret)
		id, now := "msg_apart_"+strconv.FormatInt(time.Now().UnixNano(), 10), time.Now()
		sig, _ := wh.Sign(id, now, body)
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
		req.Header.Set("svix-id", id)
		req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("svix-signature", sig)
		code, _ := send(t, req)
		return code
	}
	get := func(url, key string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		code, _ := send(t, req)
		return code
	}
	checks := []struct {
		name string
		got  int
		want int
	}{
		{"the webhook on its own address", deliver(hook), http.StatusOK},
		{"the webhook on the main address", deliver(base), http.StatusNotFound},
		{"/healthz on the webhook's address", get(hook+"/healthz", ""), http.StatusOK},
		{"/v1/users on the webhook's address", get(hook+"/v1/users", apiKey), http.StatusNotFound},
		{"/metrics on the webhook's address", get(hook+"/metrics", metricsKey), http.StatusNotFound},
		{"/readyz on the webhook's address", get(hook+"/readyz", ""), http.StatusNotFound},
		{"/v1/users on the main address", get(base+"/v1/users", apiKey), http.StatusOK},
		{"/metrics without a key", get(base+"/metrics", ""), http.StatusUnauthorized},
		{"/metrics with an API key", get(base+"/metrics", apiKey), http.StatusUnauthorized},
		{"/metrics with the metrics key", get(base+"/metrics", metricsKey), http.StatusOK},
		{"/healthz on the main address", get(base+"/healthz", ""), http.StatusOK},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestConfig_TheWebhookAddressAndTheMetricsKeyAreChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a bare port for the webhook", map[string]string{"USERSYNC_WEBHOOK_ADDR": "9090"}, `USERSYNC_WEBHOOK_ADDR: "9090" is not host:port`},
		{"the webhook on the main address", map[string]string{"USERSYNC_ADDR": ":8080", "USERSYNC_WEBHOOK_ADDR": ":8080"}, "USERSYNC_WEBHOOK_ADDR: \":8080\" is USERSYNC_ADDR too"},
		{"a short metrics key", map[string]string{"USERSYNC_METRICS_KEY": "scrape"}, "USERSYNC_METRICS_KEY: the key is 6 characters long"},
		{"the metrics key is an API key", map[string]string{"USERSYNC_METRICS_KEY": "usk_shared_0123456789", "USERSYNC_API_KEYS": "usk_shared_0123456789"}, "USERSYNC_METRICS_KEY is also an API or admin key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadConfig(newFlagSet(), "serve", nil, func(k string) string { return tc.env[k] })
			if err == nil || !regexp.MustCompile(regexp.QuoteMeta(tc.want)).MatchString(err.Error()) {
				t.Errorf("loadConfig = %v, want an error saying %s", err, tc.want)
			}
		})
	}
}

func TestRun_ConfigurationErrorsComeBeforeTheDatabaseIsOpened(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	// A database that does not answer: reaching it would fail naming
	// MONGODB_URI, after its timeout.
	base := map[string]string{
		"MONGODB_URI": "mongodb://127.0.0.1:1/", "USERSYNC_ADDR": "127.0.0.1:0",
		"CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "USERSYNC_API_KEYS": "usk_early_api_0123456789",
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"a secret that is not base64", map[string]string{"CLERK_WEBHOOK_SECRET": "whsec_!!not*base64!!"}, "CLERK_WEBHOOK_SECRET"},
		{"a reconcile schedule without Clerk's key", map[string]string{"USERSYNC_RECONCILE_INTERVAL": "1h"}, "USERSYNC_RECONCILE_INTERVAL is set but CLERK_SECRET_KEY is not"},
		{"Clerk's API over plain HTTP", map[string]string{"CLERK_SECRET_KEY": "sk_test_x", "CLERK_API_URL": "http://api.example.com/v1"}, "CLERK_API_URL"},
		{"an address in use", map[string]string{"USERSYNC_ADDR": busy.Addr().String()}, "USERSYNC_ADDR"},
		{"a webhook address in use", map[string]string{"USERSYNC_WEBHOOK_ADDR": busy.Addr().String()}, "USERSYNC_WEBHOOK_ADDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"USERSYNC_DATA_DIR": repotest.DataDir(t)}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := run(ctx, nil, func(k string) string { return env[k] }, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("run = %v, want an error starting with %s (and not about the database)", err, tc.want)
			}
		})
	}
}
