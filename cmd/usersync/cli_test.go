package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/usersync/usersync/sync"
)

func runOut(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := runWith(context.Background(), args, func(string) string { return "" }, &out, &out); err != nil {
		t.Fatalf("usersync %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

func TestHelp_ListsEveryCommandAndEveryVariableWithItsDefault(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help", "help"} {
		out := runOut(t, arg)
		for name := range commands {
			if summaries[name] == "" {
				t.Errorf("command %s has no summary for the help", name)
			}
			if !regexp.MustCompile(`(?m)^  ` + name + ` +` + regexp.QuoteMeta(summaries[name])).MatchString(out) {
				t.Errorf("usersync %s does not list command %s:\n%s", arg, name, out)
			}
		}
		if !strings.Contains(out, "  version ") {
			t.Errorf("usersync %s does not list version:\n%s", arg, out)
		}
		for _, s := range settings {
			line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(envWithFlag(s)) + ` +` + regexp.QuoteMeta(orDash(s.shownDefault())) + `( |$)`)
			if !line.MatchString(out) {
				t.Errorf("usersync %s does not list %s with its default %q:\n%s", arg, s.Env, s.shownDefault(), out)
			}
		}
	}
}

func TestHelp_ACommandShowsOnlyItsOwnFlagsAndTheVariablesItReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command       string
		want, wantNot []string
		vars, varsNot []string
	}{
		{"serve", []string{"-addr", "-sweep-interval", "-retention", "-max-attempts", "-clerk-api-url", "-reconcile-interval", "-erase-after"}, []string{"-status", "-dry-run", "-limit", "-max-deletes"},
			[]string{"USERSYNC_ADDR", "CLERK_WEBHOOK_SECRET", "USERSYNC_API_KEYS", "MONGODB_URI", "CLERK_SECRET_KEY"}, nil},
		{"replay", []string{"-status", "-since", "-dry-run", "-database", "-data-dir"}, []string{"-addr", "-sweep-interval", "-retention", "-limit", "-clerk-api-url"},
			[]string{"MONGODB_URI", "USERSYNC_DATA_DIR", "USERSYNC_MAX_ATTEMPTS"}, []string{"USERSYNC_ADDR", "CLERK_WEBHOOK_SECRET", "CLERK_SECRET_KEY", "USERSYNC_RETENTION"}},
		{"backfill", []string{"-limit", "-offset", "-clerk-api-url", "-database"}, []string{"-addr", "-status", "-sweep-grace", "-retention"},
			[]string{"CLERK_SECRET_KEY", "CLERK_API_URL", "MONGODB_URI"}, []string{"USERSYNC_ADDR", "CLERK_WEBHOOK_SECRET", "USERSYNC_SWEEP_INTERVAL"}},
		{"reconcile", []string{"-limit", "-max-deletes", "-dry-run", "-clerk-api-url"}, []string{"-addr", "-status", "-offset", "-retention"},
			[]string{"CLERK_SECRET_KEY", "CLERK_API_URL", "MONGODB_URI", "USERSYNC_MAX_ATTEMPTS"}, []string{"USERSYNC_ADDR", "CLERK_WEBHOOK_SECRET", "USERSYNC_RECONCILE_INTERVAL"}},
		{"migrate", []string{"-database", "-data-dir"}, []string{"-addr", "-limit", "-clerk-api-url"},
			[]string{"MONGODB_URI", "MONGODB_DATABASE"}, []string{"CLERK_SECRET_KEY", "CLERK_WEBHOOK_SECRET", "USERSYNC_MAX_ATTEMPTS"}},
	}
	for _, tc := range tests {
		t.Run(tc.command, func(t *testing.T) {
			out := runOut(t, tc.command, "-h")
			flags, env, ok := strings.Cut(out, "\nEnvironment read by")
			if !ok {
				t.Fatalf("no environment section:\n%s", out)
			}
			// A command's own flags are listed under Flags; one that
			// mirrors a variable is listed with the variable.
			hasFlag := func(f string) bool {
				return regexp.MustCompile(`(?m)^  `+f+`( |$)`).MatchString(flags) || strings.Contains(env, "["+f+"]")
			}
			for _, f := range tc.want {
				if !hasFlag(f) {
					t.Errorf("%s -h lacks flag %s:\n%s", tc.command, f, out)
				}
			}
			for _, f := range tc.wantNot {
				if hasFlag(f) {
					t.Errorf("%s -h shows flag %s, which is not its own:\n%s", tc.command, f, out)
				}
			}
			for _, v := range tc.vars {
				if !strings.Contains(env, "  "+v+" ") {
					t.Errorf("%s -h lacks variable %s:\n%s", tc.command, v, out)
				}
			}
			for _, v := range tc.varsNot {
				if strings.Contains(env, v) {
					t.Errorf("%s -h lists variable %s, which it does not read:\n%s", tc.command, v, out)
				}
			}
		})
	}
}

