package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

func endpointsConfig(t *testing.T, file string, env map[string]string) (config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "endpoints.json")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if env == nil {
		env = map[string]string{}
	}
	env["USERSYNC_ENDPOINTS_FILE"] = path
	fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return loadConfig(fs, "serve", nil, func(k string) string { return env[k] })
}

func TestEndpointsFile_AMistakeNamesTheSettingAndTheEndpointNeverTheSecret(t *testing.T) {
	t.Parallel()
	secret, _ := outbound.NewSecret()
	for _, tc := range []struct{ name, file, want string }{
		{"not JSON", `{`, "USERSYNC_ENDPOINTS_FILE"},
		{"an unknown field", `{"endpoints": [{"name": "crm", "url": "https://example.com", "secret": "` + secret + `", "token": "x"}]}`, "token"},
		{"a bad name", `{"endpoints": [{"name": "CRM!", "url": "https://example.com", "secret": "` + secret + `"}]}`, `endpoint 1 ("CRM!"): name`},
		{"a bad URL", `{"endpoints": [{"name": "crm", "url": "ftp://example.com", "secret": "` + secret + `"}]}`, `endpoint 1 ("crm")`},
		{"a private address", `{"endpoints": [{"name": "crm", "url": "http://10.1.2.3/hook", "secret": "` + secret + `"}]}`, "USERSYNC_ENDPOINTS_ALLOW_PRIVATE"},
		{"a bad secret", `{"endpoints": [{"name": "crm", "url": "https://example.com", "secret": "whsec_!!!!` + secret[10:] + `"}]}`, "secret"},
		{"a bad type", `{"endpoints": [{"name": "crm", "url": "https://example.com", "secret": "` + secret + `", "eventTypes": ["user.gone"]}]}`, "eventTypes"},
		{"a name twice", `{"endpoints": [{"name": "crm", "url": "https://example.com", "secret": "` + secret + `"}, {"name": "crm", "url": "https://example.org", "secret": "` + secret + `"}]}`, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := endpointsConfig(t, tc.file, nil)
			if err == nil {
				_, err = readEndpointsFile(cfg)
			}
			if err == nil || !strings.Contains(err.Error(), "USERSYNC_ENDPOINTS_FILE") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one naming USERSYNC_ENDPOINTS_FILE and %s", err, tc.want)
			}
			if strings.Contains(err.Error(), secret[6:]) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	cfg, err := endpointsConfig(t, `{"endpoints": [{"name": "lan", "url": "http://10.1.2.3/hook", "secret": "`+secret+`"}]}`,
		map[string]string{"USERSYNC_ENDPOINTS_ALLOW_PRIVATE": "true"})
	if err != nil {
		t.Fatal(err)
	}
	if eps, err := readEndpointsFile(cfg); err != nil || len(eps) != 1 || eps[0].ID != "cfg_lan" {
		t.Errorf("with private addresses allowed: %+v, %v", eps, err)
	}
}

func TestEndpointsFile_IsTheTruthAtEachStartAndLeavesTheAPIsEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, repotest.DataDir(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	secret, _ := outbound.NewSecret()
	now := time.Now().UTC().Truncate(time.Millisecond)
	api := models.Endpoint{ID: "ep_api", URL: "https://example.com/api", Enabled: true, Secret: secret, CreatedAt: now, UpdatedAt: now}
	if err := s.Outbound().CreateEndpoint(ctx, api); err != nil {
		t.Fatal(err)
	}
	start := func(file string) {
		t.Helper()
		cfg, err := endpointsConfig(t, file, nil)
		if err != nil {
			t.Fatal(err)
		}
		eps, err := readEndpointsFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := putConfigEndpoints(ctx, s.Outbound(), eps, now, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	start(`{"endpoints": [{"name": "crm", "url": "https://example.com/crm", "secret": "` + secret + `"},
		{"name": "mail", "url": "https://example.com/mail", "secret": "` + secret + `", "enabled": false}]}`)
	eps, _ := s.Outbound().Endpoints(ctx)
	if len(eps) != 3 || eps[0].ID != "cfg_crm" || !eps[0].FromConfig || !eps[0].Enabled || eps[1].Enabled {
		t.Fatalf("endpoints = %+v", eps)
	}
	start(`{"endpoints": [{"name": "crm", "url": "https://example.com/crm2", "secret": "` + secret + `"}]}`)
	eps, _ = s.Outbound().Endpoints(ctx)
	if len(eps) != 2 || eps[0].URL != "https://example.com/crm2" || eps[1].ID != "ep_api" {
		t.Errorf("after the file changed: %+v; want cfg_crm changed, cfg_mail gone, ep_api kept", eps)
	}
}

// TestServe_TheFilesEndpointsRecordTheFirstChange: serve records the
// changes for the endpoints of the file from its first request, before
// its dispatcher has run at all.
func TestServe_TheFilesEndpointsRecordTheFirstChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret, _ := outbound.NewSecret()
	cfg, err := endpointsConfig(t, `{"endpoints": [{"name": "app", "url": "https://example.com/hook", "secret": "`+secret+`"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, repotest.DataDir(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	svc := newService(cfg, s)
	if _, _, err := startOutbound(ctx, cfg, s, svc, api.NewMetrics(nil), newLogger(cfg)); err != nil {
		t.Fatal(err)
	}
	ch := models.UserChange{UserID: "user_first", EventID: "msg_first", SourceTime: time.Now().Add(-time.Minute), Metadata: []byte(`{}`)}
	ev := models.Event{EventID: "msg_first", Type: models.TypeUserCreated, EventType: models.EventCreated, UserID: "user_first",
		RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: time.Now()}
	if _, err := s.Deliver(ctx, ev, ch, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ob, err := s.Outbound().Outbox(ctx, 10); err != nil || len(ob) != 1 {
		t.Errorf("outbox = %+v, %v; want the first change recorded", ob, err)
	}
}

// TestServe_AStoreWithMoreEndpointsThanTheLimitStartsAndSaysWhy: 50
// endpoints of the API and 3 of the file make 53; serve's start writes
// the file's, warns naming the cause and the fix, and goes on.
func TestServe_AStoreWithMoreEndpointsThanTheLimitStartsAndSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret, _ := outbound.NewSecret()
	s, err := sqlite.Open(ctx, repotest.DataDir(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range models.MaxEndpoints {
		if err := s.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: fmt.Sprintf("ep_api%02d", i), URL: "https://example.com/api",
			Enabled: true, Secret: secret, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	var file []string
	for _, name := range []string{"a", "b", "c"} {
		file = append(file, `{"name": "`+name+`", "url": "https://example.com/`+name+`", "secret": "`+secret+`"}`)
	}
	cfg, err := endpointsConfig(t, `{"endpoints": [`+strings.Join(file, ",")+`]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	if _, _, err := startOutbound(ctx, cfg, s, newService(cfg, s), api.NewMetrics(nil), log); err != nil {
		t.Fatalf("start with 53 endpoints = %v, want it to start", err)
	}
	if eps, _ := s.Outbound().Endpoints(ctx); len(eps) != 53 {
		t.Errorf("%d endpoints stored, want the 50 and the file's 3", len(eps))
	}
	if !strings.Contains(logs.String(), "holds 53 endpoints, more than the 50") || !strings.Contains(logs.String(), "DELETE /v1/endpoints/{id}") {
		t.Errorf("the warning does not name the cause and the fix: %s", logs.String())
	}
	if err := s.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: "ep_more", URL: "https://example.com", Secret: secret}); err == nil {
		t.Error("an endpoint was created past the limit")
	}
}

// TestServe_AnEndpointKeptOnPlainHTTPStartsWithAWarning: an endpoint
// stored on plain http before usersync judged it, and one of the file on
// http://, start with a warning each that names it and the fix; an
// endpoint on https, or on plain http to a loopback address, none; with
// USERSYNC_ENDPOINTS_ALLOW_HTTP, no warning at all.
func TestServe_AnEndpointKeptOnPlainHTTPStartsWithAWarning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret, _ := outbound.NewSecret()
	for _, allow := range []string{"false", "true"} {
		s, err := sqlite.Open(ctx, repotest.DataDir(t), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		now := time.Now().UTC().Truncate(time.Millisecond)
		for _, e := range []models.Endpoint{
			{ID: "ep_old", URL: "http://93.184.216.34/hooks?token=abc", LegacyURL: true},
			{ID: "ep_tls", URL: "https://93.184.216.34/hooks", LegacyURL: true},
			{ID: "ep_new", URL: "http://hooks.example.com/in"},
		} {
			e.Enabled, e.Secret, e.CreatedAt, e.UpdatedAt = true, secret, now, now
			if err := s.Outbound().CreateEndpoint(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := endpointsConfig(t, `{"endpoints": [{"name": "crm", "url": "http://crm.example.com/hooks", "secret": "`+secret+`"},
			{"name": "lan", "url": "http://127.0.0.1:9000/hooks", "secret": "`+secret+`"}]}`,
			map[string]string{"USERSYNC_ENDPOINTS_ALLOW_PRIVATE": "true", "USERSYNC_ENDPOINTS_ALLOW_HTTP": allow})
		if err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		log := slog.New(slog.NewJSONHandler(&logs, nil))
		if _, _, err := startOutbound(ctx, cfg, s, newService(cfg, s), api.NewMetrics(nil), log); err != nil {
			t.Fatalf("start = %v, want it to start", err)
		}
		warned := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(line, "plain http://") {
				for _, id := range []string{"ep_old", "ep_tls", "ep_new", "cfg_crm", "cfg_lan"} {
					if strings.Contains(line, `"endpoint":"`+id+`"`) {
						warned[id] = true
					}
				}
				if strings.Contains(line, "token=abc") || !strings.Contains(line, "USERSYNC_ENDPOINTS_ALLOW_HTTP=true") {
					t.Errorf("the warning shows the URL's query, or names no fix: %s", line)
				}
			}
		}
		want := map[string]bool{"ep_old": true, "cfg_crm": true}
		if allow == "true" {
			want = map[string]bool{}
		}
		if fmt.Sprint(warned) != fmt.Sprint(want) {
			t.Errorf("USERSYNC_ENDPOINTS_ALLOW_HTTP=%s: warned of %v, want %v:\n%s", allow, warned, want, logs.String())
		}
	}
}
