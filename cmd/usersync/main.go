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
	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/internal/peer"
	"github.com/usersync/usersync/internal/service"
	"github.com/usersync/usersync/outbound"
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
// then the connections left are closed.
const shutdownTimeout = 15 * time.Second

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
	return runSeams(ctx, args, getenv, stdout, stderr, seams{})
}

// seams are the parts of a run that tests replace, passed in so that
// tests that replace them still run in parallel; the zero value is
// production's.
type seams struct {
	// wrapStore, if set, stands between the service and the store's
	// deliveries; tests use it to stop the process in a delivery.
	wrapStore func(repository.Store) sync.Store
	// shutdownTimeout, if set, replaces shutdownTimeout.
	shutdownTimeout time.Duration
	// maxConns, if set, replaces defaultMaxConns.
	maxConns int
	// clerkRetry, if set, replaces clerk.DefaultRetry, the retry policy of
	// every read from Clerk.
	clerkRetry *clerk.RetryPolicy
	// outboundLease and outboundTimeout, if set, replace the outbound
	// dispatcher's lease and a request's time limit (tests restart a
	// killed process without waiting for a minute).
	outboundLease, outboundTimeout time.Duration
}

// shutdownBudget is how long in-flight requests may finish on stop.
func (s seams) shutdownBudget() time.Duration {
	if s.shutdownTimeout > 0 {
		return s.shutdownTimeout
	}
	return shutdownTimeout
}

// connCap is how many connections one listener of serve keeps open.
func (s seams) connCap() int {
	if s.maxConns > 0 {
		return s.maxConns
	}
	return defaultMaxConns
}

// retry is the retry policy of every read from Clerk.
func (s seams) retry() clerk.RetryPolicy {
	if s.clerkRetry != nil {
		return *s.clerkRetry
	}
	return clerk.DefaultRetry
}

// runSeams is runWith with seams.
func runSeams(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, seams seams) error {
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
	cfg.logTo, cfg.operand, cfg.seams = stderr, operand, seams
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
	background := newTasks(ctx)
	defer background.Stop() // before closeStore
	background.Go(buildIndexes(store, log))
	return serve(ctx, cfg, store, log, servers, background)
}

