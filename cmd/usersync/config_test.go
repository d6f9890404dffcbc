package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfig_DefaultsAndDurations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		env           map[string]string
		args          []string
		wantRetention time.Duration
		wantInterval  time.Duration
		wantErr       string
	}{
		{"embedded keeps processed events 7 days", nil, nil, 7 * 24 * time.Hour, 30 * time.Second, ""},
		{"MongoDB keeps them forever", map[string]string{"MONGODB_URI": "mongodb://db"}, nil, 0, 30 * time.Second, ""},
		{"days", map[string]string{"USERSYNC_RETENTION": "30d"}, nil, 30 * 24 * time.Hour, 30 * time.Second, ""},
		{"0 keeps forever on the embedded engine too", map[string]string{"USERSYNC_RETENTION": "0"}, nil, 0, 30 * time.Second, ""},
		{"flags win over the environment", map[string]string{"USERSYNC_SWEEP_INTERVAL": "1m"}, []string{"-sweep-interval", "5s"}, 7 * 24 * time.Hour, 5 * time.Second, ""},
		{"a bad duration names its variable", map[string]string{"USERSYNC_RETENTION": "forever"}, nil, 0, 0, "USERSYNC_RETENTION"},
		{"a bad attempt count names its variable", map[string]string{"USERSYNC_MAX_ATTEMPTS": "0"}, nil, 0, 0, "USERSYNC_MAX_ATTEMPTS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := loadConfig(fs, "serve", tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("loadConfig error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Retention != tc.wantRetention || cfg.SweepInterval != tc.wantInterval {
				t.Errorf("retention %v, sweep interval %v; want %v, %v", cfg.Retention, cfg.SweepInterval, tc.wantRetention, tc.wantInterval)
			}
		})
	}
}

func TestConfig_ClerksNameOfTheWebhookSecretIsTheSameSetting(t *testing.T) {
	t.Parallel()
	const a, b = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	tests := []struct {
		name    string
		env     map[string]string
		want    []secret
		wantErr []string
	}{
		{"Clerk's name alone", map[string]string{"CLERK_WEBHOOK_SIGNING_SECRET": a}, []secret{a}, nil},
		{"usersync's name alone", map[string]string{"CLERK_WEBHOOK_SECRET": a}, []secret{a}, nil},
		{"both, the same", map[string]string{"CLERK_WEBHOOK_SECRET": a + " " + b, "CLERK_WEBHOOK_SIGNING_SECRET": " " + a + "  " + b}, []secret{a, b}, nil},
		{"both, different", map[string]string{"CLERK_WEBHOOK_SECRET": a, "CLERK_WEBHOOK_SIGNING_SECRET": b}, nil,
			[]string{"CLERK_WEBHOOK_SECRET and CLERK_WEBHOOK_SIGNING_SECRET are both set, to different values"}},
		{"a bad value under Clerk's name", map[string]string{"CLERK_WEBHOOK_SIGNING_SECRET": "hunter2"}, nil,
			[]string{"CLERK_WEBHOOK_SIGNING_SECRET: each secret must start with whsec_"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := loadConfig(fs, "serve", nil, func(k string) string { return tc.env[k] })
			if tc.wantErr != nil {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("loadConfig error = %v, want one saying %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.WebhookSecrets, tc.want) {
				t.Errorf("webhook secrets = %v, want %v", strs(cfg.WebhookSecrets), strs(tc.want))
			}
		})
	}
}

// newFlagSet is a flag set for loadConfig that prints nothing.
func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestConfig_ClerkAPIRateIsTheLimiterOfEveryReadFromClerk(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		want        int
		wantErr     bool
	}{
		{"unset: a development instance's limit", "", 100, false},
		{"a production instance's limit", "1000", 1000, false},
		{"zero", "0", 0, true},
		{"not a number", "fast", 0, true},
		{"per second, not per 10 s", "100/s", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			env := map[string]string{"CLERK_API_RATE": tc.value, "CLERK_SECRET_KEY": "sk_test_rate"}
			cfg, err := loadConfig(fs, "reconcile", nil, func(k string) string { return env[k] })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "CLERK_API_RATE") {
					t.Errorf("CLERK_API_RATE=%q: error %v, want one naming CLERK_API_RATE", tc.value, err)
				}
				return
			}
			if err != nil || cfg.ClerkAPIRate != tc.want {
				t.Fatalf("CLERK_API_RATE=%q: %d, %v; want %d", tc.value, cfg.ClerkAPIRate, err, tc.want)
			}
			cl, err := newClerk(cfg, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := cl.Limiter.Burst(); got != tc.want || float64(cl.Limiter.Limit()) != float64(tc.want)/10 {
				t.Errorf("limiter: burst %d, %v per second; want %d and %v", got, cl.Limiter.Limit(), tc.want, float64(tc.want)/10)
			}
		})
	}
}

func TestConfig_ConnectionsPerAddressAndTrustedProxiesAreCheckedAndNamed(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (config, error) {
		fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return loadConfig(fs, "serve", nil, func(k string) string { return env[k] })
	}
	cfg, err := load(nil)
	if err != nil || cfg.ConnsPerAddr != 64 || len(cfg.TrustedProxies) != 0 {
		t.Fatalf("defaults: %d per address, proxies %v, %v; want 64 and none", cfg.ConnsPerAddr, cfg.TrustedProxies, err)
	}
	cfg, err = load(map[string]string{"USERSYNC_CONNS_PER_ADDR": "200", "USERSYNC_TRUSTED_PROXIES": "10.0.0.0/8, 192.168.1.7"})
	if err != nil || cfg.ConnsPerAddr != 200 || len(cfg.TrustedProxies) != 2 {
		t.Fatalf("set: %d per address, proxies %v, %v; want 200 and two", cfg.ConnsPerAddr, cfg.TrustedProxies, err)
	}
	for variable, value := range map[string]string{
		"USERSYNC_CONNS_PER_ADDR":  "0",
		"USERSYNC_TRUSTED_PROXIES": "proxy.internal",
	} {
		if _, err := load(map[string]string{variable: value}); err == nil || !strings.HasPrefix(err.Error(), variable+":") {
			t.Errorf("%s=%q: error %v, want one naming it", variable, value, err)
		}
	}
	if _, err := load(map[string]string{"USERSYNC_CONNS_PER_ADDR": "1025"}); err == nil {
		t.Error("more connections per address than a listener keeps was accepted")
	}
}
