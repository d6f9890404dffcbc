package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/repository/mongo"
)

// secret is a configuration value that must never reach a log.
type secret string

func (secret) LogValue() slog.Value { return slog.StringValue("REDACTED") }

// config is usersync's configuration, from the environment; flags mirror
// the variables that are not secrets.
type config struct {
	Addr        string
	WebhookAddr string // "": the webhook is served on Addr
	// ConnsPerAddr bounds the connections one client address keeps open
	// on each listener; TrustedProxies are exempt, and the webhook bodies
	// they pass on count under the address they forward.
	ConnsPerAddr   int
	TrustedProxies peer.Proxies
	MetricsKey     secret // "": /metrics is open
	MongoURI       secret
	Database       string
	// CollectionPrefix is put before usersync's collection names (MongoDB).
	CollectionPrefix string
	// MongoBatch is how many deliveries share their round trips at most
	// (MongoDB; 1: none).
	MongoBatch int
	DataDir    string
	LogLevel   slog.Level
	LogFormat  string

	WebhookSecrets []secret
	// WebhookSecretVar is the variable the secrets came from:
	// CLERK_WEBHOOK_SECRET or Clerk's name for it.
	WebhookSecretVar string
	APIKeys          []secret
	AdminKeys        []secret

	ClerkSecretKey secret
	ClerkAPIURL    string
	// ClerkAPIRate is how many requests per 10 s this process sends to
	// Clerk's Backend API, all reads together (one limiter).
	ClerkAPIRate int

	SweepInterval time.Duration // 0 turns the background sweep off
	SweepGrace    time.Duration
	// BillingGrace: see api.Config.BillingGrace.
	BillingGrace time.Duration
	MaxAttempts  int
	Retention    time.Duration // 0 keeps processed events forever

	// EndpointsAllowPrivate: outbound endpoints may be on loopback and
	// private addresses; EndpointsAllowHTTP: on plain http to public
	// ones; EndpointsFile: the endpoints from configuration.
	EndpointsAllowPrivate bool
	EndpointsAllowHTTP    bool
	EndpointsFile         string

	ReconcileInterval time.Duration // 0: serve never runs reconcile
	EraseAfter        time.Duration // 0 never erases deleted users' events

	// logTo is where log lines go: standard output for serve, standard
	// error for the commands whose results go to standard output.
	logTo io.Writer
	// operand is the argument a command takes before its flags (discard's
	// event id); "" for the others.
	operand string
	// seams are what tests replace of the run.
	seams
}

// maxClerkAPIRate bounds CLERK_API_RATE: ten times what Clerk allows a
// production instance, so that a typo is caught and an instance with a
// raised limit can still use it.
const maxClerkAPIRate = 10_000

// embeddedRetention is the default retention with the embedded store: one
// file on one machine's disk (docs/configuration.md).
const embeddedRetention = 7 * 24 * time.Hour

// webhookSecretVar is the variable the webhook secrets are set with.
func (c config) webhookSecretVar() string {
	if c.WebhookSecretVar == "" {
		return "CLERK_WEBHOOK_SECRET"
	}
	return c.WebhookSecretVar
}

// Embedded reports whether the embedded store is used.
func (c config) Embedded() bool { return c.MongoURI == "" }

// setting is one environment variable. The table below is the one source
// of `usersync -h`, of each command's -h and of the configuration table of
// docs/configuration.md (a test keeps that table equal to it).
type setting struct {
	Env      string   // the variable
	Alias    string   // another name of the same variable, or ""
	Flag     string   // the flag that mirrors it; "" for secrets
	Default  string   // the value when the variable is unset or blank
	Shown    string   // the default as documented, when it is not Default
	Usage    string   // what it means, one line
	Commands []string // the commands that read it; nil means all of them
}

// Command sets of the settings table.
var (
	serveOnly  = []string{"serve"}
	processing = []string{"serve", "replay", "backfill", "reconcile"}
	clerkUsers = []string{"serve", "backfill", "reconcile"}
)

