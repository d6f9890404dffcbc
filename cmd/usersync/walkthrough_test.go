package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/usersync/usersync/outbound"
)

// The walkthroughs of the docs, run as written: the shell blocks of a
// section run with bash, in a copy of the repository (its files linked,
// with a data dir of its own), against a usersync started as the section
// says, each command's output matched against the comment lines under it.
// What changes: the addresses (the docs' localhost:8080 is the address the
// test's usersync listens on, and so on), and the environment (usersync's
// variables set in the test's own are dropped; USERSYNC_ADDR names the
// test's usersync, whose webhook sendevent then posts to, as it does for
// a reader).

// walkthrough is one documented walkthrough being run.
type walkthrough struct {
	t   *testing.T
	dir string   // the repository's copy, where the commands run
	env []string // the commands' environment
	// subst are the replacements made in each command: pairs of what
	// the docs say and what this run uses.
	subst []string
}

// newWalkthrough prepares a run; it skips the test when bash, curl or jq
// is missing (Debian: apt-get install curl jq).
func newWalkthrough(t *testing.T) *walkthrough {
	t.Helper()
	for _, tool := range []string{"bash", "curl", "jq", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walkthrough needs %s, which is not installed", tool)
		}
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "data" || e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "USERSYNC_") || strings.HasPrefix(name, "CLERK_") || strings.HasPrefix(name, "MONGODB_") {
			continue
		}
		env = append(env, kv)
	}
	return &walkthrough{t: t, dir: dir, env: env}
}

