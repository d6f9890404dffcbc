package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// endpoints lists usersync's endpoints as an admin.
func endpoints(t *testing.T, url string) []map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/v1/endpoints", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Endpoints []map[string]any `json:"endpoints"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/endpoints: %d, %v", resp.StatusCode, err)
	}
	return body.Endpoints
}

func TestLoad_EndpointReceivesEveryUserInItsFinalState(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Endpoint, cfg.AdminKey, cfg.EndpointWait = true, testAdminKey, 2*time.Minute
	cfg.EndpointLatency = 5 * time.Millisecond // an app at work: deliveries of one user at once would overlap
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.OK() {
		t.Fatalf("check failed: end state %q, outbound %q", rep.Check.Problems, rep.Outbound.Problems)
	}
	o := rep.Outbound
	if o.Users != 20 || o.Received != 20 || o.Invalid != 0 || o.Deliveries < 20 || o.WebhookIDs < 20 || o.DeleteError != "" {
		t.Errorf("outbound = %+v; want 20 of 20 users received, some deliveries, none invalid, the endpoint deleted", o)
	}
	if len(o.AfterAck) == 0 {
		t.Error("no arrival after an acknowledgment was measured")
	}
	for _, line := range []string{"\noutbound: endpoint ep_", "invalid signatures", "final state: 20 of 20 users received; lag ",
		"arrival after the acknowledgment", "outbound: OK"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("printed report has no %q", line)
		}
	}
	if eps := endpoints(t, url); len(eps) != 0 {
		t.Errorf("endpoints after the run = %v, want the run's deleted", eps)
	}
}

// TestLoad_DrainSendsEveryUserFromAResyncAfterTheLoad: with -drain the
// endpoint is registered after the load, which it then receives whole
// from its resync, and the report gives the rate.
func TestLoad_DrainSendsEveryUserFromAResyncAfterTheLoad(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Endpoint, cfg.Drain, cfg.AdminKey, cfg.EndpointWait = true, true, testAdminKey, 2*time.Minute
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.OK() {
		t.Fatalf("check failed: end state %q, outbound %q", rep.Check.Problems, rep.Outbound.Problems)
	}
	if o := rep.Outbound; o.Users != 20 || o.Received != 20 || o.Lag <= 0 || len(o.AfterAck) != 0 {
		t.Errorf("outbound = %+v; want 20 of 20 users received after the resync started, no arrival after an acknowledgment", o)
	}
	if !strings.Contains(out.String(), "drain: 20 of 20 users received, the last ") {
		t.Errorf("printed report has no drain line")
	}
	if eps := endpoints(t, url); len(eps) != 0 {
		t.Errorf("endpoints after the run = %v, want the run's deleted", eps)
	}
}

// TestLoad_HangingEndpointsHoldRequestsWhileTheReceiverGetsEveryUser:
// with two endpoints that never answer, the receiver still gets every
// user in its final state, the hanging endpoints' requests are counted,
// and all three endpoints are deleted at the end.
func TestLoad_HangingEndpointsHoldRequestsWhileTheReceiverGetsEveryUser(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Users, cfg.Updates, cfg.Reads = 5, 1, 4
	cfg.Endpoint, cfg.AdminKey, cfg.EndpointWait = true, testAdminKey, 2*time.Minute
	cfg.HangingEndpoints = 2
	cfg.Concurrency = 2
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report (run took %s):\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if !rep.OK() {
		t.Fatalf("check failed: end state %q, outbound %q", rep.Check.Problems, rep.Outbound.Problems)
	}
	o := rep.Outbound
	if o.Received != 5 || o.Users != 5 {
		t.Errorf("outbound: %d of %d users received, want 5 of 5", o.Received, o.Users)
	}
	h := o.Hanging
	if h == nil || h.Endpoints != 2 || h.Requests < 1 || h.DeleteError != "" {
		t.Fatalf("hanging = %+v; want 2 endpoints that received requests, deleted", h)
	}
	if !strings.Contains(out.String(), "  hanging endpoints: 2 at http://127.0.0.1:") || !strings.Contains(out.String(), "requests received and held") {
		t.Errorf("printed report does not say what the hanging endpoints received:\n%s", out.String())
	}
	if eps := endpoints(t, url); len(eps) != 0 {
		t.Errorf("endpoints after the run = %v, want the run's deleted", eps)
	}
}