// settings are every environment variable usersync reads.
var settings = []setting{
	{Env: "USERSYNC_ADDR", Flag: "addr", Default: ":8080", Usage: "listen address, host:port (\":8080\" is every interface)", Commands: serveOnly},
	{Env: "USERSYNC_WEBHOOK_ADDR", Flag: "webhook-addr", Shown: "off", Usage: "serve the webhook (and /healthz) only here, host:port, and no longer on USERSYNC_ADDR", Commands: serveOnly},
	{Env: "USERSYNC_CONNS_PER_ADDR", Flag: "conns-per-addr", Default: strconv.Itoa(defaultConnsPerAddr), Usage: "connections one client address (an IPv6 address by its /64) keeps open on each listener, of 1,024; a trusted proxy's are not bounded", Commands: serveOnly},
	{Env: "USERSYNC_TRUSTED_PROXIES", Flag: "trusted-proxies", Shown: "none", Usage: "addresses or CIDR prefixes of your reverse proxies, comma-separated: their connections are not bounded per address, and webhook bodies they pass on count under the address they put in X-Forwarded-For", Commands: serveOnly},
	{Env: "USERSYNC_METRICS_KEY", Shown: "none", Usage: "if set, GET /metrics needs \"Authorization: Bearer <key>\" (16 characters or more)", Commands: serveOnly},
	{Env: "MONGODB_URI", Shown: "empty", Usage: "a MongoDB URI; empty: the embedded store"},
	{Env: "MONGODB_DATABASE", Flag: "database", Default: "usersync", Usage: "database name (a database of usersync's own)"},
	{Env: "USERSYNC_COLLECTION_PREFIX", Flag: "collection-prefix", Shown: "none", Usage: "prefix of usersync's collection names, to share a MongoDB database"},
	{Env: "USERSYNC_MONGODB_BATCH", Flag: "mongodb-batch", Default: strconv.Itoa(mongo.DefaultDeliveryBatch), Usage: "deliveries in flight at once that share their MongoDB round trips (one insert of their events, one write of their objects, one of their marks), 1 to 1000; 1 turns the sharing off", Commands: processing},
	{Env: "USERSYNC_DATA_DIR", Flag: "data-dir", Default: "./data", Usage: "the embedded store (usersync.db) and generated development secrets (secrets.json)"},
	{Env: "CLERK_WEBHOOK_SECRET", Alias: "CLERK_WEBHOOK_SIGNING_SECRET", Shown: "generated (embedded only)", Usage: "the endpoint's signing secret, whsec_...; several separated by spaces during rotation; CLERK_WEBHOOK_SIGNING_SECRET (Clerk's name) is the same setting", Commands: serveOnly},
	{Env: "USERSYNC_API_KEYS", Shown: "generated (embedded only)", Usage: "comma-separated keys that may read active users", Commands: serveOnly},
	{Env: "USERSYNC_ADMIN_KEYS", Shown: "generated (embedded only)", Usage: "comma-separated keys that may also read deleted users and the event log, and replay events", Commands: serveOnly},
	{Env: "USERSYNC_LOG_LEVEL", Flag: "log-level", Default: "info", Usage: "debug, info, warn or error"},
	{Env: "USERSYNC_LOG_FORMAT", Flag: "log-format", Default: "json", Usage: "json or text"},
	{Env: "CLERK_SECRET_KEY", Shown: "none", Usage: "Clerk's secret key (sk_live_... or sk_test_...), to read users, organizations, memberships, invitations and Clerk Billing's subscription items from Clerk's Backend API (backfill, reconcile, the sync routes)", Commands: clerkUsers},
	{Env: "CLERK_API_URL", Flag: "clerk-api-url", Default: "https://api.clerk.com/v1", Usage: "Clerk's Backend API base URL", Commands: clerkUsers},
	{Env: "CLERK_API_RATE", Flag: "clerk-api-rate", Default: "100", Usage: "requests per 10 s this process sends to Clerk's Backend API, all reads together (Clerk allows 1000 on production instances, 100 on development ones)", Commands: clerkUsers},
	{Env: "USERSYNC_SWEEP_INTERVAL", Flag: "sweep-interval", Default: "30s", Usage: "how often the recovery sweep and retention run; 0 turns them off", Commands: serveOnly},
	{Env: "USERSYNC_SWEEP_GRACE", Flag: "sweep-grace", Default: "1m", Usage: "how long a stored event is left to its delivery before the sweep takes it over", Commands: serveOnly},
	{Env: "USERSYNC_MAX_ATTEMPTS", Flag: "max-attempts", Default: "12", Usage: "attempts after which the sweep stops retrying a failed event", Commands: processing},
	{Env: "USERSYNC_RETENTION", Flag: "retention", Shown: "forever with MongoDB, 7d embedded", Usage: "how long processed events are kept (90s, 36h, 30d; 0 keeps them forever)", Commands: serveOnly},
	{Env: "USERSYNC_ERASE_AFTER", Flag: "erase-after", Default: "30d", Usage: "erase the event bodies of users deleted longer ago (0 never)", Commands: serveOnly},
	{Env: "USERSYNC_BILLING_GRACE", Flag: "billing-grace", Default: "5m", Usage: "how long a payer's plan reads as pending between a plan change's two events (the old item ended, the new one not arrived) before it reads as ended", Commands: serveOnly},
	{Env: "USERSYNC_ENDPOINTS_FILE", Flag: "endpoints-file", Shown: "none", Usage: "a JSON file of outbound webhook endpoints ({\"endpoints\": [{\"name\", \"url\", \"secret\", \"eventTypes\", \"description\", \"enabled\"}]}), each read-only through the API as cfg_<name>", Commands: serveOnly},
	{Env: "USERSYNC_ENDPOINTS_ALLOW_PRIVATE", Flag: "endpoints-allow-private", Default: "false", Usage: "true lets outbound webhook endpoints be on loopback, private and link-local addresses (checked on the address dialled)", Commands: serveOnly},
	{Env: "USERSYNC_ENDPOINTS_ALLOW_HTTP", Flag: "endpoints-allow-http", Default: "false", Usage: "true lets outbound webhook endpoints use plain http:// to public addresses, their messages unencrypted (checked on the address dialled); an endpoint stored on http:// before, or in the endpoints file, keeps it with a warning", Commands: serveOnly},
	{Env: "USERSYNC_RECONCILE_INTERVAL", Flag: "reconcile-interval", Shown: "off", Usage: "how often serve reconciles with Clerk, e.g. 6h; 0 or unset: never (needs CLERK_SECRET_KEY)", Commands: serveOnly},
}

