package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
)

// repoRoot is the repository's root, seen from this package.
const repoRoot = "../.."

// docFiles are the documentation pages the docs tests read: README.md and
// docs/*.md, as paths relative to the repository's root.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	return files
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var fence = regexp.MustCompile("^\\s*(?:```|~~~)\\s*([A-Za-z0-9_+-]*)")

// splitFences returns the lines of md outside fenced code blocks (with ""
// in place of the others, so that line numbers hold) and the code blocks,
// each as its lines with the number of its first line.
func splitFences(md string) (prose []string, blocks []codeBlock) {
	var cur *codeBlock
	for i, line := range strings.Split(md, "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			if cur == nil {
				cur = &codeBlock{start: i + 2, lang: m[1]}
			} else {
				blocks = append(blocks, *cur)
				cur = nil
			}
			prose = append(prose, "")
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
			prose = append(prose, "")
			continue
		}
		prose = append(prose, line)
	}
	return prose, blocks
}

type codeBlock struct {
	start int    // line number of the block's first line
	lang  string // the fence's info string: sh, ts, go…
	lines []string
}

// shellLangs are the code blocks whose lines are shell commands (or
// their output).
var shellLangs = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}

var (
	inlineCode = regexp.MustCompile("`+[^`]*`+")
	mdLink     = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]*)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	hasScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// slug is GitHub's anchor of a heading: its text (links and code as
// their text), lowercased, every character dropped but letters, digits,
// marks, spaces, "-" and "_", and each space made a "-".
func slug(text string) string {
	text = mdLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of md's headings, with GitHub's -1, -2… for
// repeated ones.
func anchors(md string) map[string]bool {
	prose, _ := splitFences(md)
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestDocs_SlugIsGitHubs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Query → index": "query--index",
		"One user, now: `POST /v1/users/{userId}/sync`": "one-user-now-post-v1usersuseridsync",
		"Reconcile: drift after an outage":              "reconcile-drift-after-an-outage",
		"`user_events` (the embedded store's `events`)": "user_events-the-embedded-stores-events",
		"Embedded store (SQLite)":                       "embedded-store-sqlite",
		"See [the API](api.md)":                         "see-the-api",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
	if a := anchors("# A\n## A\n```\n# A\n```\n### A\n"); !a["a"] || !a["a-1"] || !a["a-2"] || a["a-3"] {
		t.Errorf("anchors of repeated headings = %v", a)
	}
}

// TestDocs_LinksResolve checks every relative link of README.md and
// docs/*.md: the file exists inside the repository, and its #anchor (or
// the page's own, for "#anchor") is one of that page's headings.
func TestDocs_LinksResolve(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	pageAnchors := func(rel string) map[string]bool {
		if a, ok := anchorsOf[rel]; ok {
			return a
		}
		anchorsOf[rel] = anchors(readDoc(t, rel))
		return anchorsOf[rel]
	}
	links := 0
	for _, page := range docFiles(t) {
		prose, _ := splitFences(readDoc(t, page))
		for i, line := range prose {
			line = inlineCode.ReplaceAllString(line, "")
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[2]
				if target == "" || hasScheme.MatchString(target) || strings.HasPrefix(target, "//") {
					continue
				}
				links++
				where := fmt.Sprintf("%s:%d: link %q", page, i+1, target)
				path, frag, _ := strings.Cut(target, "#")
				rel := page
				if path != "" {
					p, err := url.PathUnescape(path)
					if err != nil {
						t.Errorf("%s: %v", where, err)
						continue
					}
					abs := filepath.Join(root, filepath.Dir(filepath.FromSlash(page)), filepath.FromSlash(p))
					r, err := filepath.Rel(root, abs)
					if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
						t.Errorf("%s: leaves the repository", where)
						continue
					}
					if _, err := os.Stat(abs); err != nil {
						t.Errorf("%s: %s does not exist", where, filepath.ToSlash(r))
						continue
					}
					rel = filepath.ToSlash(r)
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(rel, ".md") {
					t.Errorf("%s: an anchor in %s, which is not a Markdown page", where, rel)
					continue
				}
				f, err := url.PathUnescape(frag)
				if err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				if !pageAnchors(rel)[f] {
					t.Errorf("%s: %s has no heading #%s", where, rel, f)
				}
			}
		}
	}
	t.Logf("%d relative links checked", links)
	if links < 50 {
		t.Errorf("found only %d relative links: is the link pattern right?", links)
	}
}

