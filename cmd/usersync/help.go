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
	"discard":   "give up on one failed event for good: usersync discard <eventId> -reason why",
	"backfill":  "apply each user, organization, membership, invitation, subscription item Clerk lists",
	"reconcile": "backfill, then soft-delete the users, organizations, memberships Clerk no longer has",
	"migrate":   "bring a database written by an earlier usersync up to date and build every index",
}

// printUsage writes `usersync -h`: the commands and every environment
// variable with its default.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `usersync keeps an application's copy of its Clerk users, organizations,
memberships and each payer's Clerk Billing plan correct, in its embedded store
(a SQLite file in the data dir) or in MongoDB: it receives Clerk's signed
webhooks, applies them in Clerk's order, exactly once, serves the copy over a
REST API, and tells the application of each change with signed webhooks of its
own.

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

Environment: each variable, its default, what it means and which commands
read it (a flag in brackets mirrors a variable and wins over it):

`)
	printSettings(w, "", func(setting) bool { return true })
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
	fmt.Fprintf(w, "Usage: usersync %s [flags]\n\n%s\n\n", name, wrap(summary, helpWidth, ""))
	// Its own flags; those that mirror a variable are listed with it
	// below, so that each is listed once.
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if !mirrorsAVariable(f.Name) {
			own.Var(f.Value, f.Name, f.Usage)
		}
	})
	if countFlags(own) == 0 {
		fmt.Fprintln(w, "Flags: only those that mirror a variable, below.")
	} else {
		fmt.Fprintln(w, "Flags:")
		own.SetOutput(w)
		own.PrintDefaults()
	}
	fmt.Fprintf(w, "\nEnvironment read by %s (a flag in brackets mirrors a variable and wins over it):\n\n", name)
	printSettings(w, name, func(s setting) bool { return s.readBy(name) })
}

// helpWidth is the widest line of the help texts.
const helpWidth = 100

// printSettings lists the settings keep admits, each once: the variable,
// its mirroring flag and its default on one line, what it means (and,
// for the whole list, which commands read it) wrapped below.
func printSettings(w io.Writer, command string, keep func(setting) bool) {
	for _, s := range settings {
		if !keep(s) {
			continue
		}
		fmt.Fprintf(w, "  %s   %s\n", envWithFlag(s), orDash(s.shownDefault()))
		usage := s.Usage
		if command == "" {
			readBy := "every command"
			if s.Commands != nil {
				readBy = strings.Join(s.Commands, ", ")
			}
			usage += ". Read by " + readBy + "."
		}
		fmt.Fprintln(w, wrap(usage, helpWidth, "      "))
	}
}

// mirrorsAVariable reports whether the flag name mirrors a variable.
func mirrorsAVariable(name string) bool {
	for _, s := range settings {
		if s.Flag == name {
			return true
		}
	}
	return false
}

func countFlags(fs *flag.FlagSet) int {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n
}

// wrap breaks text into lines of at most width columns, each starting
// with indent.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for _, word := range strings.Fields(text) {
		if line != indent && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += word
	}
	b.WriteString(line)
	return b.String()
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
