package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// childEnv makes the test binary run usersync itself, as a child process.
const childEnv = "USERSYNC_TEST_CHILD"

// child runs usersync in this process. In mode "crash-before-apply" the
// process kills itself (SIGKILL, no clean-up of any kind) when it is about
// to write its first user: the event is stored, the user is not.
func child(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var s seams
	switch mode {
	case "crash-before-apply":
		s.wrapUsers = func(u sync.UserStore) sync.UserStore { return killBeforeApply{u} }
	}
	if err := runSeams(ctx, nil, os.Getenv, os.Stdout, os.Stderr, s); err != nil {
		fmt.Fprintln(os.Stderr, "usersync:", err)
		return 1
	}
	return 0
}

type killBeforeApply struct{ sync.UserStore }

func (killBeforeApply) Apply(context.Context, models.Change, time.Time) (models.Outcome, error) {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// startChild starts the test binary as a child process in mode, waits for
// it to listen and returns it with its base URL. It is killed when the test
// ends, if it is still running.
func startChild(t *testing.T, mode string, env []string) (*exec.Cmd, string) {
	t.Helper()
	cmd, addr, err := tryStartChild(mode, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, "http://" + addr
}

// tryStartChild starts the test binary in mode and waits for it to listen.
func tryStartChild(mode string, env []string) (cmd *exec.Cmd, addr string, err error) {
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	up := make(chan string, 1)
	go func() {
		defer close(up)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				up <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // keep the child from blocking on its output
	}()
	select {
	case addr, ok := <-up:
		if ok {
			return cmd, addr, nil
		}
	case <-time.After(30 * time.Second):
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, "", fmt.Errorf("child %s did not start: %s", mode, stderr.String())
}

// serverEnv is the environment of a child usersync listening on addr, with
// a fast sweep; extra adds to it.
func serverEnv(addr string, extra ...string) []string {
	return append([]string{
		"USERSYNC_ADDR=" + addr, "CLERK_WEBHOOK_SECRET=" + childSecret,
		"USERSYNC_API_KEYS=" + childAPIKey, "USERSYNC_ADMIN_KEYS=" + childAdminKey,
		"USERSYNC_SWEEP_INTERVAL=200ms", "USERSYNC_SWEEP_GRACE=1s",
	}, extra...)
}

const childSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// The child's keys.
const (
	childAPIKey   = "usk_child_api_0123456789"
	childAdminKey = "usk_child_admin_0123456789"
)

func TestRun_AKilledProcessLosesNoStoredEvent(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine in child processes")
	}
	env := serverEnv("127.0.0.1:0", "USERSYNC_DATA_DIR="+t.TempDir(), "MONGODB_URI=")
	cmd, base := startChild(t, "crash-before-apply", env)

	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh, _ := svix.NewWebhook(childSecret)
	now := time.Now()
	sig, _ := wh.Sign("msg_crash", now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", "msg_crash")
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("the delivery got an answer, %d %s; want the process to die", resp.StatusCode, b)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL", err)
	}

	// Restarted, with no second delivery from Clerk: the sweep applies the
	// stored event once its grace period is over.
	_, base = startChild(t, "serve", env)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/events/msg_crash", nil)
		req.Header.Set("Authorization", "Bearer "+childAdminKey)
		code, got := send(t, req)
		var ev map[string]any
		_ = json.Unmarshal([]byte(got), &ev)
		if code == http.StatusOK && ev["status"] == "processed" {
			if ev["outcome"] != "applied" || ev["attempts"] != 1.0 {
				t.Errorf("recovered event = %s, want applied after 1 attempt", got)
			}
			break
		}
		if code != http.StatusOK {
			t.Fatalf("the event was lost: %d %s", code, got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stored event was not recovered: %s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/v1/users/user_29w83sxmDNGwOuEthce5gg56FcC", nil)
	req.Header.Set("Authorization", "Bearer "+childAPIKey)
	if code, got := send(t, req); code != http.StatusOK {
		t.Errorf("user after recovery: %d %s", code, got)
	}
}