// commandLine finds a usersync command in one shell line of a code block:
// `usersync …`, `./usersync …` or `go run ./cmd/usersync …`, alone or in a
// list (&&, ||, ;, |), after variable assignments. It returns the
// arguments and the variables assigned before it.
func commandLine(line string) (args []string, env map[string]string, ok bool, err error) {
	words, err := shellWords(line)
	if err != nil {
		return nil, nil, false, err
	}
	// The segments of a list (a comment is the last word, if any).
	var segs [][]string
	var cur []string
	for _, w := range words {
		if w.op || w.comment {
			segs = append(segs, cur)
			cur = nil
			continue
		}
		cur = append(cur, w.text)
	}
	segs = append(segs, cur)
	assign := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	for _, seg := range segs {
		env = map[string]string{}
		for len(seg) > 0 && assign.MatchString(seg[0]) {
			k, v, _ := strings.Cut(seg[0], "=")
			env[k] = v
			seg = seg[1:]
		}
		switch {
		case len(seg) >= 1 && (seg[0] == "usersync" || seg[0] == "./usersync"):
			return seg[1:], env, true, nil
		case len(seg) >= 3 && seg[0] == "go" && seg[1] == "run" && seg[2] == "./cmd/usersync":
			return seg[3:], env, true, nil
		}
	}
	return nil, nil, false, nil
}

type shellWord struct {
	text    string
	op      bool // &&, ||, ;, |
	comment bool // # starts a comment
}

// shellWords splits a line as a POSIX shell would into words (quotes
// removed, nothing expanded), list operators and a comment.
func shellWords(line string) ([]shellWord, error) {
	var out []shellWord
	var b strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			out = append(out, shellWord{text: b.String()})
			b.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			b.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(line) && line[j] != '"'; j++ {
				if line[j] == '\\' && j+1 < len(line) {
					j++
				}
				b.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, errors.New(`unterminated "`)
			}
			inWord = true
			i = j
		case c == '\\' && i+1 < len(line):
			i++
			b.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return append(out, shellWord{comment: true}), nil
		case c == ';' || c == '|' || c == '&':
			flush()
			if i+1 < len(line) && (line[i+1] == c) {
				i++
			}
			out = append(out, shellWord{op: true})
		default:
			b.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return out, nil
}

// checkCommand parses args as runWith does, with the variables env sets and
// no others, without running anything.
func checkCommand(args []string, env map[string]string) error {
	name := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help", "version", "-version", "--version":
			return nil
		}
		if !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("no command %q", name)
	}
	fs := flag.NewFlagSet("usersync "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cmd(fs)
	_, args = splitOperand(name, args)
	_, err := loadConfig(fs, name, args, func(k string) string { return env[k] })
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func TestDocs_CommandLineParserFindsUsersync(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"go run ./cmd/usersync replay -status failed -dry-run            # list them": "[replay -status failed -dry-run]",
		"CLERK_SECRET_KEY=sk_live_... go run ./cmd/usersync backfill":                 "[backfill]",
		"MONGODB_URI='mongodb://h/?a=b&c=d' go run ./cmd/usersync migrate -dry-run":   "[migrate -dry-run]",
		"./scripts/build.sh && ./usersync version     # the build":                    "[version]",
		"go run ./cmd/usersync":                 "[]",
		"go run ./cmd/usersync-load -users 200": "none",
		"# usersync v0.0.0-2026":                "none",
		`docker run --rm usersync version`:      "none",
	} {
		args, _, ok, err := commandLine(line)
		got := "none"
		if ok {
			got = fmt.Sprint(args)
		}
		if err != nil || got != want {
			t.Errorf("commandLine(%q) = %s, %v; want %s", line, got, err, want)
		}
	}
	if err := checkCommand([]string{"replay", "-nope"}, nil); err == nil {
		t.Error("an unknown flag parses")
	}
	if err := checkCommand([]string{"frobnicate"}, nil); err == nil {
		t.Error("an unknown command parses")
	}
	if err := checkCommand([]string{"-addr", "8081"}, nil); err == nil {
		t.Error("a bad value parses")
	}
}

