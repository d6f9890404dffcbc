package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/internal/service"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

func TestMain(m *testing.M) { repotest.Main(m) }

const (
	testSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	testAPIKey   = "usk_test_load"
	testAdminKey = "usk_test_load_admin"
	otherSecret  = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// newServer starts usersync in process on a fresh database of the test
// engine, with outbound webhooks on (endpoints on loopback allowed, the
// dispatcher running), and returns its URL. wrap, if set, wraps the
// store's deliveries.
func newServer(t *testing.T, wrap func(repository.Store) sync.Store) string {
	t.Helper()
	store := repotest.NewStore(t)
	svc := service.Sync(store, service.Options{WrapStore: wrap})
	d, ob := service.Outbound(store, svc, service.OutboundOptions{AllowPrivate: true, Owner: "load-test", Timeout: 5 * time.Second})
	e, err := api.New(service.API(store, svc, api.Config{
		Logger:         repotest.Discard(),
		WebhookSecrets: []string{testSecret},
		APIKeys:        []string{testAPIKey},
		AdminKeys:      []string{testAdminKey},
		Outbound:       ob,
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	srv := httptest.NewServer(e)
	t.Cleanup(func() { // before the store closes
		srv.Close()
		cancel()
		<-done
	})
	return srv.URL
}

// config is a small run against url.
func config(t *testing.T, url string) Config {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.updated.json"))
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		URL: url, Secret: testSecret, APIKey: testAPIKey, Template: tmpl,
		Users: 20, Updates: 3, Duplicates: 0.2, Shuffled: 0.3, Reads: 30,
		Concurrency: 8, Timeout: 5 * time.Minute, Seed: 1,
	}
}

func TestLoad_EndStateMatchesEveryAcknowledgedEvent(t *testing.T) {
	url := newServer(t, nil)
	rep, err := Run(context.Background(), config(t, url))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.OK() {
		t.Fatalf("end-state check failed: %q", rep.Check.Problems)
	}
	if rep.Check.Users != 20 || rep.Check.Listed != 20 {
		t.Errorf("check read back %d users and listed %d, want 20 and 20", rep.Check.Users, rep.Check.Listed)
	}
	// 20 creates, 60 updates, and a fifth of those 80 events again; a
	// delivery may stay unacknowledged on a slow machine (the server answers
	// 503 after 10 s), which the check allows for.
	if h := rep.Webhooks; h.Acknowledged+h.Unacknowledged != 80+16 || h.Acknowledged == 0 || h.Rejected != 0 || h.NotSent != 0 {
		t.Errorf("deliveries = %+v, want 96 sent and answered, none rejected", h)
	}
	for _, k := range Kinds {
		s := rep.Kind(k)
		if s.Requests == 0 || s.Max <= 0 {
			t.Errorf("kind %s: %d requests, max latency %v; want some of each kind", k, s.Requests, s.Max)
		}
		if !strings.Contains(out.String(), "\n"+string(k)+" ") {
			t.Errorf("printed report has no line for kind %s", k)
		}
	}
}

// TestLoad_SignInsMoveLastActiveAtOnly: with -sessions the updates are
// session events, answered activity (stale when shuffled behind a newer
// one), and the check finds every user as created, last active at its
// newest acknowledged sign-in.
func TestLoad_SignInsMoveLastActiveAtOnly(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Sessions = true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.OK() || rep.Check.Users != 20 {
		t.Fatalf("end-state check: %d users read back, problems %q", rep.Check.Users, rep.Check.Problems)
	}
	if !strings.Contains(out.String(), "sign-ins (session.created)") {
		t.Errorf("the report does not say the updates were sign-ins")
	}
}

// TestLoad_CheckFailsWhenASignInIsLost: a sign-in acknowledged and not
// applied fails the check.
func TestLoad_CheckFailsWhenASignInIsLost(t *testing.T) {
	cfg := config(t, newServer(t, dropping))
	cfg.Sessions, cfg.Reads, cfg.Duplicates = true, 0, 0
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(strings.Join(rep.Check.Problems, "\n"), "last active") {
		t.Errorf("the check passed or did not name the activity: %q", rep.Check.Problems)
	}
}

// dropUpdates acknowledges updates without writing them: it stores
// them and answers applied.
type dropUpdates struct{ repository.Store }

func dropping(s repository.Store) sync.Store { return dropUpdates{s} }

func (d dropUpdates) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if u, ok := ch.(models.UserChange); ok && !u.New {
		stored, created, err := d.Events().Record(ctx, ev)
		return models.Delivered{Event: stored, Created: created, Outcome: models.OutcomeApplied}, err
	}
	if _, ok := ch.(models.SessionChange); ok {
		stored, created, err := d.Events().Record(ctx, ev)
		return models.Delivered{Event: stored, Created: created, Outcome: models.OutcomeActivity}, err
	}
	return d.Store.Deliver(ctx, ev, ch, now)
}

func TestLoad_CheckFailsWhenAnAcknowledgedUpdateIsLost(t *testing.T) {
	url := newServer(t, dropping)
	cfg := config(t, url)
	cfg.Users, cfg.Reads = 4, 4
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("check passed, but every acknowledged update was dropped")
	}
	if p := strings.Join(rep.Check.Problems, "\n"); !strings.Contains(p, "shows v0, but v") {
		t.Errorf("problems = %s\nwant a user showing v0 after a later version was acknowledged", p)
	}
}

func TestLoad_RunExitsWithTheCheckFailed(t *testing.T) {
	url := newServer(t, dropping)
	args := []string{"-url", url, "-users", "2", "-updates", "1", "-reads", "2", "-seed", "3",
		"-template", filepath.Join("..", "..", "models", "testdata", "user.updated.json")}
	env := map[string]string{"CLERK_WEBHOOK_SECRET": testSecret + " whsec_other", "USERSYNC_API_KEYS": " ," + testAPIKey + ",x"}
	var out bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &out)
	if !errors.Is(err, errCheckFailed) {
		t.Fatalf("run = %v, want the check failed\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "end state: FAILED") {
		t.Errorf("output does not say the check failed:\n%s", out.String())
	}
}

func TestLoad_SecretsComeFromTheDataDirWhenUnset(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), []byte(`{"webhookSecret":"whsec_file","apiKey":"usk_file","adminKey":"usk_admin"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		env        map[string]string
		cfg        Config
		wantSecret string
		wantKey    string
	}{
		{"flags win", map[string]string{"CLERK_WEBHOOK_SECRET": "whsec_env"}, Config{Secret: "whsec_flag", APIKey: "usk_flag"}, "whsec_flag", "usk_flag"},
		{"environment, first of each", map[string]string{"CLERK_WEBHOOK_SECRET": " whsec_a whsec_b", "USERSYNC_API_KEYS": "usk_a,usk_b"}, Config{}, "whsec_a", "usk_a"},
		{"data dir", nil, Config{}, "whsec_file", "usk_file"},
		{"mixed", map[string]string{"USERSYNC_API_KEYS": "usk_env"}, Config{}, "whsec_file", "usk_env"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if err := fillSecrets(&cfg, func(k string) string { return tc.env[k] }, dir); err != nil {
				t.Fatal(err)
			}
			if cfg.Secret != tc.wantSecret || cfg.APIKey != tc.wantKey {
				t.Errorf("secret, key = %q, %q; want %q, %q", cfg.Secret, cfg.APIKey, tc.wantSecret, tc.wantKey)
			}
		})
	}
	cfg := Config{}
	if err := fillSecrets(&cfg, func(string) string { return "" }, t.TempDir()); err == nil {
		t.Error("fillSecrets with nothing anywhere succeeded, want an error")
	}
}

func TestLoad_RefusesAddressesOtherThanLoopback(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:8080", true},
		{"http://127.3.4.5:1/", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://[::1]:8080", true},
		{"https://127.0.0.1/base/", true},
		{"http://10.0.0.1:8080", false},
		{"http://192.168.1.2", false},
		{"http://example.com", false},
		{"http://localhost.example.com", false},
		{"http://127.0.0.1.example.com", false},
		{"http://[::2]:8080", false},
		{"http://0.0.0.0:8080", false},
		{"ftp://127.0.0.1", false},
		{"127.0.0.1:8080", false},
		{"", false},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			_, err := loopbackURL(tc.url)
			if (err == nil) != tc.ok {
				t.Errorf("loopbackURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
			}
			if err != nil && !errors.Is(err, errUsage) {
				t.Errorf("loopbackURL(%q) = %v, want a usage error", tc.url, err)
			}
		})
	}
	cfg := Config{URL: "http://192.0.2.1:8080", Secret: testSecret, APIKey: testAPIKey, Users: 1, Timeout: time.Second}
	if _, err := Run(context.Background(), cfg); err == nil {
		t.Error("Run against a non-loopback address started, want a refusal")
	}
}

func TestLoad_PlanSendsTheRequestedMix(t *testing.T) {
	tests := []struct {
		cfg       Config
		want      PlanCounts
		wantMixed int // jobs after the creates: update chains, shuffled updates, reads
	}{
		{Config{Users: 30, Updates: 4, Duplicates: 0.3, Shuffled: 0.5, Reads: 10}, PlanCounts{Events: 150, Duplicates: 45, Shuffled: 15, Reads: 10}, 15 + 15*4 + 10},
		{Config{Users: 3, Updates: 2, Duplicates: 0.01, Shuffled: 0.01}, PlanCounts{Events: 9, Duplicates: 1, Shuffled: 1}, 2 + 2},
		{Config{Users: 5, Updates: 0, Shuffled: 1, Reads: 1}, PlanCounts{Events: 5, Reads: 1}, 1},
		{Config{Users: 4, Updates: 1, Duplicates: 1, Shuffled: 1}, PlanCounts{Events: 8, Duplicates: 8, Shuffled: 4}, 4},
	}
	for _, tc := range tests {
		r := &runner{cfg: tc.cfg}
		p := r.plan()
		if p.counts != tc.want || len(p.creates) != tc.cfg.Users || len(p.mixed) != tc.wantMixed {
			t.Errorf("plan(%+v) = %+v with %d creates and %d other jobs; want %+v, %d, %d",
				tc.cfg, p.counts, len(p.creates), len(p.mixed), tc.want, tc.cfg.Users, tc.wantMixed)
		}
	}
}