func TestLoad_HangingEndpointsNeedTheEndpointAndAtMostEight(t *testing.T) {
	for _, c := range []struct {
		endpoint bool
		n        int
	}{{false, 1}, {true, 9}, {true, -1}} {
		cfg := Config{URL: "http://127.0.0.1:1", Secret: testSecret, APIKey: testAPIKey, AdminKey: testAdminKey, Users: 1,
			Endpoint: c.endpoint, HangingEndpoints: c.n}
		if err := cfg.normalize(); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "hanging endpoints") {
			t.Errorf("endpoint %v, %d hanging endpoints: %v; want a usage error", c.endpoint, c.n, err)
		}
	}
}

func TestLoad_EndpointCheckFailsWhenASignatureDoesNotVerify(t *testing.T) {
	url := newServer(t, nil)
	cfg := config(t, url)
	cfg.Users, cfg.Reads = 4, 4
	cfg.Endpoint, cfg.AdminKey, cfg.EndpointWait = true, testAdminKey, 3*time.Second
	cfg.endpointSecret = func(string) string { return otherSecret }
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Logf("report:\n%s", out.String())
	if !rep.Check.OK() {
		t.Fatalf("end-state check failed: %q", rep.Check.Problems)
	}
	if rep.OK() {
		t.Fatalf("check passed, but the receiver verifies with another secret:\n%s", out.String())
	}
	o := rep.Outbound
	if o.Invalid == 0 || o.Invalid != o.Deliveries || o.Received != 0 || o.Users != 4 {
		t.Errorf("outbound = %+v; want every delivery invalid and none of 4 users received", o)
	}
	if p := strings.Join(o.Problems, "\n"); !strings.Contains(p, "does not verify") || !strings.Contains(p, "not received in their final state") {
		t.Errorf("problems = %s\nwant invalid signatures and users not received", p)
	}
	if !strings.Contains(out.String(), "outbound: FAILED") {
		t.Errorf("printed report does not say the outbound check failed:\n%s", out.String())
	}
	if eps := endpoints(t, url); len(eps) != 0 {
		t.Errorf("endpoints after the run = %v, want the run's deleted", eps)
	}
}