// checkServe checks what serve would find wrong in cfg only once it runs:
// the webhook secrets' encoding, and Clerk's settings.
func checkServe(cfg config) error {
	if err := api.CheckWebhookSecrets(strs(cfg.WebhookSecrets)); err != nil {
		return fmt.Errorf("%s: %w", cfg.webhookSecretVar(), err)
	}
	if _, _, err := clerkForServe(cfg, nil); err != nil {
		return err
	}
	_, err := readEndpointsFile(cfg)
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
		if err := l.listen(log, cfg.connCap(), cfg.ConnsPerAddr, cfg.TrustedProxies); err != nil {
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

// newService is the sync service with the configured retry policy.
func newService(cfg config, store repository.Store) *sync.Service {
	return service.Sync(store, service.Options{MaxAttempts: cfg.MaxAttempts, WrapStore: cfg.wrapStore})
}

// serve runs the HTTP servers on the bound listeners until ctx is
// cancelled, with the recovery sweep and the rest of the background work
// as tasks of background, then lets in-flight requests finish.
func serve(ctx context.Context, cfg config, store repository.Store, log *slog.Logger, servers []*listener, background *tasks) error {
	svc := newService(cfg, store)
	metrics := api.NewMetrics(store.Events())
	cl, fetcher, err := clerkForServe(cfg, svc)
	if err != nil {
		return err
	}
	background.Go(countActivity(svc, store, log))
	dispatcher, ob, err := startOutbound(ctx, cfg, store, svc, metrics, log)
	if err != nil {
		return err
	}
	apiCfg := service.API(store, svc, api.Config{
		Logger: log, Metrics: metrics, MetricsKey: string(cfg.MetricsKey), TrustedProxies: cfg.TrustedProxies,
		WebhookSecrets: strs(cfg.WebhookSecrets), APIKeys: strs(cfg.APIKeys), AdminKeys: strs(cfg.AdminKeys),
		ClerkSync: fetcher, Console: consoleConfig(ctx, svc, store, cl), BillingGrace: cfg.BillingGrace,
		Outbound: ob,
	})
	if b, ok := store.(api.Backuper); ok { // the embedded store
		apiCfg.Backup = b
	}
	if err := setHandlers(servers, apiCfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.webhookSecretVar(), err)
	}
	startSchedules(background, cfg, store, svc, cl, metrics, log)
	background.Go(dispatcher.Run)
	defer background.Stop() // once the servers have shut down

	errc := make(chan error, len(servers))
	for _, l := range servers {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	logListening(cfg, log, servers)
	var serveErr error
	select {
	case err := <-errc:
		serveErr = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdown(servers, log, cfg.shutdownBudget())
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

// startSchedules starts serve's work on a schedule as tasks of
// background: the scheduled reconcile, when configured, the refresh of
// /metrics' event counts, and the recovery sweep with retention and
// erasure, unless it is turned off.
func startSchedules(background *tasks, cfg config, store repository.Store, svc *sync.Service,
	cl *clerk.Client, metrics *api.Metrics, log *slog.Logger) {
	if cfg.ReconcileInterval > 0 {
		background.Go(scheduleReconcile(cfg, store, svc, cl, metrics, log))
	}
	background.Go(func(ctx context.Context) { metrics.RunStatsRefresh(ctx, statsInterval, log) })
	if cfg.SweepInterval > 0 {
		rec := &sync.Recovery{
			Service: svc, Store: store.Events(), Log: log,
			Grace: cfg.SweepGrace, Retention: cfg.Retention,
			Eraser: store, EraseAfter: cfg.EraseAfter,
			Observe: func(r sync.Report) { metrics.ObserveRecovery(r); logPass(log, r, cfg.Retention) },
		}
		background.Go(func(ctx context.Context) { rec.Run(ctx, cfg.SweepInterval) })
	}
}

// setHandlers sets the API of cfg on the servers: all of it on the first,
// or, with a webhook address, the webhook apart on the second.
func setHandlers(servers []*listener, cfg api.Config) error {
	if len(servers) == 1 {
		h, err := api.New(cfg)
		if err != nil {
			return err
		}
		servers[0].setHandler(h)
		return nil
	}
	h, webhook, err := api.NewApart(cfg)
	if err != nil {
		return err
	}
	servers[0].setHandler(h)
	servers[1].setHandler(webhook)
	return nil
}

// logListening logs the addresses serve listens on and its settings.
func logListening(cfg config, log *slog.Logger, servers []*listener) {
	attrs := []any{slog.String("addr", servers[0].ln.Addr().String())}
	if len(servers) > 1 {
		attrs = append(attrs, slog.String("webhook_addr", servers[1].ln.Addr().String()))
	}
	log.Info("listening", append(attrs,
		slog.Bool("embedded", cfg.Embedded()), slog.String("database", cfg.Database),
		slog.Duration("sweep_interval", cfg.SweepInterval), slog.Duration("retention", cfg.Retention),
		slog.Duration("erase_after", cfg.EraseAfter))...)
}

// shutdown lets the servers' in-flight requests finish within budget, then
// closes the connections left.
func shutdown(servers []*listener, log *slog.Logger, budget time.Duration) {
	sctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var wg stdsync.WaitGroup
	for _, l := range servers {
		wg.Go(func() {
			if err := l.srv.Shutdown(sctx); err != nil {
				// Requests that did not finish in time are cut: an event
				// they stored is finished by Svix's retry or the sweep.
				log.Warn("shutdown budget spent; closing the remaining connections",
					slog.String("addr", l.ln.Addr().String()),
					slog.Duration("budget", budget), slog.String("err", err.Error()))
				_ = l.srv.Close()
			}
		})
	}
	wg.Wait()
}

// listener is one HTTP server of serve and its address.
type listener struct {
	variable string // the variable that set addr, for errors
	addr     string
	ln       net.Listener
	limiter  *connLimiter
	srv      *http.Server // its handler is set by serve
}

// listen opens l's address and makes its server, without a handler; it
// keeps at most max connections, and one client address at most perAddr
// of them, unless it is one of the trusted proxies.
func (l *listener) listen(log *slog.Logger, max, perAddr int, proxies peer.Proxies) error {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("%s: %w", l.variable, err)
	}
	limited := newConnLimiter(ln, max, perAddr, proxies)
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

// startOutbound builds outbound webhooks: the endpoints of the
// configuration file written to the store, the dispatcher (which serve
// runs), and what the API's endpoints routes need.
func startOutbound(ctx context.Context, cfg config, store repository.Store, svc *sync.Service, metrics *api.Metrics,
	log *slog.Logger) (*outbound.Dispatcher, *api.Outbound, error) {
	eps, err := readEndpointsFile(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := putConfigEndpoints(ctx, store.Outbound(), eps, time.Now().UTC().Truncate(time.Millisecond), log); err != nil {
		return nil, nil, err
	}
	if !cfg.EndpointsAllowHTTP {
		if err := warnPlainHTTP(ctx, store.Outbound(), log); err != nil {
			return nil, nil, err
		}
	}
	host, _ := os.Hostname()
	d, ob := service.Outbound(store, svc, service.OutboundOptions{AllowPrivate: cfg.EndpointsAllowPrivate, AllowHTTP: cfg.EndpointsAllowHTTP,
		Owner: fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()), Log: log, Observer: metrics.Outbound(),
		Lease: cfg.outboundLease, Timeout: cfg.outboundTimeout, BillingGrace: cfg.BillingGrace})
	// Before the first request: the changes it applies are recorded for
	// the endpoints of the file.
	if err := d.Refresh(ctx); err != nil {
		return nil, nil, fmt.Errorf("read the outbound endpoints: %w", err)
	}
	return d, ob, nil
}
