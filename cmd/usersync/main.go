// Command usersync keeps an application's copy of its Clerk users,
// organizations and memberships, in its embedded store or in MongoDB: it
// receives Clerk's signed webhooks, applies them in order, and serves the
// copy over a small REST API.
//
// Usage:
//
//	usersync [command] [flags]
//
// `usersync -h` lists the commands and every environment variable; see
// README.md and docs/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	stdsync "sync"
	"syscall"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runWith(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "usersync:", err)
		os.Exit(1)
	}
}

// shutdownTimeout bounds how long in-flight requests may finish on stop;
// then the connections left are closed. A variable so that tests can
// shorten it.
var shutdownTimeout = 15 * time.Second

// readTimeout bounds the reading of one request, body included. It is
// shorter than shutdownTimeout, so that a client trickling a body cannot
// hold a shutdown past its budget.
const readTimeout = 10 * time.Second

// run is runWith with the logs of commands other than serve on the
// process's standard error.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	return runWith(ctx, args, getenv, out, os.Stderr)
}

// runWith runs a usersync command: serve (the default) until ctx is
// cancelled, or one of the operator commands. Help, versions and the
// results of commands go to stdout; serve logs to stdout too (it has no
// other output), the other commands log to stderr.
func runWith(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			printUsage(stdout)
			return nil
		case "version", "-version", "--version":
			printVersion(stdout)
			return nil
		}
		if !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown command %q: 'usersync -h' lists the commands", name)
	}
	fs := flag.NewFlagSet("usersync "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // help is printed below, errors are returned
	runCmd := cmd(fs)
	operand, args := splitOperand(name, args)
	cfg, err := loadConfig(fs, name, args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		printCommandUsage(stdout, name, fs)
		return nil
	}
	if err != nil {
		return err
	}
	cfg.logTo, cfg.operand = stderr, operand
	if name == "serve" {
		cfg.logTo = stdout
	}
	return runCmd(ctx, cfg, stdout)
}

// command declares a subcommand's own flags on fs and returns the function
// that runs it once fs is parsed.
type command func(fs *flag.FlagSet) func(ctx context.Context, cfg config, out io.Writer) error

var commands = map[string]command{
	"serve":     func(*flag.FlagSet) func(context.Context, config, io.Writer) error { return runServe },
	"replay":    replayCommand,
	"discard":   discardCommand,
	"backfill":  backfillCommand,
	"reconcile": reconcileCommand,
	"migrate":   migrateCommand,
}

// runServe serves the HTTP API until ctx is cancelled.
func runServe(ctx context.Context, cfg config, _ io.Writer) error {
	log := newLogger(cfg)
	if cfg.Embedded() {
		if err := fillDevSecrets(&cfg, log); err != nil {
			return err
		}
	} else if err := cfg.requireSecrets(); err != nil {
		return err
	}
	// Everything the configuration can get wrong fails here, before the
	// database is opened and indexes are built: the secrets, Clerk's
	// settings, the listen addresses (which are bound now).
	if err := checkServe(cfg); err != nil {
		return err
	}
	servers, err := listenAll(cfg, log)
	if err != nil {
		return err
	}
	defer closeAll(servers) // after a shutdown they are closed already

	store, closeStore, err := openStore(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer closeStore()
	indexesBuilt := buildIndexes(ctx, store, log)
	defer func() { <-indexesBuilt }() // before closeStore
	return serve(ctx, cfg, store, log, servers)
}

// checkServe checks what serve would find wrong in cfg only once it runs:
// the webhook secrets' encoding, and Clerk's settings.
func checkServe(cfg config) error {
	if err := api.CheckWebhookSecrets(strs(cfg.WebhookSecrets)); err != nil {
		return fmt.Errorf("%s: %w", cfg.webhookSecretVar(), err)
	}
	_, _, err := clerkForServe(cfg, nil)
	return err
}

// listenAll binds serve's addresses: USERSYNC_ADDR, and
// USERSYNC_WEBHOOK_ADDR when set.
func listenAll(cfg config, log *slog.Logger) ([]*listener, error) {
	servers := []*listener{{variable: "USERSYNC_ADDR", addr: cfg.Addr}}
	if cfg.WebhookAddr != "" {
		servers = append(servers, &listener{variable: "USERSYNC_WEBHOOK_ADDR", addr: cfg.WebhookAddr})
	}
	for _, l := range servers {
		if err := l.listen(log, cfg.ConnsPerAddr, cfg.TrustedProxies); err != nil {
			closeAll(servers)
			return nil, err
		}
	}
	return servers, nil
}

// newLogger is the logger of every part of usersync: JSON lines (or text)
// to cfg.logTo, durations as Go duration strings.
func newLogger(cfg config) *slog.Logger {
	out := cfg.logTo
	if out == nil {
		out = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: cfg.LogLevel, ReplaceAttr: durationStrings}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(out, opts))
	}
	return slog.New(slog.NewJSONHandler(out, opts))
}