// TestDocs_CommandLinesParse checks every usersync command line in the code
// blocks of README.md and docs/*.md: the command exists, and so do its
// flags, with values usersync accepts.
func TestDocs_CommandLinesParse(t *testing.T) {
	t.Parallel()
	found := 0
	for _, page := range docFiles(t) {
		_, blocks := splitFences(readDoc(t, page))
		for _, blk := range blocks {
			if !shellLangs[blk.lang] {
				continue
			}
			for i := 0; i < len(blk.lines); i++ {
				n := blk.start + i
				line := strings.TrimSpace(blk.lines[i])
				for strings.HasSuffix(line, "\\") && i+1 < len(blk.lines) { // a continued line
					i++
					line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(blk.lines[i])
				}
				args, env, ok, err := commandLine(line)
				if err != nil {
					t.Errorf("%s:%d: %q: %v", page, n, line, err)
					continue
				}
				if !ok {
					continue
				}
				found++
				if err := checkCommand(args, env); err != nil {
					t.Errorf("%s:%d: %q: %v", page, n, line, err)
				}
			}
		}
	}
	t.Logf("%d usersync command lines checked", found)
	if found < 10 {
		t.Errorf("found only %d usersync command lines in the docs", found)
	}
}

// TestDocs_PointOnlyAtFilesOfTheRepository: a cloner has the repository and
// nothing beside it, so no page, source file or script names a relative
// path that climbs out of the repository's root.
func TestDocs_PointOnlyAtFilesOfTheRepository(t *testing.T) {
	t.Parallel()
	climb := regexp.MustCompile(`(?:\.\./)+[A-Za-z0-9_.-]+`)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Installed packages (npm's) are not the repository's.
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "data" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md", ".go", ".sh", ".yml", ".yaml", ".js", ".html", ".sql":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, rel := range climb.FindAllString(line, -1) {
				// Go files run from their package's directory too.
				if to := filepath.Join(filepath.Dir(path), rel); !strings.HasPrefix(to, root+string(filepath.Separator)) && to != root {
					name, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d names %s, outside the repository", name, i+1, rel)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestREADME_SaysCheckShInstallsChromiumThroughApt: the test command may
// install a package on the machine; the README says so where it gives it.
func TestREADME_SaysCheckShInstallsChromiumThroughApt(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	i := strings.Index(readme, "./scripts/check.sh")
	j := strings.Index(readme, "## What it costs")
	if i < 0 || j < i {
		t.Fatal("the README's first section does not give ./scripts/check.sh")
	}
	if part := readme[i:j]; !strings.Contains(part, "Chromium") || !strings.Contains(part, "apt-get") {
		t.Errorf("the README's first section does not say that check.sh installs Chromium with apt-get:\n%s", part)
	}
}

// TestREADME_ConnectClerkListsEveryTypeUsersyncAppliesOrProjects: the
// types "Connect Clerk" tells an operator to subscribe to are the types of
// Clerk's catalog (models.ClerkEventTypes) that usersync applies (those of
// the kinds table) or projects, every one of them and no other.
func TestREADME_ConnectClerkListsEveryTypeUsersyncAppliesOrProjects(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	i := strings.Index(readme, "2. **Add the endpoint in the Clerk dashboard:**")
	j := strings.Index(readme, "3. **Copy its signing secret.**")
	if i < 0 || j < i {
		t.Fatal("the README's Connect Clerk has no step 2 followed by step 3")
	}
	typeName := regexp.MustCompile("`([a-zA-Z]+\\.[a-zA-Z_]+)`")
	listed := map[string]bool{}
	for _, m := range typeName.FindAllStringSubmatch(readme[i:j], -1) {
		listed[m[1]] = true
	}
	subscribed := models.SubscribedTypes()
	for _, typ := range subscribed {
		if !listed[typ] {
			t.Errorf("Connect Clerk does not list %s, a type usersync applies or projects", typ)
		}
		delete(listed, typ)
	}
	for typ := range listed {
		t.Errorf("Connect Clerk lists %s, which usersync neither applies nor projects", typ)
	}
	for _, typ := range models.StoredTypes() {
		if !slices.Contains(subscribed, typ) {
			t.Errorf("%s, of the kinds table, is not in Clerk's catalog (models.ClerkEventTypes)", typ)
		}
	}
}

// TestDocs_MigrateSaysTheSchemaOfThisBuild runs `usersync migrate` on a
// fresh data dir: operations.md shows the line it prints, with the schema
// of this build (its time aside).
func TestDocs_MigrateSaysTheSchemaOfThisBuild(t *testing.T) {
	t.Parallel()
	var want string
	_, blocks := splitFences(readDoc(t, "docs/operations.md"))
	for _, b := range blocks {
		for _, s := range stepsOf(b) {
			if strings.TrimSpace(s.command) == "go run ./cmd/usersync migrate" && len(s.want) == 1 {
				want = s.want[0]
			}
		}
	}
	if want == "" {
		t.Fatal("operations.md shows no output of `go run ./cmd/usersync migrate`")
	}
	dir := t.TempDir()
	env := map[string]string{"USERSYNC_DATA_DIR": dir, "USERSYNC_LOG_LEVEL": "error"}
	var out bytes.Buffer
	if err := runWith(context.Background(), []string{"migrate"}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	took := regexp.MustCompile(`, in [0-9.]+[nµm]?s$`)
	got := strings.ReplaceAll(strings.TrimSpace(out.String()), filepath.Join(dir, "usersync.db"), "data/usersync.db")
	if took.ReplaceAllString(got, ", in …") != took.ReplaceAllString(want, ", in …") {
		t.Errorf("usersync migrate prints\n%s\nwhere operations.md says\n%s", got, want)
	}
}

// TestDocs_TheStatsExampleIsTheAnswerAfterOneUser: api.md's example of GET
// /v1/events/stats is what a fresh usersync answers once one user.created
// applied, field for field (its asOf aside).
func TestDocs_TheStatsExampleIsTheAnswerAfterOneUser(t *testing.T) {
	t.Parallel()
	var want string
	_, blocks := splitFences(readDoc(t, "docs/api.md"))
	for _, b := range blocks {
		for _, s := range stepsOf(b) {
			if strings.Contains(s.command, "/v1/events/stats") && len(s.want) == 1 {
				want = s.want[0]
			}
		}
	}
	if want == "" {
		t.Fatal("api.md shows no answer of GET /v1/events/stats")
	}
	const secret, admin = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "usk_docs_admin_key_0001"
	base, _, _ := start(t, map[string]string{"USERSYNC_ADDR": "127.0.0.1:0", "USERSYNC_DATA_DIR": repotest.DataDir(t),
		"CLERK_WEBHOOK_SECRET": secret, "USERSYNC_ADMIN_KEYS": admin})
	body, err := os.ReadFile(filepath.Join(repoRoot, "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(secret)
	now := time.Now()
	sig, _ := wh.Sign("msg_docs_stats", now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", "msg_docs_stats")
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	if code, b := send(t, req); code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, b)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/events/stats", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	code, got := send(t, req)
	if code != http.StatusOK {
		t.Fatalf("stats: %d %s", code, got)
	}
	var g, w map[string]any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("api.md's example is not JSON: %v", err)
	}
	g["asOf"], w["asOf"] = "…", "…"
	if !reflect.DeepEqual(g, w) {
		t.Errorf("GET /v1/events/stats answers\n%s\nwhere api.md says\n%s", got, want)
	}
}
