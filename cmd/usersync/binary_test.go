package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/repository/repotest"
)

// built is the binary scripts/build.sh built for this package's tests:
// built once, by the first test that asks, in binDir, which TestMain
// removes.
var built = struct {
	once stdsync.Once
	path string
	err  error
}{}

// binDir holds the binary; TestMain makes it and removes it.
var binDir string

// buildBinary returns usersync as the container image builds it
// (scripts/build.sh), built once for the package's tests, which only run
// it.
func buildBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if binDir == "" {
			built.err = errors.New("no directory for the binary: TestMain makes it")
			return
		}
		bin := filepath.Join(binDir, "usersync")
		if out, err := exec.Command("../../scripts/build.sh", bin).CombinedOutput(); err != nil {
			built.err = fmt.Errorf("scripts/build.sh: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// lines collects a pipe's lines as they come.
type lines struct {
	mu   stdsync.Mutex
	all  []string
	done chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *lines) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all...)
}

// jsonLines decodes every line as one JSON object, failing on any other.
func jsonLines(t *testing.T, what string, ls []string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range ls {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("%s: line is not a JSON object: %q", what, l)
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestBinary_StandardOutputIsJSONLinesAndResultsAreApartFromLogs(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "MONGODB_URI=", "USERSYNC_ADDR=127.0.0.1:0", "USERSYNC_DATA_DIR="+dir,
		"USERSYNC_SWEEP_INTERVAL=150ms", "USERSYNC_LOG_FORMAT=", "USERSYNC_LOG_LEVEL=")

	// serve: nothing configured, so the development secrets are generated.
	srv := exec.Command(bin)
	srv.Env = env
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	out := readLines(stdout)
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == "" && time.Now().Before(deadline); {
		for _, l := range out.snapshot() {
			if m := listening.FindStringSubmatch(l); m != nil {
				addr = m[1]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("usersync did not start:\n%s\n%s", strings.Join(out.snapshot(), "\n"), stderr.String())
	}
	base := "http://" + addr

	var secrets devSecrets
	b, err := os.ReadFile(filepath.Join(dir, secretsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &secrets); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(secrets.WebhookSecret)
	now := time.Now()
	sig, _ := wh.Sign("msg_binary", now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", "msg_binary")
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	if code, body := send(t, req); code != http.StatusOK {
		t.Fatalf("webhook: %d %s", code, body)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		req, _ := http.NewRequest(http.MethodHead, base+path, nil)
		if code, _ := send(t, req); code != http.StatusOK {
			t.Errorf("HEAD %s = %d, want 200", path, code)
		}
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/metrics", nil)
	code, metrics := send(t, req)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{"usersync_build_info{", "usersync_sweep_last_success_timestamp_seconds ", "usersync_webhook_last_received_timestamp_seconds ", `usersync_events{status="processed"} `, "usersync_events_backlog "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics of the binary lack %q", want)
		}
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-out.done
	if err := srv.Wait(); err != nil {
		t.Errorf("usersync after SIGTERM: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("serve wrote to standard error:\n%s", stderr.String())
	}
	logs := jsonLines(t, "serve's standard output", out.snapshot())
	var generated, requests int
	for _, l := range logs {
		switch l["msg"] {
		case "listening":
			if l["sweep_interval"] != "150ms" || l["retention"] != "168h0m0s" {
				t.Errorf("durations are not Go duration strings: %v", l)
			}
		case "request":
			requests++
			if s, ok := l["latency"].(string); !ok {
				t.Errorf("latency %v is not a duration string", l["latency"])
			} else if _, err := time.ParseDuration(s); err != nil {
				t.Errorf("latency %q: %v", s, err)
			}
		}
		if strings.HasPrefix(l["msg"].(string), "development secrets generated") {
			generated++
			if l["webhook_secret"] == "" || l["file"] != filepath.Join(dir, secretsFile) {
				t.Errorf("the development secrets line %v lacks the webhook secret or the file", l)
			}
		}
	}
	if generated != 1 {
		t.Errorf("%d lines of development secrets generated, want 1", generated)
	}
	if requests < 4 {
		t.Errorf("%d request lines, want at least 4", requests)
	}

	// replay: its results on standard output, its logs on standard error.
	var rout, rerr bytes.Buffer
	replay := exec.Command(bin, "replay", "-status", "failed")
	replay.Env, replay.Stdout, replay.Stderr = env, &rout, &rerr
	if err := replay.Run(); err != nil {
		t.Fatalf("replay: %v\n%s%s", err, rout.String(), rerr.String())
	}
	if got := strings.TrimSpace(rout.String()); !strings.HasPrefix(got, "replay: 0 events") || strings.Contains(got, "{") {
		t.Errorf("replay's standard output = %q, want its result line only", got)
	}
	if errLines := jsonLines(t, "replay's standard error", strings.Split(strings.TrimSpace(rerr.String()), "\n")); len(errLines) == 0 {
		t.Errorf("replay logged nothing on standard error")
	}
}

func TestBinary_VersionComesFromTheBuildInfo(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		t.Errorf("scripts/build.sh built with CGO_ENABLED=%q, want a static binary (0)", settings["CGO_ENABLED"])
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != 3 || got[0] != "usersync "+info.Main.Version || got[2] != info.GoVersion {
		t.Fatalf("usersync version = %q, want the module version %q and %s", out, info.Main.Version, info.GoVersion)
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		rev = "unknown" // built outside a git checkout
	}
	if !strings.HasPrefix(got[1], "revision "+rev) {
		t.Errorf("usersync version says %q, want revision %s", got[1], rev)
	}
	// Go stamps the revision in a git clone with git installed (not in a
	// linked worktree, nor in a copy without .git).
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && rev != "unknown" && rev != strings.TrimSpace(string(head)) {
		t.Errorf("the binary's revision is %q, the checkout's %s", rev, head)
	}
}
