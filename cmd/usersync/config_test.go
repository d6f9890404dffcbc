package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestConfig_DefaultsAndDurations(t *testing.T) {
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
