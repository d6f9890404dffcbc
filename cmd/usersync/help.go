package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/usersync/usersync/internal/buildinfo"
)

// summaries say in one line what each command does, for `usersync -h`;
// every command has one (a test checks).
var summaries = map[string]string{
	"serve":     "serve the webhook and the REST API, run the recovery sweep and retention (the default)",
	"replay":    "process stored or failed events again, in Clerk's order; results on standard output",
	"backfill":  "apply every user read from Clerk's Backend API; results on standard output",
	"reconcile": "backfill, then soft-delete local users Clerk no longer has (-max-deletes, -dry-run); results on standard output",
	"migrate":   "bring a database written by an earlier usersync up to date and build every index",
}

// printUsage writes `usersync -h`: the commands and every environment
// variable with its default.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `usersync keeps an application's MongoDB copy of its Clerk users: it receives
Clerk's signed user webhooks, applies them in Clerk's order and serves the
users over a REST API.

Usage:
  usersync [command] [flags]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", name, summaries[name])
	}
	fmt.Fprintf(tw, "  version\tprint the version, the VCS revision and the Go version\n")
	fmt.Fprintf(tw, "  help\tprint this text (also -h)\n")
	_ = tw.Flush()
	fmt.Fprint(w, `
With no command, usersync serves. 'usersync COMMAND -h' lists the flags of a
command and the variables it reads.

Environment (a flag in brackets mirrors a variable and wins over it):
`)
	tw = tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "  VARIABLE\tDEFAULT\tREAD BY\tMEANING\n")
	for _, s := range settings {
		readBy := "all"
		if s.Commands != nil {
			readBy = strings.Join(s.Commands, ", ")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", envWithFlag(s), orDash(s.shownDefault()), readBy, s.Usage)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Logs are JSON lines (USERSYNC_LOG_FORMAT=text for text): serve writes them to
standard output; replay and backfill write their results to standard output
and their logs to standard error.
`)
}

// printCommandUsage writes `usersync COMMAND -h`: the command's own flags
// and the variables it reads.
func printCommandUsage(w io.Writer, name string, fs *flag.FlagSet) {
	summary := summaries[name]
	if summary != "" {
		summary = strings.ToUpper(summary[:1]) + summary[1:] + "."
	}
	fmt.Fprintf(w, "Usage: usersync %s [flags]\n\n%s\n\nFlags:\n", name, summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nEnvironment read by %s (a flag in brackets mirrors a variable and wins over it):\n", name)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, s := range settings {
		if s.readBy(name) {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", envWithFlag(s), orDash(s.shownDefault()), s.Usage)
		}
	}
	_ = tw.Flush()
}

// printVersion writes `usersync version`.
func printVersion(w io.Writer) {
	v := buildinfo.Read()
	modified := ""
	if v.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(w, "usersync %s\nrevision %s%s\n%s\n", v.Version, v.Revision, modified, v.GoVersion)
}

func envWithFlag(s setting) string {
	if s.Flag == "" {
		return s.Env
	}
	return s.Env + " [-" + s.Flag + "]"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
