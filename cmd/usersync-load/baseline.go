package main

import (
	"context"
	"fmt"
	"io"
)

// Comparison is one run of the same load against the naive handler and
// against usersync.
type Comparison struct {
	Naive, Usersync *Report
	Database        string // the naive handler's database, dropped at the end
}

// RunBaseline runs the load that cfg describes twice, with the same seed:
// first against the naive handler, in process on a fresh database at the
// MongoDB at uri (dropped at the end), then against the usersync at
// cfg.URL. The naive handler's end state is reported, not judged.
func RunBaseline(ctx context.Context, cfg Config, uri string) (*Comparison, error) {
	if err := cfg.normalize(); err != nil { // before anything is created
		return nil, err
	}
	if _, err := loopbackURL(cfg.URL); err != nil {
		return nil, err
	}
	naive, err := startNaive(ctx, uri, cfg.Secret, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	ncfg := cfg
	ncfg.URL, ncfg.Naive, ncfg.RunID = naive.URL, true, "" // a run id of its own
	ncfg.Endpoint = false                                  // the naive handler sends no webhooks
	nrep, err := Run(ctx, ncfg)
	if cerr := naive.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	urep, err := Run(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Comparison{Naive: nrep, Usersync: urep, Database: naive.Database}, nil
}

// KindRatio is the throughput of one kind of operation against both.
type KindRatio struct {
	Kind                        Kind // "all" for every request
	Usersync, Naive             float64
	UsersyncErrors, NaiveErrors int
}

// Ratio is usersync's throughput over the naive handler's; ok is false
// when either made no request of the kind.
func (k KindRatio) Ratio() (r float64, ok bool) {
	if k.Usersync <= 0 || k.Naive <= 0 {
		return 0, false
	}
	return k.Usersync / k.Naive, true
}

// compare pairs the throughput of each kind, then of all requests.
func compare(usersync, naive *Report) []KindRatio {
	var out []KindRatio
	for _, k := range Kinds {
		u, n := usersync.Kind(k), naive.Kind(k)
		out = append(out, KindRatio{Kind: k, Usersync: u.PerSecond, Naive: n.PerSecond, UsersyncErrors: u.Errors, NaiveErrors: n.Errors})
	}
	u, n := usersync.Total(), naive.Total()
	return append(out, KindRatio{Kind: "all", Usersync: u.PerSecond, Naive: n.PerSecond, UsersyncErrors: u.Errors, NaiveErrors: n.Errors})
}

// kindNames says what each kind is, in the comparison.
var kindNames = map[Kind]string{
	KindCreate:    "new users",
	KindUpdate:    "updates in order",
	KindShuffled:  "shuffled updates",
	KindDuplicate: "duplicates",
	KindGet:       "reads of a user",
	KindList:      "list pages",
	"all":         "all requests",
}

// printComparison writes one line per kind: both throughputs and their
// ratio.
func printComparison(w io.Writer, ratios []KindRatio) {
	fmt.Fprintln(w, "usersync against the naive baseline, same load and seed (throughput, usersync ÷ naive):")
	for _, k := range ratios {
		fmt.Fprintln(w, "  "+k.String())
	}
}

// String is the comparison of one kind, such as
// "new users (create): usersync 512.0 req/s, naive 600.0 req/s: 0.85×".
func (k KindRatio) String() string {
	name := string(k.Kind)
	if n, ok := kindNames[k.Kind]; ok && n != name {
		name = fmt.Sprintf("%s (%s)", n, k.Kind)
	}
	if k.Usersync <= 0 && k.Naive <= 0 {
		return name + ": none sent"
	}
	s := fmt.Sprintf("%s: usersync %s, naive %s", name, perSecond(k.Usersync), perSecond(k.Naive))
	if r, ok := k.Ratio(); ok {
		s += fmt.Sprintf(": %.2f×", r)
	}
	if k.UsersyncErrors > 0 || k.NaiveErrors > 0 {
		s += fmt.Sprintf(" (errors: usersync %d, naive %d)", k.UsersyncErrors, k.NaiveErrors)
	}
	return s
}

func perSecond(v float64) string {
	if v <= 0 {
		return "- req/s"
	}
	return fmt.Sprintf("%.1f req/s", v)
}