// durationStrings writes a duration as "1m30s", not as a count of
// nanoseconds that a reader has to convert.
func durationStrings(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// wrapUsers stands between the service and the users store; tests use it
// to stop the process between storing an event and applying it.
var wrapUsers = func(u sync.UserStore) sync.UserStore { return u }

// newService is the sync service with the configured retry policy.
func newService(cfg config, store repository.Store) *sync.Service {
	svc := sync.New(store.Events(), wrapUsers(store.Users()), nil)
	svc.SetOrganizations(store.Organizations(), store.Memberships())
	b := sync.DefaultBackoff
	b.MaxAttempts = cfg.MaxAttempts
	svc.SetBackoff(b)
	return svc
}

// serve runs the HTTP servers on the bound listeners and the recovery
// sweep until ctx is cancelled, then lets in-flight requests finish.
func serve(ctx context.Context, cfg config, store repository.Store, log *slog.Logger, servers []*listener) error {
	svc := newService(cfg, store)
	metrics := api.NewMetrics(store.Events())
	cl, fetcher, err := clerkForServe(cfg, svc)
	if err != nil {
		return err
	}
	stopActivity := countActivity(ctx, svc, store, log)
	defer stopActivity()
	apiCfg := api.Config{
		Sync: svc, Users: store.Users(), Organizations: store.Organizations(), Memberships: store.Memberships(),
		Events: store.Events(), Eraser: store, DB: store, Logger: log, Metrics: metrics,
		WebhookSecrets: strs(cfg.WebhookSecrets), APIKeys: strs(cfg.APIKeys), AdminKeys: strs(cfg.AdminKeys),
		ClerkSync: fetcher, Console: consoleConfig(ctx, svc, store, cl), MetricsKey: string(cfg.MetricsKey),
		TrustedProxies: cfg.TrustedProxies,
	}
	if b, ok := store.(api.Backuper); ok { // the embedded store
		apiCfg.Backup = b
	}
	var handler, webhookHandler http.Handler
	if cfg.WebhookAddr == "" {
		handler, err = api.New(apiCfg)
	} else {
		handler, webhookHandler, err = newApart(apiCfg)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.webhookSecretVar(), err)
	}
	if cfg.ReconcileInterval > 0 {
		rctx, stopReconcile := context.WithCancel(ctx)
		wait := scheduleReconcile(rctx, cfg, store, svc, cl, metrics, log)
		defer func() { stopReconcile(); wait() }()
	}
	stopStats := background(ctx, func(ctx context.Context) { metrics.RunStatsRefresh(ctx, statsInterval, log) })
	defer stopStats()
	if cfg.SweepInterval > 0 {
		rec := &sync.Recovery{
			Service: svc, Store: store.Events(), Log: log,
			Grace: cfg.SweepGrace, Retention: cfg.Retention,
			Eraser: store, EraseAfter: cfg.EraseAfter,
			Observe: func(r sync.Report) { metrics.ObserveRecovery(r); logPass(log, r, cfg.Retention) },
		}
		done := make(chan struct{})
		rctx, stopRecovery := context.WithCancel(ctx)
		go func() {
			defer close(done)
			rec.Run(rctx, cfg.SweepInterval)
		}()
		defer func() { stopRecovery(); <-done }()
	}
	servers[0].setHandler(handler)
	if len(servers) > 1 {
		servers[1].setHandler(webhookHandler)
	}
	errc := make(chan error, len(servers))
	for _, l := range servers {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	attrs := []any{slog.String("addr", servers[0].ln.Addr().String())}
	if len(servers) > 1 {
		attrs = append(attrs, slog.String("webhook_addr", servers[1].ln.Addr().String()))
	}
	log.Info("listening", append(attrs,
		slog.Bool("embedded", cfg.Embedded()), slog.String("database", cfg.Database),
		slog.Duration("sweep_interval", cfg.SweepInterval), slog.Duration("retention", cfg.Retention),
		slog.Duration("erase_after", cfg.EraseAfter))...)

	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var wg stdsync.WaitGroup
	for _, l := range servers {
		wg.Go(func() {
			if err := l.srv.Shutdown(sctx); err != nil {
				// Requests that did not finish in time are cut: an event
				// they stored is finished by Svix's retry or the sweep.
				log.Warn("shutdown budget spent; closing the remaining connections",
					slog.String("addr", l.ln.Addr().String()),
					slog.Duration("budget", shutdownTimeout), slog.String("err", err.Error()))
				_ = l.srv.Close()
			}
		})
	}
	wg.Wait()
	if serveErr != nil {
		return serveErr
	}
	for range servers {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("stopped")
	return nil
}

// newApart is api.NewApart as two http.Handlers.
func newApart(cfg api.Config) (main, webhook http.Handler, err error) {
	m, w, err := api.NewApart(cfg)
	if err != nil {
		return nil, nil, err
	}
	return m, w, nil
}

// listener is one HTTP server of serve and its address.
type listener struct {
	variable string // the variable that set addr, for errors
	addr     string
	ln       net.Listener
	limiter  *connLimiter
	srv      *http.Server // its handler is set by serve
}

// listen opens l's address and makes its server, without a handler; one
// client address keeps at most perAddr of its connections, unless it is
// one of the trusted proxies.
func (l *listener) listen(log *slog.Logger, perAddr int, proxies peer.Proxies) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", l.variable, err)
	}
	limited := newConnLimiter(ln, maxConns, perAddr, proxies)
	l.ln, l.limiter = limited, limited
	l.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnState:         limited.connState,
		ConnContext:       limited.connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return nil
}

// setHandler sets the server's handler, seen by the connection limiter.
func (l *listener) setHandler(h http.Handler) {
	l.srv.Handler = l.limiter.track(h)
}

// closeAll closes the listeners opened so far.
func closeAll(servers []*listener) {
	for _, l := range servers {
		if l.ln != nil {
			l.ln.Close()
		}
	}
}