func TestHelp_EveryCommandIsInTheTable(t *testing.T) {
	t.Parallel()
	for _, s := range settings {
		for _, c := range s.Commands {
			if _, ok := commands[c]; !ok {
				t.Errorf("%s is read by %q, which is not a command", s.Env, c)
			}
		}
	}
}

func TestRun_AnUnknownFlagOrCommandSaysWhereHelpIs(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-nope"}, {"replay", "-addr", ":1"}, {"frobnicate"}} {
		err := runWith(context.Background(), args, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "-h") {
			t.Errorf("usersync %v = %v, want an error that points to -h", args, err)
		}
	}
}

// TestDocs_ConfigurationTableIsTheSettingsTable keeps the configuration
// table of docs/configuration.md equal to the variables usersync reads.
func TestDocs_ConfigurationTableIsTheSettingsTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z_]+)`(?: \\[`(-[a-z-]+)`\\])? \\| ([^|]*) \\| ([^|]*) \\| [^|]* \\|$")
	var documented []string
	byEnv := map[string]setting{}
	for _, s := range settings {
		byEnv[s.Env] = s
	}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		env, flag, def, readBy := m[1], m[2], strings.Trim(strings.TrimSpace(m[3]), "`"), strings.TrimSpace(m[4])
		documented = append(documented, env)
		s, ok := byEnv[env]
		if !ok {
			t.Errorf("docs/configuration.md documents %s, which usersync does not read", env)
			continue
		}
		if want := orDash(s.Flag); flag != "-"+s.Flag && !(flag == "" && s.Flag == "") {
			t.Errorf("docs/configuration.md: %s mirrored by %q, want %q", env, flag, want)
		}
		if def != orDash(s.shownDefault()) {
			t.Errorf("docs/configuration.md: %s defaults to %q, want %q", env, def, orDash(s.shownDefault()))
		}
		wantReadBy := "all"
		if s.Commands != nil {
			wantReadBy = strings.Join(s.Commands, ", ")
		}
		if readBy != wantReadBy {
			t.Errorf("docs/configuration.md: %s read by %q, want %q", env, readBy, wantReadBy)
		}
	}
	for _, s := range settings {
		if !slices.Contains(documented, s.Env) {
			t.Errorf("docs/configuration.md does not document %s", s.Env)
		}
	}
}

func TestLogs_DurationsAreGoDurationStringsInBothFormats(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		var out bytes.Buffer
		log := newLogger(config{LogFormat: format, logTo: &out})
		log.Info("listening", slog.Duration("sweep_interval", 30*time.Second), slog.Duration("latency", 1503*time.Microsecond))
		got := out.String()
		want := map[string][]string{
			"json": {`"sweep_interval":"30s"`, `"latency":"1.503ms"`},
			"text": {`sweep_interval=30s`, `latency=1.503ms`},
		}[format]
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s log %q lacks %s", format, got, w)
			}
		}
		if format == "text" && !strings.HasPrefix(got, "time=") {
			t.Errorf("text log %q is not key=value", got)
		}
	}
}

