// Command scale measures what every operation of usersync costs as the
// database grows. For each size it seeds users and events shaped exactly
// as usersync writes them (through the repository's SeedUsers and
// SeedEvents, which build the documents with the code of the real
// writes), then times each operation through the real HTTP router
// (webhooks signed with svix), and a recovery sweep pass and a retention
// pass, and prints one Markdown table per size: p50, p99, samples, and
// the share of the time spent waiting for the database.
//
//	go run ./scripts/scale [-sizes 1000,10000] [-events-per-user 1 | -events M]
//	    [-orgs N -memberships N] [-payers N] [-deliveries N] [-requests 50] [-cap 10s] [-dir DIR] [-keep] [-seed-only] [-mongodb-uri URI]
//
// With no -mongodb-uri it opens the embedded store in DIR (a temporary
// directory by default). Without -keep the seeded
// database is dropped at the end; with -keep it stays, and a later run on
// the same -dir (or URI) seeds only what a size adds. An operation stops
// once it has spent -cap, so an operation that scans is measured a few
// times, or once, at large sizes; the output says which were capped.
// Loopback only, unless -mongodb-uri says otherwise; it stops by itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

func main() {
	var o flags
	flag.StringVar(&o.sizes, "sizes", "1000,10000", "comma-separated numbers of users present for each measurement, in increasing order")
	flag.Float64Var(&o.eventsPerUser, "events-per-user", 1, "stored events per user at each size")
	flag.IntVar(&o.events, "events", 0, "stored events at every size (overrides -events-per-user)")
	flag.IntVar(&o.orgs, "orgs", 0, "organizations present at every size (0: none, and no organization reads are measured)")
	flag.IntVar(&o.memberships, "memberships", 0, "memberships present at every size: membership i is user i's, in organization i mod -orgs")
	flag.IntVar(&o.payers, "payers", 0, "Clerk Billing payers present at every size (at most the users): payer i is user i, with one active subscription item, delivered as its webhook (0: none, and no billing reads are measured)")
	flag.IntVar(&o.deliveries, "deliveries", 0, "outbound deliveries present at every size (at most the users; 0 or at least 2000): one endpoint, delivery i is of user i, every 100th pending with a failed attempt, the others delivered with one attempt, and a few hundred entries in the outbox (0: none, and no outbound webhooks' queries are measured)")
	flag.IntVar(&o.requests, "requests", 50, "samples of each operation at each size")
	flag.DurationVar(&o.budget, "cap", 10*time.Second, "time budget of one operation at one size: once spent, the operation stops with the samples it has (at least one)")
	flag.StringVar(&o.dir, "dir", "", "data dir of the embedded store; default: a temporary directory")
	flag.StringVar(&o.uri, "mongodb-uri", "", "measure against this MongoDB (or compatible) server instead of the embedded store")
	flag.StringVar(&o.database, "database", "usersync_scale", "database name")
	flag.BoolVar(&o.keep, "keep", false, "leave the seeded database (and data dir) in place, so that a rerun seeds only what is missing; without it the database is dropped at the end, even one an earlier run kept")
	flag.DurationVar(&o.opTimeout, "operation-timeout", 0, "the store's timeout of one database operation (default: usersync's)")
	flag.BoolVar(&o.seedOnly, "seed-only", false, "seed the sizes and measure nothing (with -keep: prepare a database for later runs)")
	flag.IntVar(&o.batch, "batch", 1000, "documents per seeding call")
	flag.IntVar(&o.workers, "seed-workers", 2, "seeding calls in flight at once")
	only := flag.String("only", "", "measure only the operations whose name matches this regular expression (e.g. 'webhook|stats|metrics|sweep|retention': the linear reads leave the engine scanning after they time out, which slows what follows)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (seeding included) to this file")
	flag.Parse()
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale: -only:", err)
			os.Exit(2)
		}
		o.only = re
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type flags struct {
	sizes         string
	eventsPerUser float64
	events        int
	orgs          int
	memberships   int
	payers        int
	deliveries    int
	requests      int
	budget        time.Duration
	dir           string
	uri           string
	database      string
	keep          bool
	seedOnly      bool
	opTimeout     time.Duration
	batch         int
	workers       int
	only          *regexp.Regexp // measure only the operations it matches; nil: all
}

