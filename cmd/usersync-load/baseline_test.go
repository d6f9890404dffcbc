package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/mongo/mongotest"
)

func TestBaseline_FlagTakesAMongoDBURIAndIsOffByDefault(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parseArgs([]string{"-users", "5"}, env, io.Discard)
	if err != nil || o.baseline != "" || o.cfg.Users != 5 {
		t.Errorf("without -baseline: %+v, %v; want no baseline", o, err)
	}
	uri := "mongodb://user:pw@db.example.net:27017/?replicaSet=rs0"
	o, err = parseArgs([]string{"-baseline", uri, "-seed", "9"}, env, io.Discard)
	if err != nil || o.baseline != uri || o.cfg.Seed != 9 {
		t.Errorf("-baseline %s: %+v, %v; want the URI kept as given", uri, o, err)
	}
	for _, bad := range []string{"http://127.0.0.1:27017", "127.0.0.1:27017", "mongodb://h/?directConnection=maybe"} {
		var out bytes.Buffer
		_, err := parseArgs([]string{"-baseline", bad}, env, &out)
		if !errors.Is(err, errUsage) {
			t.Errorf("-baseline %q: %v, want a usage error", bad, err)
		}
	}
	if _, err := parseArgs([]string{"-baseline"}, env, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("-baseline without a value: %v, want a usage error", err)
	}
	if got := redactURI(uri); strings.Contains(got, "pw") || !strings.Contains(got, "db.example.net") {
		t.Errorf("redactURI(%q) = %q, want the host without the password", uri, got)
	}
}

func TestBaseline_PrintsBothThroughputsAndTheirRatioPerKind(t *testing.T) {
	report := func(naive bool, create, update float64, createErrs int) *Report {
		return &Report{
			Config: Config{Naive: naive}, Elapsed: 2 * time.Second,
			Kinds: []KindSummary{
				{Kind: KindCreate, Requests: 1000, Errors: createErrs, PerSecond: create},
				{Kind: KindUpdate, Requests: 600, PerSecond: update},
				{Kind: KindGet}, // none sent
			},
		}
	}
	ratios := compare(report(false, 512, 300, 0), report(true, 600, 0, 2))
	var out bytes.Buffer
	printComparison(&out, ratios)
	for _, want := range []string{
		"new users (create): usersync 512.0 req/s, naive 600.0 req/s: 0.85× (errors: usersync 0, naive 2)\n",
		"updates in order (update): usersync 300.0 req/s, naive - req/s\n", // no ratio without both
		"reads of a user (get): none sent\n",
		"all requests (all): usersync 800.0 req/s, naive 800.0 req/s: 1.00× (errors: usersync 0, naive 2)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("comparison has no line %q:\n%s", want, out.String())
		}
	}
	if r, ok := ratios[0].Ratio(); !ok || r < 0.853 || r > 0.854 {
		t.Errorf("ratio of creates = %v, %t; want 512/600", r, ok)
	}
}

func TestBaseline_TheNaiveEndStateIsReportedNotJudged(t *testing.T) {
	probs := []string{"user a shows v1, but v2 was acknowledged", "b", "c", "d"}
	naive := &Report{Config: Config{Naive: true}, Check: Check{Problems: probs, More: 2}}
	if !naive.OK() {
		t.Error("the naive handler's run failed on its end state, want it reported only")
	}
	var out bytes.Buffer
	naive.Print(&out)
	if s := out.String(); !strings.Contains(s, "end state: not checked") || !strings.Contains(s, "found 6 problems") ||
		!strings.Contains(s, probs[0]) || strings.Contains(s, "- d") || strings.Contains(s, "FAILED") {
		t.Errorf("naive report:\n%s\nwant the check not applied, 6 problems counted and the first 3 shown", s)
	}
	usersync := &Report{Check: Check{Problems: probs}}
	if usersync.OK() {
		t.Error("usersync's run with problems is OK, want it failed")
	}
}

// TestBaseline_OneRunMeasuresBoth runs the baseline end to end: the naive
// handler on a fresh database at MONGODB_URI and usersync on another, the
// same load against each, both reports, the comparison, and the naive
// database dropped at the end.
func TestBaseline_OneRunMeasuresBoth(t *testing.T) {
	uri := mongotest.URI(t)
	url := newServer(t, nil) // usersync on a database of its own at MONGODB_URI
	args := []string{"-url", url, "-baseline", uri, "-secret", testSecret, "-api-key", testAPIKey,
		"-users", "20", "-updates", "2", "-reads", "10", "-concurrency", "8", "-seed", "5", "-timeout", "3m",
		"-template", filepath.Join("..", "..", "models", "testdata", "user.updated.json")}
	var out bytes.Buffer
	if err := run(context.Background(), args, os.Getenv, &out); err != nil {
		t.Fatalf("run = %v\n%s", err, out.String())
	}
	s := out.String()
	t.Logf("output:\n%s", s)
	for _, want := range []string{
		"against the naive handler at http://127.0.0.1:", "end state: not checked",
		"against " + url + " (seed 5)", "end state: OK",
		"new users (create): usersync ", "all requests (all): usersync ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output has no %q", want)
		}
	}
	if strings.Contains(s, "want processed") || strings.Contains(s, "want applied") {
		t.Error("the naive handler's answers were judged as usersync's")
	}
	if n := strings.Count(s, "20 users × 2 updates = 60 events"); n != 2 {
		t.Errorf("output has %d runs of the same plan, want 2", n)
	}
	m := regexp.MustCompile(`database (` + naiveDBPrefix + `[0-9a-f]+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatal("output names no naive database")
	}
	if !dropped(t, m[1]) {
		t.Errorf("the naive database %s is still there", m[1])
	}
}
