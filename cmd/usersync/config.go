package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// secret is a configuration value that must never reach a log.
type secret string

func (secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// config is usersync's configuration, from the environment; flags mirror
// the variables that are not secrets.
type config struct {
	Addr      string
	MongoURI  secret
	Database  string
	DataDir   string
	LogLevel  slog.Level
	LogFormat string

	WebhookSecrets []secret
	APIKeys        []secret
	AdminKeys      []secret

	ClerkSecretKey secret
	ClerkAPIURL    string

	SweepInterval time.Duration // 0 turns the background sweep off
	SweepGrace    time.Duration
	MaxAttempts   int
	Retention     time.Duration // 0 keeps processed events forever

	ReconcileInterval time.Duration // 0: serve never runs reconcile
	EraseAfter        time.Duration // 0 never erases deleted users' events
}

// embeddedRetention is the default retention with the embedded engine,
// whose queries grow with the collection (README: limits).
const embeddedRetention = 7 * 24 * time.Hour

// Embedded reports whether the embedded engine is used.
func (c config) Embedded() bool { return c.MongoURI == "" }

// loadConfig reads the environment and the flags in args into a config;
// fs may hold a subcommand's flags already.
func loadConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := config{
		MongoURI:       secret(env("MONGODB_URI", "")),
		WebhookSecrets: split(getenv("CLERK_WEBHOOK_SECRET"), " "),
		APIKeys:        split(getenv("USERSYNC_API_KEYS"), ","),
		AdminKeys:      split(getenv("USERSYNC_ADMIN_KEYS"), ","),
		ClerkSecretKey: secret(env("CLERK_SECRET_KEY", "")),
	}
	fs.StringVar(&c.Addr, "addr", env("USERSYNC_ADDR", ":8080"), "listen address (USERSYNC_ADDR)")
	fs.StringVar(&c.Database, "database", env("MONGODB_DATABASE", "usersync"), "database name (MONGODB_DATABASE)")
	fs.StringVar(&c.DataDir, "data-dir", env("USERSYNC_DATA_DIR", "./data"), "embedded engine files and generated secrets (USERSYNC_DATA_DIR)")
	level := fs.String("log-level", env("USERSYNC_LOG_LEVEL", "info"), "debug, info, warn or error (USERSYNC_LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", env("USERSYNC_LOG_FORMAT", "json"), "json or text (USERSYNC_LOG_FORMAT)")
	fs.StringVar(&c.ClerkAPIURL, "clerk-api-url", env("CLERK_API_URL", "https://api.clerk.com/v1"), "Clerk Backend API base (CLERK_API_URL)")
	durations := []struct {
		name, flag, def, usage string
		dst                    *time.Duration
	}{
		{"USERSYNC_SWEEP_INTERVAL", "sweep-interval", "30s", "how often the recovery sweep runs; 0 turns it off", &c.SweepInterval},
		{"USERSYNC_SWEEP_GRACE", "sweep-grace", "1m", "how long a stored event is left to its delivery before the sweep takes it", &c.SweepGrace},
		{"USERSYNC_RETENTION", "retention", "", "how long processed events are kept, e.g. 720h or 30d; 0 keeps them (default: forever with MongoDB, 7d embedded)", &c.Retention},
		{"USERSYNC_RECONCILE_INTERVAL", "reconcile-interval", "", "how often serve reconciles with Clerk, e.g. 6h; 0 or empty: never (needs CLERK_SECRET_KEY)", &c.ReconcileInterval},
		{"USERSYNC_ERASE_AFTER", "erase-after", "30d", "erase the event bodies of users deleted longer ago; 0 never", &c.EraseAfter},
	}
	durText := make([]*string, len(durations))
	for i, d := range durations {
		durText[i] = fs.String(d.flag, env(d.name, d.def), d.usage+" ("+d.name+")")
	}
	maxAttempts := fs.String("max-attempts", env("USERSYNC_MAX_ATTEMPTS", "12"), "attempts before the sweep gives up on a failed event (USERSYNC_MAX_ATTEMPTS)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for i, d := range durations {
		v, err := parseDuration(*durText[i])
		if err != nil {
			return config{}, fmt.Errorf("%s: %w", d.name, err)
		}
		*d.dst = v
	}
	if *durText[2] == "" && c.Embedded() {
		c.Retention = embeddedRetention
	}
	n, err := strconv.Atoi(*maxAttempts)
	if err != nil || n < 1 {
		return config{}, fmt.Errorf("USERSYNC_MAX_ATTEMPTS: %q is not a whole number of at least 1", *maxAttempts)
	}
	c.MaxAttempts = n
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return config{}, fmt.Errorf("USERSYNC_LOG_LEVEL: %q is not debug, info, warn or error", *level)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return config{}, fmt.Errorf("USERSYNC_LOG_FORMAT: %q is not json or text", c.LogFormat)
	}
	for _, s := range c.WebhookSecrets {
		if !strings.HasPrefix(string(s), "whsec_") {
			return config{}, errors.New("CLERK_WEBHOOK_SECRET: each secret must start with whsec_ (copy it from the Clerk dashboard)")
		}
	}
	return c, nil
}

// requireSecrets fails, naming the variable, when a secret is missing. With
// the embedded engine the missing ones are generated instead.
func (c config) requireSecrets() error {
	if len(c.WebhookSecrets) == 0 {
		return errors.New("CLERK_WEBHOOK_SECRET is not set: set it to the endpoint's signing secret (whsec_...) from the Clerk dashboard")
	}
	if len(c.APIKeys) == 0 && len(c.AdminKeys) == 0 {
		return errors.New("USERSYNC_API_KEYS and USERSYNC_ADMIN_KEYS are not set: set at least one key for the REST API")
	}
	return nil
}

func split(s, sep string) []secret {
	var out []secret
	for _, f := range strings.Split(s, sep) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, secret(f))
		}
	}
	return out
}

func strs(ss []secret) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// parseDuration reads a Go duration ("90s", "36h") or a number of days
// ("30d"); "" and "0" are 0.
func parseDuration(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a duration such as 90s, 36h or 30d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 90s, 36h or 30d", s)
	}
	return d, nil
}