// size is one measurement point.
type size struct{ users, events, orgs, memberships, payers, deliveries int }

func (o flags) parseSizes() ([]size, error) {
	var out []size
	for _, f := range strings.Split(o.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sizes: %q is not a positive number", f)
		}
		s := size{users: n, events: int(float64(n) * o.eventsPerUser), orgs: o.orgs, memberships: min(o.memberships, n), payers: min(o.payers, n),
			deliveries: min(o.deliveries, n)}
		if o.events > 0 {
			s.events = o.events
		}
		if s.deliveries > 0 && s.deliveries < minDeliveries {
			return nil, fmt.Errorf("-deliveries: %d at %d users: 0 or at least %d (a backlog due now needs them)", s.deliveries, n, minDeliveries)
		}
		if len(out) > 0 && (s.users < out[len(out)-1].users || s.events < out[len(out)-1].events) {
			return nil, fmt.Errorf("-sizes: sizes must grow (%d after %d)", n, out[len(out)-1].users)
		}
		out = append(out, s)
	}
	return out, nil
}

func run(ctx context.Context, o flags, out, progress io.Writer) error {
	sizes, err := o.parseSizes()
	if err != nil {
		return err
	}
	if o.memberships > 0 && o.orgs < 1 {
		return errors.New("-memberships needs -orgs")
	}
	if o.requests < 1 || o.batch < 1 || o.workers < 1 || o.budget <= 0 {
		return errors.New("-requests, -batch, -seed-workers and -cap must be positive")
	}
	// usersync's default logger (JSON, info), writing nowhere: what it
	// costs to log a request, or to hand the engine a logger, is measured.
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	engineName := "MongoDB at -mongodb-uri"
	uri := o.uri
	dir := o.dir
	if uri == "" {
		engineName = "embedded store (SQLite, modernc.org/sqlite)"
		if dir == "" {
			if dir, err = os.MkdirTemp("", "usersync-scale-"); err != nil {
				return err
			}
			if !o.keep {
				defer os.RemoveAll(dir)
			}
		}
		if o.keep {
			abs, _ := filepath.Abs(dir)
			fmt.Fprintf(progress, "data dir (kept): %s\n", abs)
		}
	}
	b, err := newBench(ctx, o, dir, quiet, progress)
	if err != nil {
		return err
	}
	defer b.close(o.keep)

	fmt.Fprintf(out, "Engine: %s; %d CPUs, %s, %s/%s; %d samples per operation, %s budget per operation; %s.\n\n",
		engineName, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, o.requests, o.budget,
		time.Now().UTC().Format("2006-01-02 15:04 MST"))
	for _, s := range sizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		seeded, err := b.seedTo(ctx, s)
		if err != nil {
			return err
		}
		if o.seedOnly {
			fmt.Fprintf(out, "Seeded %s users and %s events: %s users in %s (%s/s), %s events in %s (%s/s).\n\n",
				thousands(s.users), thousands(s.events), thousands(seeded.users), seeded.usersIn.Round(time.Second),
				rate(seeded.users, seeded.usersIn), thousands(seeded.events), seeded.eventsIn.Round(time.Second),
				rate(seeded.events, seeded.eventsIn))
			if seeded.orgs+seeded.memberships > 0 {
				fmt.Fprintf(out, "Seeded %s organizations and %s memberships through Apply in %s (%s/s).\n\n",
					thousands(seeded.orgs), thousands(seeded.memberships), seeded.orgsIn.Round(time.Second),
					rate(seeded.orgs+seeded.memberships, seeded.orgsIn))
			}
			if seeded.deliveries+seeded.outbox > 0 {
				fmt.Fprintf(out, "Seeded %s outbound deliveries and %s outbox entries in %s (%s deliveries/s).\n\n",
					thousands(seeded.deliveries), thousands(seeded.outbox), seeded.deliveriesIn.Round(time.Second),
					rate(seeded.deliveries, seeded.deliveriesIn))
			}
			continue
		}
		rows, err := b.measure(ctx, s)
		if err != nil {
			return err
		}
		printTable(out, s, seeded, rows, o)
	}
	return nil
}