func TestHelp_FitsIn100ColumnsAndListsEachVariableAndFlagOnce(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"serve", "-h"}, {"replay", "-h"}, {"backfill", "-h"}, {"reconcile", "-h"}, {"migrate", "-h"}} {
		out := runOut(t, args...)
		for i, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > 100 {
				t.Errorf("usersync %s: line %d is %d columns: %q", strings.Join(args, " "), i+1, n, line)
			}
		}
		for _, s := range settings {
			if n := len(regexp.MustCompile(`(?m)^  `+regexp.QuoteMeta(s.Env)+`\b`).FindAllString(out, -1)); n > 1 {
				t.Errorf("usersync %s lists %s %d times", strings.Join(args, " "), s.Env, n)
			}
			if s.Flag == "" {
				continue
			}
			flagLines := len(regexp.MustCompile(`(?m)^  -`+regexp.QuoteMeta(s.Flag)+`( |$)`).FindAllString(out, -1))
			if brackets := strings.Count(out, "[-"+s.Flag+"]"); flagLines+brackets > 1 {
				t.Errorf("usersync %s lists -%s %d times", strings.Join(args, " "), s.Flag, flagLines+brackets)
			}
		}
	}
}

// The help says what usersync keeps today (every kind, in either store),
// as the README does, and what backfill and reconcile read.
func TestHelp_SaysItKeepsEveryKindInEitherStore(t *testing.T) {
	t.Parallel()
	out := runOut(t, "-h")
	intro, _, _ := strings.Cut(out, "\nUsage:")
	for _, want := range []string{"users", "organizations", "memberships", "embedded store", "MongoDB"} {
		if !strings.Contains(intro, want) {
			t.Errorf("the help's opening does not say %q:\n%s", want, intro)
		}
	}
	if strings.Contains(intro, "MongoDB copy") || strings.Contains(intro, "user webhooks") {
		t.Errorf("the help's opening still says usersync keeps users only, in MongoDB:\n%s", intro)
	}
	for _, want := range []string{"Clerk Billing", "webhooks of its own"} {
		if !strings.Contains(strings.Join(strings.Fields(intro), " "), want) {
			t.Errorf("the help's opening does not say %q:\n%s", want, intro)
		}
	}
}

// TestHelp_NamesEveryKindBackfillReads: what says backfill and reconcile
// read Clerk (backfill's summary in usersync -h, CLERK_SECRET_KEY's
// description there and in docs/configuration.md, the README's command
// table) names every kind they read, subscription items included.
func TestHelp_NamesEveryKindBackfillReads(t *testing.T) {
	t.Parallel()
	var key setting
	for _, s := range settings {
		if s.Env == "CLERK_SECRET_KEY" {
			key = s
		}
	}
	texts := map[string]string{
		"backfill's summary":                       summaries["backfill"],
		"CLERK_SECRET_KEY's usage":                 key.Usage,
		"docs/configuration.md's CLERK_SECRET_KEY": docLine(t, "docs/configuration.md", "| `CLERK_SECRET_KEY` |"),
		"the README's backfill":                    docLine(t, "README.md", "| `backfill` |"),
		"the README's reconcile":                   docLine(t, "README.md", "| `reconcile` |"),
	}
	for what, text := range texts {
		for _, k := range sync.ReconcileKinds() {
			if name := strings.ReplaceAll(string(k), "_", " "); !strings.Contains(text, name) {
				t.Errorf("%s does not name %s: %q", what, name, text)
			}
		}
	}
}

// docLine is the line of the page rel that starts with prefix.
func docLine(t *testing.T, rel, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(readDoc(t, rel), "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("%s has no line starting %q", rel, prefix)
	return ""
}
