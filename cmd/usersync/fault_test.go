package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/repository/repotest"
)

var longFaults = flag.Bool("fault.long", false, "run the fault tests with more users and more kills")

// freeAddr returns a loopback address with a port free right now, so that a
// restarted child listens where the clients already send.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// process is a child process that the test kills and starts again.
type process struct {
	t    *testing.T
	mode string
	env  []string
	mu   stdsync.Mutex
	cmd  *exec.Cmd
}

func (p *process) start() {
	p.t.Helper()
	for try := 0; ; try++ { // the killed process's port may still be closing
		cmd, _, err := tryStartChild(p.mode, p.env)
		if err == nil {
			p.mu.Lock()
			p.cmd = cmd
			p.mu.Unlock()
			return
		}
		if try == 20 {
			p.t.Fatalf("start %s: %v", p.mode, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (p *process) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Kill() // SIGKILL
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

// faultLoad delivers versions 0..versions-1 of users 0..users-1 in a
// shuffled order, as Svix would: every delivery is retried (same svix-id,
// re-signed) until it gets a 2xx. It returns the svix-ids acknowledged.
type faultLoad struct {
	base            string
	users, versions int
	acked           stdsync.Map // svix-id → true
	ackedN          atomic.Int64
	retries         atomic.Int64
	serverErrors    atomic.Int64
}

func (l *faultLoad) userID(u int) string   { return fmt.Sprintf("user_fault%d", u) }
func (l *faultLoad) msgID(u, v int) string { return fmt.Sprintf("msg_fault_%d_%d", u, v) }

func (l *faultLoad) body(u, v int) []byte {
	typ := "user.updated"
	if v == 0 {
		typ = "user.created"
	}
	return fmt.Appendf(nil, `{"type":%q,"object":"event","timestamp":%d,"data":{"id":%q,"updated_at":%d,"first_name":"v%d","primary_email_address_id":"idn_1","email_addresses":[{"id":"idn_1","email_address":"u%d.v%d@example.com"}]}}`,
		typ, 1_760_000_000_000+v, l.userID(u), 1_760_000_000_000+v, v, u, v)
}

// waitAcked waits until n events are acknowledged (or the load ended).
func (l *faultLoad) waitAcked(n int, done <-chan struct{}) {
	for l.ackedN.Load() < int64(n) {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

func (l *faultLoad) run(t *testing.T, deadline time.Time) {
	type delivery struct{ u, v int }
	var all []delivery
	for u := range l.users {
		for v := range l.versions {
			all = append(all, delivery{u, v})
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	work := make(chan delivery)
	var wg stdsync.WaitGroup
	wh, _ := svix.NewWebhook(childSecret)
	client := &http.Client{Timeout: 5 * time.Second}
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				id, body := l.msgID(d.u, d.v), l.body(d.u, d.v)
				for try := 0; time.Now().Before(deadline); try++ {
					if try > 0 {
						l.retries.Add(1)
						time.Sleep(50 * time.Millisecond)
					}
					now := time.Now()
					sig, _ := wh.Sign(id, now, body)
					req, _ := http.NewRequest(http.MethodPost, l.base+"/webhooks/clerk", bytes.NewReader(body))
					req.Header.Set("svix-id", id)
					req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
					req.Header.Set("svix-signature", sig)
					resp, err := client.Do(req)
					if err != nil {
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode >= 500 {
						l.serverErrors.Add(1)
					}
					if resp.StatusCode/100 == 2 {
						l.acked.Store(id, true)
						l.ackedN.Add(1)
						break
					}
				}
			}
		}()
	}
	for _, d := range all {
		work <- d
	}
	close(work)
	wg.Wait()
}

// verify checks the promises: every acknowledged event is stored and
// processed, every user is in its newest state, no user is duplicated.
func (l *faultLoad) verify(t *testing.T, deadline time.Time) {
	t.Helper()
	get := func(path string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, l.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+childAdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	// Wait for the sweep to settle what the kills left behind.
	for {
		code, st := get("/v1/events/stats")
		if code == http.StatusOK {
			s := st["status"].(map[string]any)
			if s["stored"] == 0.0 && s["failed"] == 0.0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("events left unsettled: %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	acked := 0
	l.acked.Range(func(k, _ any) bool {
		acked++
		if code, ev := get("/v1/events/" + k.(string)); code != http.StatusOK || ev["status"] != "processed" {
			t.Errorf("acknowledged event %s: %d %v", k, code, ev)
		}
		return true
	})
	if acked != l.users*l.versions {
		t.Errorf("%d of %d events acknowledged before the deadline", acked, l.users*l.versions)
	}
	newest := fmt.Sprint("v", l.versions-1)
	for u := range l.users {
		code, user := get("/v1/users/" + l.userID(u))
		if code != http.StatusOK || user["displayName"] != newest || user["email"] != fmt.Sprintf("u%d.v%d@example.com", u, l.versions-1) {
			t.Errorf("user %d = %d %v, want its newest state %s", u, code, user, newest)
		}
	}
	code, list := get("/v1/users?limit=200")
	if code != http.StatusOK || len(list["data"].([]any)) != l.users {
		t.Errorf("listed %v users, want %d", list["data"], l.users)
	}
	t.Logf("%d events acknowledged, %d retries, %d 5xx answers", acked, l.retries.Load(), l.serverErrors.Load())
}

func faultSize() (users, versions, kills int) {
	if *longFaults {
		return 100, 6, 8
	}
	return 12, 4, 3
}

func TestFault_KilledServerLosesNoAcknowledgedEvent(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("runs the embedded engine in child processes")
	}
	addr := freeAddr(t)
	server := &process{t: t, mode: "serve", env: serverEnv(addr, "USERSYNC_DATA_DIR="+repotest.DataDir(t), "MONGODB_URI=")}
	server.start()
	t.Cleanup(server.kill)
	users, versions, kills := faultSize()
	load := &faultLoad{base: "http://" + addr, users: users, versions: versions}
	deadline := time.Now().Add(2 * time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		load.run(t, deadline)
	}()
	total := users * versions
	for k := range kills {
		// Mid-load, at evenly spread points, with requests in flight.
		load.waitAcked(total*(k+1)/(kills+1), done)
		server.kill()
		server.start()
	}
	<-done
	if load.retries.Load() == 0 {
		t.Error("no delivery was cut short by a kill: the test proved nothing")
	}
	load.verify(t, time.Now().Add(30*time.Second))
}