func TestLoad_RunWithEndpointTakesTheAdminKeyFromTheEnvironment(t *testing.T) {
	url := newServer(t, nil)
	args := []string{"-url", url, "-users", "3", "-updates", "1", "-reads", "2", "-seed", "5", "-endpoint", "-endpoint-wait", "2m",
		"-template", filepath.Join("..", "..", "models", "testdata", "user.updated.json")}
	env := map[string]string{"CLERK_WEBHOOK_SECRET": testSecret, "USERSYNC_API_KEYS": testAPIKey, "USERSYNC_ADMIN_KEYS": " ," + testAdminKey + ",x"}
	var out bytes.Buffer
	if err := run(context.Background(), args, func(k string) string { return env[k] }, &out); err != nil {
		t.Fatalf("run = %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "final state: 3 of 3 users received") || !strings.Contains(out.String(), "outbound: OK") {
		t.Errorf("output does not say every user arrived:\n%s", out.String())
	}
}

func TestLoad_EndpointNeedsAnAdminKey(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), []byte(`{"webhookSecret":"whsec_file","apiKey":"usk_file","adminKey":"usk_admin"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLERK_WEBHOOK_SECRET": testSecret, "USERSYNC_API_KEYS": testAPIKey}
	getenv := func(k string) string { return env[k] }
	cfg := Config{Endpoint: true}
	if err := fillSecrets(&cfg, getenv, dir); err != nil || cfg.AdminKey != "usk_admin" {
		t.Errorf("admin key from the data dir = %q, %v; want usk_admin", cfg.AdminKey, err)
	}
	env["USERSYNC_ADMIN_KEYS"] = "usk_env,usk_other"
	cfg = Config{Endpoint: true}
	if err := fillSecrets(&cfg, getenv, dir); err != nil || cfg.AdminKey != "usk_env" {
		t.Errorf("admin key from the environment = %q, %v; want usk_env", cfg.AdminKey, err)
	}
	cfg = Config{}
	if err := fillSecrets(&cfg, getenv, dir); err != nil || cfg.AdminKey != "" {
		t.Errorf("without -endpoint, admin key = %q, %v; want none read", cfg.AdminKey, err)
	}
	delete(env, "USERSYNC_ADMIN_KEYS")
	for _, d := range []string{t.TempDir(), writeSecrets(t, `{"webhookSecret":"whsec_file","apiKey":"usk_file"}`)} {
		cfg = Config{Endpoint: true}
		err := fillSecrets(&cfg, getenv, d)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "USERSYNC_ADMIN_KEYS") || !strings.Contains(err.Error(), "secrets.json") {
			t.Errorf("no admin key anywhere: %v; want a usage error naming USERSYNC_ADMIN_KEYS and secrets.json", err)
		}
	}
	cfg = Config{URL: "http://127.0.0.1:1", Secret: testSecret, APIKey: testAPIKey, Users: 1, Endpoint: true}
	if _, err := Run(context.Background(), cfg); !errors.Is(err, errUsage) {
		t.Errorf("Run with -endpoint and no admin key = %v, want a usage error", err)
	}
}

func writeSecrets(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secrets.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReceiver_TwoDeliveriesOfOneUserAtOnceFailTheCheck: the receiver
// tells two deliveries of one user received at once (usersync must send
// an object's deliveries one after the other) from deliveries of two
// users at once.
func TestReceiver_TwoDeliveriesOfOneUserAtOnceFailTheCheck(t *testing.T) {
	rc, err := startReceiver("user_rc", 4, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	if err := rc.setSecret(testSecret); err != nil {
		t.Fatal(err)
	}
	wh, err := svix.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	send := func(msgID, userID string) {
		body := []byte(`{"type":"user.updated","data":{"userId":"` + userID + `","updatedAt":"2026-11-27T00:00:00Z"}}`)
		now := time.Now()
		sig, err := wh.Sign(msgID, now, body)
		if err != nil {
			t.Error(err)
			return
		}
		req, _ := http.NewRequest(http.MethodPost, rc.url, bytes.NewReader(body))
		req.Header.Set("webhook-id", msgID)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: %d", msgID, resp.StatusCode)
		}
	}
	var wg stdsync.WaitGroup
	for _, d := range [][2]string{{"msg_a1", "user_rc_a"}, {"msg_b1", "user_rc_b"}} {
		wg.Add(1)
		go func() { defer wg.Done(); send(d[0], d[1]) }()
	}
	wg.Wait()
	if rc.overlaps != 0 {
		t.Fatalf("overlaps = %d after two users' deliveries at once, want 0", rc.overlaps)
	}
	for _, id := range []string{"msg_a2", "msg_a3"} {
		wg.Add(1)
		go func() { defer wg.Done(); send(id, "user_rc_a") }()
	}
	wg.Wait()
	if rc.overlaps != 1 || len(rc.problems.list) != 1 || !strings.Contains(rc.problems.list[0], "user_rc_a came while another") {
		t.Errorf("overlaps = %d, problems %q; want one delivery of user_rc_a that came while another was received", rc.overlaps, rc.problems.list)
	}
}
