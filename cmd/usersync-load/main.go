// Command usersync-load puts a running usersync under load and then checks
// what it kept. It sends Svix-signed Clerk user events, as Clerk would: new
// users, in-order updates, duplicate deliveries, and bursts of updates in
// shuffled order sent at once; it reads users and list pages with an API
// key meanwhile; it prints throughput and latency percentiles per kind of
// operation; and it checks through the REST API that every user ends in the
// newest state that usersync acknowledged, and that no user it never sent
// exists. With -sessions, the updates are sign-ins (session.created events
// that move only the user's lastActiveAt), so that a session event's cost
// reads beside a user update's of another run.
//
//	go run ./cmd/usersync-load [-url http://127.0.0.1:8080] [-users 100] [-updates 3]
//	    [-duplicates 0.1] [-shuffled 0.25] [-sessions] [-reads 200] [-concurrency 8] [-rate 0] [-timeout 2m] [-seed N]
//	    [-baseline mongodb://...] [-endpoint [-endpoint-wait 60s] [-hanging-endpoints 0]]
//
// Run it from the repository root: events are built from
// models/testdata/user.updated.json (see -template). The webhook secret
// defaults to $CLERK_WEBHOOK_SECRET and the API key to the first of
// $USERSYNC_API_KEYS, else both come from the secrets usersync generated in
// its data dir (./data/secrets.json).
//
// With -baseline, one run measures usersync against a naive handler on the
// same MongoDB: the program starts, inside itself on a loopback port, a
// handler that verifies the signature and upserts the user by id with one
// UpdateOne, and nothing else, on a fresh database of the MongoDB at the
// URI given (dropped at the end); it runs the load against it, then the
// same load (same flags and seed) against the usersync at -url, and prints
// both reports and, per kind of operation, both throughputs and their
// ratio. The naive handler keeps no order, no event log and no
// deduplication, so its end state is reported, not checked; the exit
// status is usersync's.
//
// With -endpoint, the run is also an app that receives usersync's outbound
// webhooks: the program starts, inside itself on a loopback port, a
// receiver that verifies every delivery's signature with svix and records,
// per user, the webhook-ids and the states received and when each
// arrived; it registers it through the admin API (POST /v1/endpoints, for
// user.*) before the load, with the admin key of -admin-key, else the
// first of $USERSYNC_ADMIN_KEYS, else adminKey of DATA_DIR/secrets.json;
// after the end-state check it waits, at most -endpoint-wait, until every
// user the load created has arrived in the state the check read back; and
// it deletes the endpoint at the end, interrupted or not. usersync must
// run with USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true to deliver to a loopback
// address. The report gains an outbound section; a user not received in
// its final state, or a signature that does not verify, fails the check.
// With -rate N, the webhook's requests are spaced evenly at N a second (a
// steady stream) instead of sent as fast as -concurrency allows. With
// -endpoint, the outbound section also says, while the load was sent, the
// endpoint's backlog read every second (its trend, and whether it grew by
// more than a second of the acknowledged webhooks) and, per 5 s window,
// the deliveries received against the webhooks acknowledged.
// With -hanging-endpoints N as well, the program also registers N
// endpoints on one more loopback server that reads each delivery and never
// answers it (it holds the request until usersync gives up or the run
// ends), so that the receiver's lag is measured while other endpoints
// hang; the report says how many requests they received, and they are
// deleted at the end.
//
// It talks to loopback addresses only (the MongoDB of -baseline may be
// anywhere: it is not what the load floods), bounds every loop in count
// and time, and stops by itself. The exit status is 1 when usersync's
// end-state check (or, with -endpoint, the outbound check) fails.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, errCheckFailed):
		os.Exit(1) // the report says why
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "usersync-load:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "usersync-load:", err)
		os.Exit(1)
	}
}

var (
	errCheckFailed = errors.New("end-state check failed")
	errUsage       = errors.New("usage")
)

