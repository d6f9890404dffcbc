package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestConfig_EraseAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    time.Duration
		wantErr bool
	}{
		{"30 days by default", nil, nil, 30 * 24 * time.Hour, false},
		{"0 turns it off", map[string]string{"USERSYNC_ERASE_AFTER": "0"}, nil, 0, false},
		{"hours", map[string]string{"USERSYNC_ERASE_AFTER": "36h"}, nil, 36 * time.Hour, false},
		{"the flag wins", map[string]string{"USERSYNC_ERASE_AFTER": "7d"}, []string{"-erase-after", "1d"}, 24 * time.Hour, false},
		{"a bad value names the variable", map[string]string{"USERSYNC_ERASE_AFTER": "soon"}, nil, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("usersync", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cfg, err := loadConfig(fs, "serve", tc.args, func(k string) string { return tc.env[k] })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "USERSYNC_ERASE_AFTER") {
					t.Fatalf("loadConfig error = %v, want one naming USERSYNC_ERASE_AFTER", err)
				}
				return
			}
			if err != nil || cfg.EraseAfter != tc.want {
				t.Errorf("EraseAfter = %v, %v; want %v", cfg.EraseAfter, err, tc.want)
			}
		})
	}
}
