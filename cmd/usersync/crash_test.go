package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// childEnv makes the test binary run usersync itself, as a child process.
const childEnv = "USERSYNC_TEST_CHILD"

// childLeaseEnv, in a child's environment, sets its outbound dispatcher's
// lease.
const childLeaseEnv = "USERSYNC_TEST_OUTBOUND_LEASE"

// child runs usersync in this process. In a crash mode the process kills
// itself (SIGKILL, no clean-up of any kind) in its first delivery:
//   - "crash-after-record": once the event is stored, before its change
//     is applied (where the MongoDB store's steps can stop; the
//     embedded store gets there when an apply fails);
//   - "crash-after-deliver": once the store's delivery is durable (the
//     embedded store's one transaction, committed), before the answer.
func child(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var s seams
	if lease, err := time.ParseDuration(os.Getenv(childLeaseEnv)); err == nil {
		// A request may take a second, which the lease leaves time for.
		s.outboundLease, s.outboundTimeout = lease, time.Second
	}
	switch mode {
	case "crash-after-record", "crash-after-deliver":
		s.wrapStore = func(st repository.Store) sync.Store {
			return crashing{Store: st, afterRecord: mode == "crash-after-record"}
		}
	}
	if err := runSeams(ctx, nil, os.Getenv, os.Stdout, os.Stderr, s); err != nil {
		fmt.Fprintln(os.Stderr, "usersync:", err)
		return 1
	}
	return 0
}

// crashing kills the process in its first delivery (see child).
type crashing struct {
	repository.Store
	afterRecord bool
}

func (c crashing) Deliver(ctx context.Context, ev models.Event, ch models.Change, now time.Time) (models.Delivered, error) {
	if c.afterRecord {
		_, _, _ = c.Events().Record(ctx, ev)
	} else {
		_, _ = c.Store.Deliver(ctx, ev, ch, now)
	}
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

// TestRun_AKilledProcessLosesNoStoredEvent kills usersync in a delivery of
// each kind, at each point where it can stop, and restarts it: the event
// stored before the kill is applied once by the sweep, with no second
// delivery from Clerk; the delivery that was durable reports its first
// outcome to Clerk's retry.
func TestRun_AKilledProcessLosesNoStoredEvent(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine in child processes")
	}
	// Each kind's delivery (a fixture file, or a body), and the read that
	// shows its object ("": none without its payer, the event says it).
	attempt := fmt.Sprintf(`{"type":"paymentAttempt.updated","timestamp":%[1]d,"data":{"id":"pa_crash","payment_id":"cpa_crash",`+
		`"status":"paid","payer":{"user_id":"user_crash","organization_id":""},"updated_at":%[1]d}}`, time.Now().Add(-time.Hour).UnixMilli())
	fixtures := map[models.Kind]struct{ file, body, path string }{
		models.KindUser:         {file: "user.created.json", path: "/v1/users/user_29w83sxmDNGwOuEthce5gg56FcC"},
		models.KindOrganization: {file: "openapi.organization.created.json", path: "/v1/organizations/org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"},
		models.KindMembership:   {file: "openapi.organizationMembership.created.json", path: "/v1/organizations/org_2g7np7Hrk0SN6kj5EDMLDaKNL0S/memberships"},
		models.KindInvitation: {file: "openapi.organizationInvitation.accepted.json",
			path: "/v1/organizations/org_2g7np7Hrk0SN6kj5EDMLDaKNL0S/invitations/orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0S"},
		models.KindSubscription:     {file: "billing/upstream.subscription.created.json"},
		models.KindSubscriptionItem: {file: "billing/plan-change.2.subscriptionItem.active.json"},
		models.KindPaymentAttempt:   {body: attempt},
	}
	for _, k := range models.Kinds {
		for _, mode := range []string{"crash-after-record", "crash-after-deliver"} {
			t.Run(string(k)+"/"+mode, func(t *testing.T) {
				t.Parallel()
				f, ok := fixtures[k]
				if !ok {
					t.Fatalf("kind %s has no fixture in the crash test", k)
				}
				body := []byte(f.body)
				if f.file != "" {
					var err error
					if body, err = os.ReadFile(filepath.Join("..", "..", "models", "testdata", f.file)); err != nil {
						t.Fatal(err)
					}
				}
				env := serverEnv("127.0.0.1:0", "USERSYNC_DATA_DIR="+repotest.DataDir(t), "MONGODB_URI=")
				cmd, base := startChild(t, mode, env)
				if code, got, err := deliverTo(base, "msg_crash", body); err == nil {
					t.Fatalf("the delivery got an answer, %d %s; want the process to die", code, got)
				}
				err := cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child ended with %v, want killed by SIGKILL", err)
				}

				_, base = startChild(t, "serve", env)
				if mode == "crash-after-deliver" {
					// Clerk's retry of the delivery that got no answer.
					code, got, err := deliverTo(base, "msg_crash", body)
					if err != nil || code != http.StatusOK || !strings.Contains(got, `"duplicate":true`) || !strings.Contains(got, `"outcome":"applied"`) {
						t.Errorf("Clerk's retry = %d %s, %v; want 200, a duplicate with the first outcome", code, got, err)
					}
				}
				// Restarted, with no second delivery needed: the sweep
				// applies a stored event once its grace period is over.
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
				if f.path == "" {
					return
				}
				req, _ := http.NewRequest(http.MethodGet, base+f.path, nil)
				req.Header.Set("Authorization", "Bearer "+childAPIKey)
				if code, got := send(t, req); code != http.StatusOK || !strings.Contains(got, "_2g7np7Hrk0SN6kj5EDMLDaKNL0S") && k != models.KindUser {
					t.Errorf("%s after recovery: %d %s", k, code, got)
				}
			})
		}
	}
}