// run parses args, runs the load and prints its report to out; with
// -baseline it runs the load against the naive handler too and prints
// both reports and their comparison. Its error wraps errCheckFailed when
// usersync's end state is wrong, and errUsage when the flags are.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	o, err := parseArgs(args, getenv, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := fillSecrets(&o.cfg, getenv, o.dataDir); err != nil {
		return err
	}
	b, err := os.ReadFile(o.template)
	if err != nil {
		return fmt.Errorf("read the event template (run from the repository root, or pass -template): %w", err)
	}
	o.cfg.Template = b

	var rep *Report
	if o.baseline != "" {
		cmp, err := RunBaseline(ctx, o.cfg, o.baseline)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "naive baseline: database %s of the MongoDB at -baseline (dropped)\n", cmp.Database)
		cmp.Naive.Print(out)
		fmt.Fprintln(out)
		cmp.Usersync.Print(out)
		fmt.Fprintln(out)
		printComparison(out, compare(cmp.Usersync, cmp.Naive))
		rep = cmp.Usersync
	} else {
		if rep, err = Run(ctx, o.cfg); err != nil {
			return err
		}
		rep.Print(out)
	}
	if !rep.OK() {
		return errCheckFailed
	}
	return nil
}

// cmdLine is a command line, parsed.
type cmdLine struct {
	cfg      Config // without its secrets and template, which run reads
	dataDir  string
	template string
	baseline string // MongoDB URI of the naive baseline; "" runs none
}

// parseArgs parses the command line. Its error is flag.ErrHelp for -h, or
// wraps errUsage.
func parseArgs(args []string, getenv func(string) string, out io.Writer) (cmdLine, error) {
	fs := flag.NewFlagSet("usersync-load", flag.ContinueOnError)
	fs.SetOutput(out)
	var (
		o    cmdLine
		cfg  = &o.cfg
		seed int64
	)
	dataDirDefault := getenv("USERSYNC_DATA_DIR")
	if dataDirDefault == "" {
		dataDirDefault = "./data"
	}
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "base URL of usersync (loopback only)")
	fs.StringVar(&cfg.Secret, "secret", "", "webhook signing secret (default $CLERK_WEBHOOK_SECRET, else webhookSecret of DATA_DIR/secrets.json)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "key for the users API (default the first of $USERSYNC_API_KEYS, else apiKey of DATA_DIR/secrets.json)")
	fs.StringVar(&o.dataDir, "data-dir", dataDirDefault, "usersync's data dir, where it keeps generated development secrets")
	fs.StringVar(&o.template, "template", filepath.Join("models", "testdata", "user.updated.json"), "Clerk user event to build events from")
	fs.IntVar(&cfg.Users, "users", 100, "new users in the run")
	fs.IntVar(&cfg.Updates, "updates", 3, "user.updated events per user")
	fs.BoolVar(&cfg.Sessions, "sessions", false, "send each update as a sign-in instead: a session.created embedding the user as created, which moves only its lastActiveAt (checked)")
	fs.Float64Var(&cfg.Duplicates, "duplicates", 0.1, "fraction of events delivered twice (same svix-id, signed again)")
	fs.Float64Var(&cfg.Shuffled, "shuffled", 0.25, "fraction of users whose updates are sent at once in shuffled order")
	fs.IntVar(&cfg.Reads, "reads", 200, "API reads during the updates: single users and list pages, half each")
	fs.IntVar(&cfg.PageSize, "page-size", 50, "limit of each list page read")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "requests in flight at most")
	fs.IntVar(&cfg.Rate, "rate", 0, "webhook requests a second, evenly spaced (a steady stream); 0 sends them as fast as -concurrency allows")
	fs.IntVar(&cfg.Attempts, "attempts", 4, "attempts per delivery: one, then retries after a 5xx or a transport error")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "bound of the whole run; the last quarter is kept for the check")
	fs.Int64Var(&seed, "seed", 0, "seed of the mix; 0 picks one (printed, to run the same mix again)")
	fs.BoolVar(&cfg.Endpoint, "endpoint", false, "also receive usersync's outbound webhooks on a loopback endpoint registered for the run (usersync needs USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true), and check that every user arrives in its final state")
	fs.BoolVar(&cfg.Drain, "drain", false, "with -endpoint, register the endpoint only after the load and its check, then resync it (POST /v1/endpoints/{id}/resync): every user's state is sent from a backlog of as many deliveries, and the report gives the rate the receiver got them at")
	fs.DurationVar(&cfg.EndpointWait, "endpoint-wait", time.Minute, "with -endpoint, how long to wait after the check for every user's final state to arrive")
	fs.DurationVar(&cfg.EndpointLatency, "endpoint-latency", 0, "with -endpoint, how long the receiver takes to answer each delivery; two deliveries of one user received at once fail the check")
	fs.IntVar(&cfg.HangingEndpoints, "hanging-endpoints", 0, "with -endpoint, also register this many endpoints (at most 8) on a loopback server that reads each delivery and never answers it, to measure the receiver's lag while they hang; deleted at the end")
	fs.StringVar(&cfg.AdminKey, "admin-key", "", "with -endpoint, the admin key that registers the endpoint (default the first of $USERSYNC_ADMIN_KEYS, else adminKey of DATA_DIR/secrets.json)")
	fs.StringVar(&o.baseline, "baseline", "", "MongoDB URI: first run the same load against a naive handler (verify, one upsert) on a fresh database there, dropped at the end, and print both and their ratio")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if o.baseline != "" {
		if err := checkMongoURI(o.baseline); err != nil {
			return o, err
		}
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	cfg.Seed = seed
	return o, nil
}