// blocks returns the shell blocks of the section of page under heading
// (a whole line, such as "## Try it"), up to the next heading of its level
// or above.
func (w *walkthrough) blocks(page, heading string) []codeBlock {
	w.t.Helper()
	md := readDoc(w.t, page)
	prose, all := splitFences(md)
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	start, end := -1, len(prose)
	for i, line := range prose {
		m := regexp.MustCompile(`^(#{1,6})\s`).FindStringSubmatch(line)
		switch {
		case line == heading:
			start = i
		case start >= 0 && m != nil && len(m[1]) <= level:
			end = i
		}
		if end < len(prose) {
			break
		}
	}
	if start < 0 {
		w.t.Fatalf("%s has no heading %q", page, heading)
	}
	var out []codeBlock
	for _, b := range all {
		if b.start-1 > start && b.start-1 < end && (b.lang == "sh" || b.lang == "") {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		w.t.Fatalf("%s %q has no shell block", page, heading)
	}
	return out
}

// serve starts usersync as the first command of b says (its variables,
// flags and command), listening on a port of its own, with the copy's
// data dir; the docs' localhost:8080 is its address from then on.
func (w *walkthrough) serve(page string, b codeBlock, extra map[string]string) string {
	w.t.Helper()
	steps := stepsOf(b)
	if len(steps) == 0 {
		w.t.Fatalf("%s:%d: no command", page, b.start)
	}
	args, env, ok, err := commandLine(steps[0].command)
	if err != nil || !ok || len(args) > 0 {
		w.t.Fatalf("%s:%d: %q does not start usersync serve", page, steps[0].line, steps[0].command)
	}
	env["USERSYNC_ADDR"], env["USERSYNC_DATA_DIR"] = "127.0.0.1:0", filepath.Join(w.dir, "data")
	for k, v := range extra {
		env[k] = v
	}
	base, _, _ := start(w.t, env)
	addr := strings.TrimPrefix(base, "http://")
	w.subst = append(w.subst, "localhost:8080", addr)
	w.env = append(w.env, "USERSYNC_ADDR="+addr)
	return addr
}

// listen makes addr, a loopback address the docs give a program to listen
// on, a free port of this machine in the commands from then on.
func (w *walkthrough) listen(addr string) {
	w.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	free := ln.Addr().String()
	_ = ln.Close()
	w.subst = append(w.subst, addr, free)
}

// step is one command of a block and the output the docs give for it.
type step struct {
	line    int    // the doc's line of the command
	command string // its lines, as written
	// want are the comment lines right under the command, without
	// their "# ": its output ("..." and "…" stand for anything).
	want []string
}

// stepsOf splits a block into its commands, each with the comment lines
// that follow it: its output. A comment after a blank line, or before
// any command, is prose.
func stepsOf(b codeBlock) []step {
	var out []step
	cur := -1     // the step being read, -1: none
	open := false // its last line ends with a backslash
	for i, raw := range b.lines {
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
			cur = -1
		case open:
			out[cur].command += "\n" + raw
		case strings.HasPrefix(line, "#"):
			if cur >= 0 {
				out[cur].want = append(out[cur].want, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
			}
			continue
		default:
			out = append(out, step{line: b.start + i, command: raw})
			cur = len(out) - 1
		}
		open = line != "" && strings.HasSuffix(line, "\\")
	}
	return out
}

// stepEnd marks the end of a step's output; the step's exit status follows.
const stepEnd = "@@usersync-walkthrough-step-end"

// run runs the commands of b in turn, in one bash (so that the variables
// one sets are the next one's), and checks that each exits 0 and prints
// what the docs say it prints.
func (w *walkthrough) run(page string, b codeBlock) {
	w.t.Helper()
	steps := stepsOf(b)
	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for _, s := range steps {
		fmt.Fprintf(&script, "%s\nprintf '\\n%s %%d\\n' $?\n", w.substitute(s.command), stepEnd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = w.dir, w.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	raw, err := cmd.Output()
	out := w.unsubstitute(string(raw))
	if err != nil {
		w.t.Fatalf("%s:%d: the block did not run: %v\n%s", page, b.start, err, out)
	}
	parts := strings.Split(out, stepEnd+" ")
	for i, s := range steps {
		if i+1 >= len(parts) {
			w.t.Fatalf("%s:%d: %q never ended; output:\n%s", page, s.line, s.command, out)
		}
		got := strings.TrimRight(parts[i], "\n")
		if i > 0 { // the status of the step before, then its line's end
			_, got, _ = strings.Cut(got, "\n")
		}
		status, _, _ := strings.Cut(parts[i+1], "\n")
		if status != "0" {
			w.t.Fatalf("%s:%d: %q exited %s:\n%s", page, s.line, s.command, status, got)
		}
		if len(s.want) > 0 && !outputMatches(s.want, got) {
			w.t.Errorf("%s:%d: %q printed\n%s\nwhere the docs say\n%s", page, s.line, s.command, got, strings.Join(s.want, "\n"))
		}
	}
}

// background starts the one command of b (a program a reader keeps
// running in another terminal) until the test ends, and returns its
// output as it comes.
func (w *walkthrough) background(page string, b codeBlock) *syncBuffer {
	w.t.Helper()
	steps := stepsOf(b)
	if len(steps) != 1 {
		w.t.Fatalf("%s:%d: %d commands, want the one to keep running", page, b.start, len(steps))
	}
	out := &syncBuffer{}
	cmd := exec.Command("bash", "-c", "exec 2>&1\n"+w.substitute(steps[0].command))
	cmd.Dir, cmd.Env, cmd.Stdout = w.dir, w.env, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return out
}

// expect waits until out holds as many lines as b's command has comment
// lines under it, and checks them, in order, against those lines.
func (w *walkthrough) expect(page string, b codeBlock, out *syncBuffer, within time.Duration) {
	w.t.Helper()
	s := stepsOf(b)[0]
	lines := func() []string { return strings.Split(strings.TrimRight(w.unsubstitute(out.String()), "\n"), "\n") }
	for deadline := time.Now().Add(within); len(lines()) < len(s.want) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	got := lines()
	if len(got) != len(s.want) {
		w.t.Fatalf("%s:%d: %q printed\n%s\nwhere the docs say\n%s", page, s.line, s.command, out, strings.Join(s.want, "\n"))
	}
	for i := range got {
		if !outputMatches(s.want[i:i+1], got[i]) {
			w.t.Errorf("%s:%d: %q printed line %d\n%s\nwhere the docs say\n%s", page, s.line, s.command, i+1, got[i], s.want[i])
		}
	}
}

// waitFor waits until out holds a line that matches want.
func (w *walkthrough) waitFor(out *syncBuffer, want string, within time.Duration) {
	w.t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, line := range strings.Split(w.unsubstitute(out.String()), "\n") {
			if outputMatches([]string{want}, line) {
				return
			}
		}
	}
	w.t.Fatalf("no line %q within %v:\n%s", want, within, out)
}

// substitute makes the docs' addresses in command this run's.
func (w *walkthrough) substitute(command string) string {
	return strings.NewReplacer(w.subst...).Replace(command)
}

// unsubstitute makes this run's addresses in output the docs' again.
func (w *walkthrough) unsubstitute(output string) string {
	back := make([]string, len(w.subst))
	for i := 0; i < len(w.subst); i += 2 {
		back[i], back[i+1] = w.subst[i+1], w.subst[i]
	}
	return strings.NewReplacer(back...).Replace(output)
}

// outputMatches reports whether got is the output want describes: both
// with each line trimmed and the lines joined (the docs wrap a long line
// of JSON), where "..." and "…" in want stand for any text.
func outputMatches(want []string, got string) bool {
	join := func(lines []string) string {
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		return strings.Join(lines, "")
	}
	w := join(append([]string(nil), want...))
	var re strings.Builder
	re.WriteString("(?s)^")
	for _, part := range regexp.MustCompile(`\.\.\.|…`).Split(w, -1) {
		if re.Len() > len("(?s)^") {
			re.WriteString(".*?")
		}
		re.WriteString(regexp.QuoteMeta(part))
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(join(strings.Split(got, "\n")))
}

func TestWalkthrough_OutputMatchesWhatTheDocsSay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		want []string
		got  string
		ok   bool
	}{
		{[]string{"200 OK msg_..."}, "200 OK msg_1f2e", true},
		{[]string{`{"a":1,`, ` "b":"…"}`}, `{"a":1,"b":"x y"}`, true},
		{[]string{"200 OK msg_..."}, "400 Bad Request msg_1", false},
		{[]string{"a", "b"}, "a\nb\n", true},
		{[]string{"a"}, "a\nb", false},
	} {
		if got := outputMatches(tc.want, tc.got); got != tc.ok {
			t.Errorf("outputMatches(%q, %q) = %v, want %v", tc.want, tc.got, got, tc.ok)
		}
	}
	steps := stepsOf(codeBlock{start: 10, lines: []string{
		"# prose", "a \\", "  --flag", "# out 1", "#  out 2", "", "# prose again", "b", "c  # a note", "# out c",
	}})
	if len(steps) != 3 || steps[0].command != "a \\\n  --flag" || len(steps[0].want) != 2 || steps[0].want[1] != " out 2" ||
		steps[1].command != "b" || len(steps[1].want) != 0 || steps[2].line != 18 || steps[2].want[0] != "out c" {
		t.Errorf("stepsOf = %+v", steps)
	}
}

// TestDocs_TryItRunsAsWritten runs the README's "Try it" against a usersync
// started as "Run it, test it" starts it.
func TestDocs_TryItRunsAsWritten(t *testing.T) {
	t.Parallel()
	w := newWalkthrough(t)
	w.serve("README.md", w.blocks("README.md", "## Run it, test it")[0], nil)
	w.run("README.md", w.blocks("README.md", "## Try it")[0])
}

// TestDocs_TryBillingRunsAsWritten runs billing.md's "Try billing": the
// example events of a plan change and a cancel for their payer, the plan
// read after each.
func TestDocs_TryBillingRunsAsWritten(t *testing.T) {
	t.Parallel()
	w := newWalkthrough(t)
	blocks := w.blocks("docs/billing.md", "## Try billing")
	if len(blocks) != 2 {
		t.Fatalf("Try billing has %d shell blocks, want 2: usersync, then the commands", len(blocks))
	}
	w.serve("docs/billing.md", blocks[0], nil)
	w.run("docs/billing.md", blocks[1])
}

// TestDocs_TryOutboundRunsAsWritten runs outbound.md's "Try outbound":
// usersync, the receiver the repository ships in another terminal, and
// the commands that register it, send it a test message, rotate its
// secret and make a change reach it; the receiver prints what the docs
// say it prints.
func TestDocs_TryOutboundRunsAsWritten(t *testing.T) {
	t.Parallel()
	const page = "docs/outbound.md"
	w := newWalkthrough(t)
	blocks := w.blocks(page, "## Try outbound")
	if len(blocks) != 3 {
		t.Fatalf("Try outbound has %d shell blocks, want 3: usersync, the receiver, the commands", len(blocks))
	}
	w.serve(page, blocks[0], nil)
	w.listen("127.0.0.1:9000")
	receiver := w.background(page, blocks[1])
	w.waitFor(receiver, stepsOf(blocks[1])[0].want[0], 2*time.Minute)
	w.run(page, blocks[2])
	w.expect(page, blocks[1], receiver, time.Minute)
}

// TestDocs_TheSecretCommandMakesASecretTheEndpointsFileTakes runs the
// command outbound.md gives to make an endpoint's secret: what it prints
// is a secret the endpoints file accepts.
func TestDocs_TheSecretCommandMakesASecretTheEndpointsFileTakes(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s, which is not installed", tool)
		}
	}
	var command string
	_, blocks := splitFences(readDoc(t, "docs/outbound.md"))
	for _, b := range blocks {
		for _, s := range stepsOf(b) {
			if strings.Contains(s.command, "openssl rand") {
				command = s.command
			}
		}
	}
	if command == "" {
		t.Fatal("outbound.md gives no command that makes a secret with openssl")
	}
	for i := 0; i < 3; i++ {
		out, err := exec.Command("bash", "-c", command).Output()
		if err != nil {
			t.Fatalf("%q: %v", command, err)
		}
		if err := outbound.CheckSecret(strings.TrimSpace(string(out))); err != nil {
			t.Errorf("%q printed a secret the endpoints file refuses: %v", command, err)
		}
	}
}