// deliverTo posts body to usersync at base as Clerk would, signed, as
// message id.
func deliverTo(base, id string, body []byte) (int, string, error) {
	wh, _ := svix.NewWebhook(childSecret)
	now := time.Now()
	sig, _ := wh.Sign(id, now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestRun_AKilledProcessLosesNoOutboundDelivery kills usersync (SIGKILL)
// while it sends an outbound webhook, and restarts it: the change is sent
// again, with the same webhook-id, and received, at once: the killed
// process's lease of an hour is released when the restarted one opens the
// embedded store under the data dir's lock.
func TestRun_AKilledProcessLosesNoOutboundDelivery(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine in child processes")
	}
	secret := "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
	var (
		mu    gosync.Mutex
		ids   []string
		child *exec.Cmd
	)
	killed := make(chan struct{})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh, _ := svix.NewWebhook(secret)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("a delivery does not verify: %v", err)
		}
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		first, c := len(ids) == 1, child
		mu.Unlock()
		if first {
			_ = c.Process.Kill() // SIGKILL, while the request is in flight
			close(killed)
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "endpoints.json")
	if err := os.WriteFile(file, []byte(`{"endpoints": [{"name": "app", "url": "`+rcv.URL+`", "secret": "`+secret+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := serverEnv("127.0.0.1:0", "USERSYNC_DATA_DIR="+filepath.Join(dir, "data"), "MONGODB_URI=",
		"USERSYNC_ENDPOINTS_FILE="+file, "USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true", childLeaseEnv+"=1h")
	cmd, base := startChild(t, "serve", env)
	mu.Lock()
	child = cmd
	mu.Unlock()
	body, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	if code, got, err := deliverTo(base, "msg_outbound_crash", body); err != nil || code != http.StatusOK {
		t.Fatalf("the webhook = %d %s, %v", code, got, err)
	}
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("no outbound delivery came")
	}
	_ = cmd.Wait()
	startChild(t, "serve", env)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(ids)
		mu.Unlock()
		if len(got) >= 2 {
			if got[1] != got[0] {
				t.Errorf("the delivery after the restart has webhook-id %s, want %s", got[1], got[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery interrupted by the kill was not sent again: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