// fillSecrets sets the secret and API key that cfg lacks from the
// environment, then from the secrets usersync generated in dataDir.
func fillSecrets(cfg *Config, getenv func(string) string, dataDir string) error {
	if cfg.Secret == "" {
		cfg.Secret = first(getenv("CLERK_WEBHOOK_SECRET"), " ")
	}
	if cfg.APIKey == "" {
		cfg.APIKey = first(getenv("USERSYNC_API_KEYS"), ",")
	}
	if cfg.Endpoint && cfg.AdminKey == "" {
		cfg.AdminKey = first(getenv("USERSYNC_ADMIN_KEYS"), ",")
	}
	if cfg.Secret != "" && cfg.APIKey != "" && (!cfg.Endpoint || cfg.AdminKey != "") {
		return nil
	}
	path := filepath.Join(dataDir, "secrets.json")
	b, err := os.ReadFile(path)
	if err != nil {
		if cfg.Secret != "" && cfg.APIKey != "" {
			return fmt.Errorf("%w: %w (%s: %w)", errUsage, errNoAdminKey, path, err)
		}
		return fmt.Errorf("no -secret/-api-key, CLERK_WEBHOOK_SECRET/USERSYNC_API_KEYS unset, and %w", err)
	}
	var s struct {
		WebhookSecret string `json:"webhookSecret"`
		APIKey        string `json:"apiKey"`
		AdminKey      string `json:"adminKey"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if cfg.Secret == "" {
		cfg.Secret = s.WebhookSecret
	}
	if cfg.APIKey == "" {
		cfg.APIKey = s.APIKey
	}
	if cfg.Endpoint && cfg.AdminKey == "" {
		cfg.AdminKey = s.AdminKey
	}
	switch {
	case cfg.Secret == "":
		return fmt.Errorf("no webhook secret: pass -secret or set CLERK_WEBHOOK_SECRET (%s has none)", path)
	case cfg.APIKey == "":
		return fmt.Errorf("no API key: pass -api-key or set USERSYNC_API_KEYS (%s has none)", path)
	case cfg.Endpoint && cfg.AdminKey == "":
		return fmt.Errorf("%w: %w (%s has none)", errUsage, errNoAdminKey, path)
	}
	return nil
}

// first returns the first non-empty field of s split by sep.
func first(s, sep string) string {
	for _, f := range strings.Split(s, sep) {
		if f = strings.TrimSpace(f); f != "" {
			return f
		}
	}
	return ""
}