// readBy reports whether command reads the variable.
func (s setting) readBy(command string) bool {
	return s.Commands == nil || slices.Contains(s.Commands, command)
}

// shownDefault is the default as help and docs/configuration.md show it.
func (s setting) shownDefault() string {
	if s.Shown != "" {
		return s.Shown
	}
	return s.Default
}

// loadConfig reads the variables command reads, and the flags in args, into
// a config; fs may hold the command's own flags already. Its error names the
// variable at fault; flag.ErrHelp means -h was asked for.
func loadConfig(fs *flag.FlagSet, command string, args []string, getenv func(string) string) (config, error) {
	v, err := readSettings(fs, command, args, getenv)
	if err != nil {
		return config{}, err
	}
	var c config
	// In this order: the store decides processing's default retention,
	// and the keys are checked against each other together.
	for _, part := range []func(*config, values) error{
		configureStore, configureProcessing, configureClerk, configureLogs, configureListeners, configureKeys, configureEndpoints,
	} {
		if err := part(&c, v); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

// values are the settings as read: each variable's value (its flag's when
// given, its default when unset) and the name it was read under.
type values struct {
	raw  map[string]*string
	from map[string]string
}

func (v values) get(name string) string { return *v.raw[name] }

// readSettings reads the variables command reads and parses the flags in
// args, which override them.
func readSettings(fs *flag.FlagSet, command string, args []string, getenv func(string) string) (values, error) {
	v := values{raw: map[string]*string{}, from: map[string]string{}}
	for _, s := range settings {
		val := s.Default
		v.from[s.Env] = s.Env
		if s.readBy(command) {
			e, name, err := readEnv(s, getenv)
			if err != nil {
				return values{}, err
			}
			if e != "" {
				val, v.from[s.Env] = e, name
			}
		}
		v.raw[s.Env] = &val
		if s.Flag != "" && s.readBy(command) {
			fs.StringVar(v.raw[s.Env], s.Flag, val, s.Usage+" ("+s.Env+")")
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return values{}, err
		}
		return values{}, fmt.Errorf("%w ('usersync %s -h' lists its flags)", err, command)
	}
	if fs.NArg() > 0 {
		return values{}, fmt.Errorf("unexpected argument %q ('usersync %s -h' lists its flags)", fs.Arg(0), command)
	}
	return v, nil
}

// configureStore sets which store is used and where.
func configureStore(c *config, v values) error {
	c.MongoURI = secret(v.get("MONGODB_URI"))
	c.Database = v.get("MONGODB_DATABASE")
	c.CollectionPrefix = v.get("USERSYNC_COLLECTION_PREFIX")
	c.DataDir = v.get("USERSYNC_DATA_DIR")
	if b := v.get("USERSYNC_MONGODB_BATCH"); b != "" {
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > maxMongoBatch {
			return fmt.Errorf("USERSYNC_MONGODB_BATCH: %q is not a whole number of deliveries from 1 to %d", b, maxMongoBatch)
		}
		c.MongoBatch = n
	}
	return nil
}

// maxMongoBatch bounds USERSYNC_MONGODB_BATCH: a batch is one command of
// each kind, whose size MongoDB bounds (16 MiB, 100,000 writes).
const maxMongoBatch = 1000

// configureProcessing sets the sweep, retention, erasure and reconcile
// schedules and the attempts of a failed event.
func configureProcessing(c *config, v values) error {
	for name, dst := range map[string]*time.Duration{
		"USERSYNC_SWEEP_INTERVAL":     &c.SweepInterval,
		"USERSYNC_SWEEP_GRACE":        &c.SweepGrace,
		"USERSYNC_BILLING_GRACE":      &c.BillingGrace,
		"USERSYNC_RETENTION":          &c.Retention,
		"USERSYNC_ERASE_AFTER":        &c.EraseAfter,
		"USERSYNC_RECONCILE_INTERVAL": &c.ReconcileInterval,
	} {
		d, err := parseDuration(v.get(name))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst = d
	}
	if v.get("USERSYNC_RETENTION") == "" && c.Embedded() {
		c.Retention = embeddedRetention
	}
	n, err := strconv.Atoi(v.get("USERSYNC_MAX_ATTEMPTS"))
	if err != nil || n < 1 {
		return fmt.Errorf("USERSYNC_MAX_ATTEMPTS: %q is not a whole number of at least 1", v.get("USERSYNC_MAX_ATTEMPTS"))
	}
	c.MaxAttempts = n
	return nil
}

// configureClerk sets the reads from Clerk's Backend API.
func configureClerk(c *config, v values) error {
	c.ClerkSecretKey = secret(v.get("CLERK_SECRET_KEY"))
	c.ClerkAPIURL = v.get("CLERK_API_URL")
	var err error
	if c.ClerkAPIRate, err = strconv.Atoi(v.get("CLERK_API_RATE")); err != nil || c.ClerkAPIRate < 1 || c.ClerkAPIRate > maxClerkAPIRate {
		return fmt.Errorf("CLERK_API_RATE: %q is not a whole number of requests per 10 s from 1 to %d (Clerk allows 1000 on production instances, 100 on development ones)",
			v.get("CLERK_API_RATE"), maxClerkAPIRate)
	}
	return nil
}

// configureLogs sets the logs' level and format.
func configureLogs(c *config, v values) error {
	if err := c.LogLevel.UnmarshalText([]byte(v.get("USERSYNC_LOG_LEVEL"))); err != nil {
		return fmt.Errorf("USERSYNC_LOG_LEVEL: %q is not debug, info, warn or error", v.get("USERSYNC_LOG_LEVEL"))
	}
	c.LogFormat = v.get("USERSYNC_LOG_FORMAT")
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return fmt.Errorf("USERSYNC_LOG_FORMAT: %q is not json or text", c.LogFormat)
	}
	return nil
}

// configureListeners sets serve's addresses and what a client address may
// hold of them.
func configureListeners(c *config, v values) error {
	c.Addr, c.WebhookAddr = v.get("USERSYNC_ADDR"), v.get("USERSYNC_WEBHOOK_ADDR")
	var err error
	if c.ConnsPerAddr, err = strconv.Atoi(v.get("USERSYNC_CONNS_PER_ADDR")); err != nil || c.ConnsPerAddr < 1 || c.ConnsPerAddr > defaultMaxConns {
		return fmt.Errorf("USERSYNC_CONNS_PER_ADDR: %q is not a whole number of connections from 1 to %d", v.get("USERSYNC_CONNS_PER_ADDR"), defaultMaxConns)
	}
	if c.TrustedProxies, err = peer.ParseProxies(v.get("USERSYNC_TRUSTED_PROXIES")); err != nil {
		return fmt.Errorf("USERSYNC_TRUSTED_PROXIES: %w", err)
	}
	if err := checkAddr("USERSYNC_ADDR", c.Addr); err != nil {
		return err
	}
	if c.WebhookAddr != "" {
		if err := checkAddr("USERSYNC_WEBHOOK_ADDR", c.WebhookAddr); err != nil {
			return err
		}
		if _, port, _ := net.SplitHostPort(c.Addr); c.WebhookAddr == c.Addr && port != "0" { // :0 picks a free port each time
			return fmt.Errorf("USERSYNC_WEBHOOK_ADDR: %q is USERSYNC_ADDR too: give the webhook another address, or unset it to serve the webhook on USERSYNC_ADDR", c.WebhookAddr)
		}
	}
	return nil
}

// configureKeys sets the webhook's secrets and the keys of the API and
// of /metrics, checked against each other.
func configureKeys(c *config, v values) error {
	c.WebhookSecrets = split(v.get("CLERK_WEBHOOK_SECRET"), " ")
	c.WebhookSecretVar = v.from["CLERK_WEBHOOK_SECRET"]
	c.APIKeys = split(v.get("USERSYNC_API_KEYS"), ",")
	c.AdminKeys = split(v.get("USERSYNC_ADMIN_KEYS"), ",")
	c.MetricsKey = secret(v.get("USERSYNC_METRICS_KEY"))
	if err := checkMetricsKey(*c); err != nil {
		return err
	}
	if err := checkKeys(c.APIKeys, c.AdminKeys); err != nil {
		return err
	}
	for _, s := range c.WebhookSecrets {
		if !strings.HasPrefix(string(s), "whsec_") {
			return fmt.Errorf("%s: each secret must start with whsec_ (copy it from the Clerk dashboard)", c.webhookSecretVar())
		}
	}
	return nil
}

// readEnv reads the variable of s, trimmed, and the name it was read
// under: its own, or its alias. Both set to different values is an error
// naming both: one of them would be ignored.
func readEnv(s setting, getenv func(string) string) (value, name string, err error) {
	value, name = strings.TrimSpace(getenv(s.Env)), s.Env
	if s.Alias == "" {
		return value, name, nil
	}
	alias := strings.TrimSpace(getenv(s.Alias))
	switch {
	case alias == "":
	case value == "":
		return alias, s.Alias, nil
	case strings.Join(strings.Fields(alias), " ") != strings.Join(strings.Fields(value), " "):
		return "", "", fmt.Errorf("%s and %s are both set, to different values: they are one setting; set only one", s.Env, s.Alias)
	}
	return value, name, nil
}

// minKeyLength is the shortest API or admin key accepted: a key is a
// password that cannot be rate-limited per user. Generated keys are 32
// characters and more.
const minKeyLength = 16

// checkKeys refuses a key shorter than minKeyLength and a key listed as
// both an API and an admin key (it would have one role or the other
// depending on the order the lists are read in). Errors name the
// variable and the key's position, never the key.
func checkKeys(apiKeys, adminKeys []secret) error {
	for _, list := range []struct {
		name string
		keys []secret
	}{{"USERSYNC_API_KEYS", apiKeys}, {"USERSYNC_ADMIN_KEYS", adminKeys}} {
		for i, k := range list.keys {
			if n := utf8.RuneCountInString(string(k)); n < minKeyLength {
				return fmt.Errorf("%s: key %d of %d is %d characters long; a key must have at least %d (generate one with: openssl rand -base64 24)",
					list.name, i+1, len(list.keys), n, minKeyLength)
			}
		}
	}
	for i, k := range apiKeys {
		if slices.Contains(adminKeys, k) {
			return fmt.Errorf("USERSYNC_API_KEYS and USERSYNC_ADMIN_KEYS: key %d of USERSYNC_API_KEYS is also an admin key; a key has one role: remove it from one of them", i+1)
		}
	}
	return nil
}

// checkAddr refuses a listen address without a colon, such as a bare port,
// and says what was probably meant; variable is the one that set it.
func checkAddr(variable, addr string) error {
	if strings.Contains(addr, ":") {
		return nil
	}
	if _, err := strconv.Atoi(addr); err == nil {
		return fmt.Errorf("%s: %q is not host:port: did you mean \":%s\" (every interface) or \"127.0.0.1:%s\"?", variable, addr, addr, addr)
	}
	return fmt.Errorf("%s: %q is not host:port (for example :8080 or 127.0.0.1:8080)", variable, addr)
}

// checkMetricsKey refuses a metrics key shorter than an API key may be, or
// one that is also an API or admin key: whoever scrapes the metrics must
// not be able to read users with the same key.
func checkMetricsKey(c config) error {
	k := c.MetricsKey
	if k == "" {
		return nil
	}
	if n := utf8.RuneCountInString(string(k)); n < minKeyLength {
		return fmt.Errorf("USERSYNC_METRICS_KEY: the key is %d characters long; it must have at least %d", n, minKeyLength)
	}
	if slices.Contains(c.APIKeys, k) || slices.Contains(c.AdminKeys, k) {
		return errors.New("USERSYNC_METRICS_KEY is also an API or admin key: give the metrics a key of their own")
	}
	return nil
}

// requireSecrets fails, naming the variable, when a secret is missing. With
// the embedded store the missing ones are generated instead.
func (c config) requireSecrets() error {
	if len(c.WebhookSecrets) == 0 {
		return errors.New("CLERK_WEBHOOK_SECRET (or CLERK_WEBHOOK_SIGNING_SECRET) is not set: set it to the endpoint's signing secret (whsec_...) from the Clerk dashboard")
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

// configureEndpoints sets outbound webhooks' endpoints from configuration
// and whether they may be on private addresses, and on plain http to
// public ones.
func configureEndpoints(c *config, v values) error {
	for name, dst := range map[string]*bool{
		"USERSYNC_ENDPOINTS_ALLOW_PRIVATE": &c.EndpointsAllowPrivate,
		"USERSYNC_ENDPOINTS_ALLOW_HTTP":    &c.EndpointsAllowHTTP,
	} {
		switch v.get(name) {
		case "true":
			*dst = true
		case "false":
		default:
			return fmt.Errorf("%s: %q is not true or false", name, v.get(name))
		}
	}
	c.EndpointsFile = v.get("USERSYNC_ENDPOINTS_FILE")
	return nil
}
