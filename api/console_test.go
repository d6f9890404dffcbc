package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// consoleHarness is a server with the console's parts wired as serve
// wires them: activity counted by the service, failures, runs.
type consoleHarness struct {
	*harness
	activity *sync.Activity
	sizes    *sizeSpy
	blocked  *blockedUsers
}

type consoleOptions struct {
	dryRun api.ReconcileDryRun
	now    func() time.Time
}

// sizeSpy remembers the bucket sizes the charts asked for.
type sizeSpy struct {
	api.ActivityReader
	mu    stdsync.Mutex
	sizes []time.Duration
}

func (s *sizeSpy) Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, size)
	s.mu.Unlock()
	return s.ActivityReader.Buckets(ctx, size, from, to)
}

func (s *sizeSpy) last() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sizes[len(s.sizes)-1]
}

func newConsoleHarness(t *testing.T, opts ...func(*consoleOptions)) *consoleHarness {
	t.Helper()
	var o consoleOptions
	for _, f := range opts {
		f(&o)
	}
	store := repotest.NewStore(t)
	act := sync.NewActivity(store.Activity(), o.now)
	blocked := &blockedUsers{ids: map[string]bool{}}
	svc := sync.New(store.Events(), repotest.Hook(store, blocked.before), o.now)
	svc.SetActivity(act)
	spy := &sizeSpy{ActivityReader: store.Activity()}
	e, err := api.New(api.Config{
		Sync: svc, Users: store.Users(), Billing: store.Billing(), Events: store.Events(), Eraser: store, DB: store,
		Logger: repotest.Discard(), WebhookSecrets: []string{testSecret},
		APIKeys: []string{testAPIKey}, AdminKeys: []string{testAdminKey}, Now: o.now,
		Console: api.Console{Activity: spy, Failures: store.Events(), Runs: store.Runs(), DryRun: o.dryRun, Context: t.Context()},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &consoleHarness{harness: &harness{t: t, store: store, url: srv.URL}, activity: act, sizes: spy, blocked: blocked}
}

// call sends method path with key ("" for none).
func (h *harness) call(method, path, key string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return h.do(req)
}

// decode decodes the body of r, which must have code, into v.
func decode(t *testing.T, r response, code int, v any) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("got %s, want %d", r, code)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

func (h *consoleHarness) flush() {
	h.t.Helper()
	if err := h.activity.Flush(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

// blockedUsers fails the writes of the users it blocks as the MongoDB
// store does when other users keep claiming the email a change claims:
// their events fail (a retry may pass), and pass once unblocked.
type blockedUsers struct {
	mu  stdsync.Mutex
	ids map[string]bool
}

func (b *blockedUsers) before(_ context.Context, ch models.Change) error {
	userID, _ := ch.IDs()
	b.mu.Lock()
	blocked := b.ids[userID]
	b.mu.Unlock()
	if blocked {
		return fmt.Errorf("apply event %q to user %q: other users kept claiming the email: %w", ch.Version().EventID, userID, models.ErrEmailTaken)
	}
	return nil
}

func (b *blockedUsers) set(userID string, blocked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ids[userID] = blocked
}

// block makes n failed events that can pass later: user_moverI exists
// with moverI@example.com, and its update to movedI@example.com fails
// while its writes are blocked. unblock lets them through.
func (h *consoleHarness) block(n int) (eventIDs []string, unblock func()) {
	h.t.Helper()
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := range n {
		id := fmt.Sprintf("user_mover%d", i)
		h.mustDeliver(newID(), userBody(h.t, "user.created", clerkUser{ID: id, UpdatedAt: base, Email: fmt.Sprintf("mover%d@example.com", i), First: "Mover"}))
		h.blocked.set(id, true)
		evID := newID()
		r := h.deliver(evID, userBody(h.t, "user.updated", clerkUser{ID: id, UpdatedAt: base + 1000, Email: fmt.Sprintf("moved%d@example.com", i), First: "Mover"}))
		if r.Code != http.StatusServiceUnavailable {
			h.t.Fatalf("deliver while the user's writes fail: %s, want 503", r)
		}
		eventIDs = append(eventIDs, evID)
	}
	return eventIDs, func() {
		for i := range n {
			h.blocked.set(fmt.Sprintf("user_mover%d", i), false)
		}
	}
}

func TestConsole_ServesItsFilesWithAStrictPolicy(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	for _, tc := range []struct{ path, ctype string }{
		{"/admin", "text/html"}, {"/admin/", "text/html"}, {"/admin/index.html", "text/html"},
		{"/admin/console.js", "javascript"}, {"/admin/console.css", "text/css"},
	} {
		r := h.get(tc.path, "")
		if r.Code != http.StatusOK || !strings.Contains(r.Header.Get("Content-Type"), tc.ctype) {
			t.Errorf("GET %s = %d %s, want 200 %s", tc.path, r.Code, r.Header.Get("Content-Type"), tc.ctype)
			continue
		}
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http") {
			t.Errorf("GET %s: Content-Security-Policy %q allows inline code or another host", tc.path, csp)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", tc.path, r.Header.Get("X-Content-Type-Options"))
		}
		if r.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie", tc.path)
		}
	}
	for _, path := range []string{"/admin/nope.js", "/admin/..%2fopenapi.json", "/admin/console"} {
		if r := h.get(path, ""); r.Code != http.StatusNotFound {
			t.Errorf("GET %s = %s, want 404", path, r)
		}
	}
}

// TestConsole_PageHasNoInlineCodeAndRendersTextOnly reads the files: no
// inline script or style (the policy forbids them anyway), nothing from
// another host, and no HTML parsing of strings in the script.
func TestConsole_PageHasNoInlineCodeAndRendersTextOnly(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	page := string(h.get("/admin", "").Body)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`<style`), regexp.MustCompile(`\sstyle=`), regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`(?:src|href)="(?:https?:)?//`),
	} {
		if bad.MatchString(page) {
			t.Errorf("the page matches %s", bad)
		}
	}
	// The SVG namespace is a name, not a request.
	js := strings.ReplaceAll(string(h.get("/admin/console.js", "").Body), `"http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "document.cookie", "http://", "https://"} {
		if strings.Contains(js, bad) {
			t.Errorf("console.js uses %q", bad)
		}
	}
	if !strings.Contains(js, "sessionStorage") || !strings.Contains(js, `"Bearer "`) {
		t.Error("console.js does not keep the key in sessionStorage and send it as a bearer key")
	}
}

// TestConsole_ChartsDrawEveryOutcomeTheActivityCounts reads the script and
// the style sheet: the kinds of the totals are the activity kinds, the
// outcomes chart stacks every one but received, and each has its label,
// bar colour and legend entry.
func TestConsole_ChartsDrawEveryOutcomeTheActivityCounts(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	js, css := string(h.get("/admin/console.js", "").Body), string(h.get("/admin/console.css", "").Body)
	list := func(name string) []string {
		t.Helper()
		m := regexp.MustCompile(`const ` + name + ` = \[([^\]]*)\]`).FindStringSubmatch(js)
		if m == nil {
			t.Fatalf("console.js has no const %s = [...]", name)
		}
		var out []string
		for _, q := range regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(m[1], -1) {
			out = append(out, q[1])
		}
		return out
	}
	if got := list("KINDS"); strings.Join(got, ",") != strings.Join(models.ActivityKinds, ",") {
		t.Errorf("console.js KINDS = %q, want the activity kinds %q", got, models.ActivityKinds)
	}
	outcomes := list("OUTCOMES")
	if want := models.ActivityKinds[1:]; strings.Join(outcomes, ",") != strings.Join(want, ",") {
		t.Errorf("console.js OUTCOMES = %q, want %q", outcomes, want)
	}
	for _, k := range models.ActivityKinds {
		if !regexp.MustCompile(`KIND_LABEL = \{[^}]*\b` + k + `: "`).MatchString(js) {
			t.Errorf("console.js has no label of %s", k)
		}
		for _, rule := range []string{".bar-" + k + " { fill: var(--" + k + "); }", ".legend .k-" + k + "::before { background: var(--" + k + "); }"} {
			if !strings.Contains(css, rule) {
				t.Errorf("console.css lacks %q", rule)
			}
		}
		if n := strings.Count(css, "--"+k+": #"); n != 2 {
			t.Errorf("console.css defines --%s %d times, want twice (light and dark)", k, n)
		}
	}
}

// consoleEndpoints are the endpoints the console added, all for admins.
var consoleEndpoints = []struct{ method, path string }{
	{http.MethodGet, "/v1/admin/overview"},
	{http.MethodGet, "/v1/admin/activity"},
	{http.MethodGet, "/v1/events/failures"},
	{http.MethodPost, "/v1/events/replay?dryRun=true"},
	{http.MethodGet, "/v1/reconcile/runs"},
	{http.MethodGet, "/v1/reconcile/dry-run"},
	{http.MethodPost, "/v1/reconcile/dry-run"},
}

func TestConsoleEndpoints_NeedAnAdminKey(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	for _, ep := range consoleEndpoints {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			for _, tc := range []struct {
				key  string
				want int
				code string
			}{{"", 401, "unauthorized"}, {"usk_wrong", 401, "unauthorized"}, {testAPIKey, 403, "forbidden"}} {
				var body struct{ Error struct{ Code string } }
				decode(t, h.call(ep.method, ep.path, tc.key), tc.want, &body)
				if body.Error.Code != tc.code {
					t.Errorf("key %q: code %q, want %q", tc.key, body.Error.Code, tc.code)
				}
			}
			r := h.call(ep.method, ep.path, testAdminKey)
			if r.Code != http.StatusOK && r.Code != http.StatusNotImplemented {
				t.Errorf("with an admin key: %s, want 200 (or 501 for the dry run without Clerk)", r)
			}
		})
	}
}

func TestConsoleEndpoints_RefuseParametersOutOfBounds(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	for _, ep := range []struct{ method, path string }{
		{http.MethodGet, "/v1/admin/activity?range=year"},
		{http.MethodGet, "/v1/admin/activity?since=2026-01-01T00:00:00Z"},
		{http.MethodGet, "/v1/admin/overview?x=1"},
		{http.MethodGet, "/v1/events/failures?scan=0"},
		{http.MethodGet, "/v1/events/failures?scan=10001"},
		{http.MethodPost, "/v1/events/replay?limit=501"},
		{http.MethodPost, "/v1/events/replay?limit=0"},
		{http.MethodPost, "/v1/events/replay?status=processed"},
		{http.MethodPost, "/v1/events/replay?since=yesterday"},
		{http.MethodPost, "/v1/events/replay?reason=" + strings.Repeat("x", 97)},
		{http.MethodPost, "/v1/events/replay?cursor=nope"},
		{http.MethodGet, "/v1/reconcile/runs?limit=51"},
	} {
		if r := h.call(ep.method, ep.path, testAdminKey); r.Code != http.StatusBadRequest {
			t.Errorf("%s %s = %s, want 400", ep.method, ep.path, r)
		}
	}
}

type activityBody struct {
	Range         string           `json:"range"`
	StepSeconds   int64            `json:"stepSeconds"`
	BucketSeconds int64            `json:"bucketSeconds"`
	Totals        map[string]int64 `json:"totals"`
	Points        []struct {
		Start  time.Time        `json:"start"`
		Counts map[string]int64 `json:"counts"`
	} `json:"points"`
}

// TestActivity_ChartsAddUpTheCountsWrittenAtIngest delivers events and
// reads them back per minute; the day chart sums minutes into 15-minute
// points and the week chart reads hour buckets.
func TestActivity_ChartsAddUpTheCountsWrittenAtIngest(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	h := newConsoleHarness(t, func(o *consoleOptions) { o.now = func() time.Time { return now } })
	base := now.Add(-time.Hour).UnixMilli()
	for i := range 3 {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_c%d", i), UpdatedAt: base + int64(i), Email: fmt.Sprintf("c%d@example.com", i)}))
	}
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_c0", UpdatedAt: base - 10, Email: "c0@example.com"})) // stale
	h.mustDeliver(newID(), deleteBody(t, "user_c1", base+100))
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_c1", UpdatedAt: base + 200, Email: "c1@example.com"})) // deleted
	if r := h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)); r.Code != http.StatusBadRequest {
		t.Fatalf("an invalid payload: %s, want 400", r)
	}
	// Three days ago: outside the day, inside the week.
	if err := h.store.Activity().Add(context.Background(), now.Add(-72*time.Hour), models.ActivityReceived, 40); err != nil {
		t.Fatal(err)
	}
	h.flush()

	want := map[string]int64{"received": 7, "applied": 4, "stale": 1, "deleted": 1, "failed": 1}
	for _, tc := range []struct {
		rng          string
		points       int
		step, bucket time.Duration
		received     int64
	}{
		{"hour", 60, time.Minute, models.ActivityMinute, 7},
		{"day", 96, 15 * time.Minute, models.ActivityMinute, 7},
		{"week", 168, time.Hour, models.ActivityHour, 47},
	} {
		t.Run(tc.rng, func(t *testing.T) {
			var a activityBody
			decode(t, h.get("/v1/admin/activity?range="+tc.rng, testAdminKey), http.StatusOK, &a)
			if got := h.sizes.last(); got != tc.bucket {
				t.Errorf("read buckets of %s, want %s", got, tc.bucket)
			}
			if len(a.Points) != tc.points || a.StepSeconds != int64(tc.step/time.Second) || a.BucketSeconds != int64(tc.bucket/time.Second) {
				t.Fatalf("%d points of %d s from buckets of %d s, want %d of %s from %s", len(a.Points), a.StepSeconds, a.BucketSeconds, tc.points, tc.step, tc.bucket)
			}
			sums := map[string]int64{}
			for i, p := range a.Points {
				if i > 0 && p.Start.Sub(a.Points[i-1].Start) != tc.step {
					t.Fatalf("point %d starts %v after the one before, want %s", i, p.Start.Sub(a.Points[i-1].Start), tc.step)
				}
				for k, v := range p.Counts {
					sums[k] += v
				}
			}
			last := a.Points[len(a.Points)-1].Start
			if now.Before(last) || !now.Before(last.Add(tc.step)) {
				t.Errorf("the last point starts %v; want the one now (%v) is in", last, now)
			}
			for k, v := range want {
				if k == "received" {
					v = tc.received
				}
				if sums[k] != v || a.Totals[k] != v {
					t.Errorf("%s: points add up to %d, totals %d; want %d", k, sums[k], a.Totals[k], v)
				}
			}
		})
	}
}

func TestOverview_ShowsHealthAtAGlance(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	var before struct {
		Ready         struct{ OK bool }
		LastWebhookAt *time.Time
		Reconcile     struct {
			DryRunAvailable bool
			LastRun         *struct{ Applied int }
		}
	}
	decode(t, h.get("/v1/admin/overview", testAdminKey), http.StatusOK, &before)
	if !before.Ready.OK || before.LastWebhookAt != nil || before.Reconcile.DryRunAvailable || before.Reconcile.LastRun != nil {
		t.Errorf("overview of a new server = %+v", before)
	}
	_, _ = h.block(2)
	if _, err := h.store.Runs().Record(context.Background(), models.ReconcileSummary{
		Kind: "reconcile", Trigger: "schedule", StartedAt: time.Now(), Success: true, Users: &models.ReconcileCounts{Applied: 3, Local: -1},
	}); err != nil {
		t.Fatal(err)
	}
	var o struct {
		LastWebhookAt *time.Time
		Events        struct {
			Status  map[string]int64
			Outcome map[string]int64
			GaveUp  int64
			Backlog int64
		}
		Reconcile struct {
			LastRun *struct {
				Applied    int
				LocalUsers *int
			}
		}
		Build struct{ Version string }
	}
	decode(t, h.get("/v1/admin/overview", testAdminKey), http.StatusOK, &o)
	if o.LastWebhookAt == nil || time.Since(*o.LastWebhookAt) < 0 {
		t.Errorf("lastWebhookAt = %v after deliveries", o.LastWebhookAt)
	}
	if o.Events.Status["failed"] != 2 || o.Events.Backlog != 2 || o.Events.GaveUp != 0 || o.Events.Outcome["applied"] != 2 {
		t.Errorf("events = %+v; want 2 failed, backlog 2, 2 applied", o.Events)
	}
	if o.Reconcile.LastRun == nil || o.Reconcile.LastRun.Applied != 3 || o.Reconcile.LastRun.LocalUsers != nil {
		t.Errorf("reconcile.lastRun = %+v", o.Reconcile.LastRun)
	}
	if o.Build.Version == "" {
		t.Error("no build version")
	}
}

type failuresBody struct {
	Groups []struct {
		Reason        string `json:"reason"`
		Count         int64  `json:"count"`
		LatestEventID string `json:"latestEventId"`
	} `json:"groups"`
	Scanned  int  `json:"scanned"`
	Complete bool `json:"complete"`
}

func TestFailures_GroupsFailedEventsByReason(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	ids, _ := h.block(3)
	if r := h.deliver(newID(), []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)); r.Code != http.StatusBadRequest {
		t.Fatalf("an invalid payload: %s", r)
	}
	var f failuresBody
	decode(t, h.get("/v1/events/failures", testAdminKey), http.StatusOK, &f)
	if !f.Complete || f.Scanned != 4 || len(f.Groups) != 2 || f.Groups[0].Reason != "email_taken" || f.Groups[0].Count != 3 ||
		f.Groups[0].LatestEventID != ids[2] || f.Groups[1].Count != 1 || !strings.HasPrefix(f.Groups[1].Reason, "invalid: ") {
		t.Errorf("failures = %+v; want email_taken ×3 (latest %s), then the invalid one", f, ids[2])
	}
	decode(t, h.get("/v1/events/failures?scan=2", testAdminKey), http.StatusOK, &f)
	if f.Complete || f.Scanned != 2 {
		t.Errorf("failures?scan=2 = %+v; want 2 read, not complete", f)
	}
}

type bulkBody struct {
	DryRun     bool    `json:"dryRun"`
	Matched    int     `json:"matched"`
	Scanned    int     `json:"scanned"`
	More       bool    `json:"more"`
	NextCursor *string `json:"nextCursor"`
	Replayed   int     `json:"replayed"`
	Processed  int     `json:"processed"`
	Failed     int     `json:"failed"`
	Results    []struct {
		EventID string `json:"eventId"`
		Status  string `json:"status"`
	} `json:"results"`
}

func TestBulkReplay_CountsFirstThenReplaysAtMostLimitPerCall(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	ids, unblock := h.block(3)
	var dry bulkBody
	decode(t, h.call(http.MethodPost, "/v1/events/replay?dryRun=true&reason=email_taken", testAdminKey), http.StatusOK, &dry)
	if !dry.DryRun || dry.Matched != 3 || dry.More || dry.Replayed != 0 || len(dry.Results) != 0 {
		t.Errorf("dry run = %+v; want 3 matched, nothing replayed", dry)
	}
	for _, id := range ids {
		if st := h.event(id)["status"]; st != "failed" {
			t.Errorf("after a dry run, event %s is %v", id, st)
		}
	}
	var none bulkBody
	decode(t, h.call(http.MethodPost, "/v1/events/replay?dryRun=true&reason=invalid", testAdminKey), http.StatusOK, &none)
	if none.Matched != 0 {
		t.Errorf("another reason matched %d", none.Matched)
	}

	// Still blocked: replayed, and failed again.
	var again bulkBody
	decode(t, h.call(http.MethodPost, "/v1/events/replay?limit=1", testAdminKey), http.StatusOK, &again)
	if again.Replayed != 1 || again.Failed != 1 || !again.More || again.NextCursor == nil {
		t.Errorf("replay while the writes fail = %+v; want 1 replayed, failed again, more", again)
	}

	unblock()
	var first, rest bulkBody
	decode(t, h.call(http.MethodPost, "/v1/events/replay?limit=2", testAdminKey), http.StatusOK, &first)
	if first.Matched != 2 || first.Replayed != 2 || first.Processed != 2 || !first.More || first.NextCursor == nil {
		t.Fatalf("first call = %+v; want 2 replayed and processed, more after a cursor", first)
	}
	decode(t, h.call(http.MethodPost, "/v1/events/replay?limit=2&cursor="+*first.NextCursor, testAdminKey), http.StatusOK, &rest)
	if rest.Replayed != 1 || rest.Processed != 1 || rest.More {
		t.Errorf("second call = %+v; want the last one processed, no more", rest)
	}
	for i, id := range ids {
		if st := h.event(id)["status"]; st != "processed" {
			t.Errorf("event %s is %v after the replays", id, st)
		}
		if u := h.user(fmt.Sprintf("user_mover%d", i)); u["email"] != fmt.Sprintf("moved%d@example.com", i) {
			t.Errorf("user_mover%d has email %v after the replays", i, u["email"])
		}
	}
}

// TestBulkReplay_TakesTheEventLogsFilters: a bulk replay selects events
// by kind, Clerk type and object as the event log does (one filter, read
// by one piece of code).
func TestBulkReplay_TakesTheEventLogsFilters(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	for _, body := range []string{
		`{"type":"user.updated","data":{"id":"user_bad"}}`,
		`{"type":"organization.updated","data":{"id":"org_bad"}}`,
		`{"type":"organizationMembership.updated","data":{"id":"orgmem_bad"}}`,
	} {
		if r := h.deliver(newID(), []byte(body)); r.Code != http.StatusBadRequest {
			t.Fatalf("an invalid payload: %s", r)
		}
	}
	for query, want := range map[string]int{
		"":                                   3,
		"&kind=organization":                 1,
		"&kind=membership&eventType=updated": 1,
		"&eventType=organizationMembership.updated": 1,
		"&objectId=org_bad":                         1,
		"&kind=user&objectId=org_bad":               0,
	} {
		var dry bulkBody
		decode(t, h.call(http.MethodPost, "/v1/events/replay?dryRun=true"+query, testAdminKey), http.StatusOK, &dry)
		if dry.Matched != want {
			t.Errorf("dry run%s matched %d, want %d", query, dry.Matched, want)
		}
	}
	if r := h.call(http.MethodPost, "/v1/events/replay?dryRun=true&kind=user&eventType=organization.updated", testAdminKey); r.Code != http.StatusBadRequest {
		t.Errorf("a type of another kind: %s, want 400", r)
	}
}

func TestReconcileRuns_ListsTheRecordedRunsNewestFirst(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if _, err := h.store.Runs().Record(context.Background(), models.ReconcileSummary{
			Kind: "reconcile", Trigger: "command", StartedAt: start.Add(time.Duration(i) * time.Hour), Success: i != 2,
			Error: map[bool]string{true: "", false: "stopped at offset 500: Clerk's API: 503"}[i != 2],
			Users: &models.ReconcileCounts{Applied: i, Local: 10},
		}); err != nil {
			t.Fatal(err)
		}
	}
	var runs struct {
		Data []struct {
			StartedAt  time.Time `json:"startedAt"`
			Success    bool      `json:"success"`
			Error      string    `json:"error"`
			Applied    int       `json:"applied"`
			LocalUsers *int      `json:"localUsers"`
		} `json:"data"`
	}
	decode(t, h.get("/v1/reconcile/runs?limit=2", testAdminKey), http.StatusOK, &runs)
	if len(runs.Data) != 2 || !runs.Data[0].StartedAt.Equal(start.Add(2*time.Hour)) || runs.Data[0].Success ||
		runs.Data[0].Error == "" || runs.Data[1].Applied != 1 || runs.Data[1].LocalUsers == nil || *runs.Data[1].LocalUsers != 10 {
		t.Errorf("runs = %+v", runs.Data)
	}
}

// TestReconcileRuns_ListEachKindsCountsAndNullForAKindNotRead records a
// run of every kind and a backfill of organizations only: each kind has
// its counts (local null when not read, as for subscription items, which
// a run never reads here), a kind the run did not read is null, and the
// top-level counts stay the users' (zeros without them).
func TestReconcileRuns_ListEachKindsCountsAndNullForAKindNotRead(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []models.ReconcileSummary{
		{Kind: "reconcile", Trigger: "schedule", StartedAt: start, Success: false, Error: "1 membership is absent from Clerk, more than allowed",
			Users:             &models.ReconcileCounts{Clerk: 1234, Local: 1236, Applied: 5, Stale: 1, Unchanged: 1228, Deleted: 2},
			Organizations:     &models.ReconcileCounts{Clerk: 12, Local: 13, Unchanged: 12, Deleted: 1},
			Memberships:       &models.ReconcileCounts{Clerk: 40, Local: 41, Applied: 1, Unchanged: 39, Failed: 2, Refused: true, ToDelete: 11},
			SubscriptionItems: &models.ReconcileCounts{Clerk: 9, Local: -1, Applied: 3, Stale: 1, Unchanged: 4, Failed: 1}},
		{Kind: "backfill", Trigger: "command", StartedAt: start.Add(time.Hour), Success: true,
			Organizations: &models.ReconcileCounts{Clerk: 12, Local: -1, Applied: 12}},
	} {
		if _, err := h.store.Runs().Record(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	r := h.get("/v1/reconcile/runs", testAdminKey)
	var runs struct {
		Data []map[string]any `json:"data"`
	}
	decode(t, r, http.StatusOK, &runs)
	if len(runs.Data) != 2 {
		t.Fatalf("runs = %s", r.Body)
	}
	backfill, all := runs.Data[0], runs.Data[1]
	for _, tc := range []struct {
		name string
		got  any
		want string
	}{
		{"every kind: users", all["users"], `{"applied":5,"clerk":1234,"deleted":2,"failed":0,"local":1236,"refused":false,"stale":1,"toDelete":0,"unchanged":1228}`},
		{"every kind: organizations", all["organizations"], `{"applied":0,"clerk":12,"deleted":1,"failed":0,"local":13,"refused":false,"stale":0,"toDelete":0,"unchanged":12}`},
		{"every kind: memberships", all["memberships"], `{"applied":1,"clerk":40,"deleted":0,"failed":2,"local":41,"refused":true,"stale":0,"toDelete":11,"unchanged":39}`},
		{"every kind: subscription items", all["subscriptionItems"], `{"applied":3,"clerk":9,"deleted":0,"failed":1,"local":null,"refused":false,"stale":1,"toDelete":0,"unchanged":4}`},
		{"every kind: the run's refusal", all["refused"], `true`},
		{"every kind: the users' at the top", []any{all["clerkUsers"], all["localUsers"], all["applied"], all["toDelete"]}, `[1234,1236,5,0]`},
		{"organizations only: users", backfill["users"], `null`},
		{"organizations only: organizations", backfill["organizations"], `{"applied":12,"clerk":12,"deleted":0,"failed":0,"local":null,"refused":false,"stale":0,"toDelete":0,"unchanged":0}`},
		{"organizations only: memberships", backfill["memberships"], `null`},
		{"organizations only: subscription items", backfill["subscriptionItems"], `null`},
		{"organizations only: the users' at the top", []any{backfill["clerkUsers"], backfill["localUsers"], backfill["applied"]}, `[0,null,0]`},
	} {
		b, err := json.Marshal(tc.got)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s = %s, want %s", tc.name, b, tc.want)
		}
	}
	var o struct {
		Reconcile struct{ LastRun map[string]any }
	}
	decode(t, h.get("/v1/admin/overview", testAdminKey), http.StatusOK, &o)
	if o.Reconcile.LastRun["organizations"] == nil || o.Reconcile.LastRun["memberships"] != nil {
		t.Errorf("overview's last run = %v; want the backfill's organizations, no memberships", o.Reconcile.LastRun)
	}
}

func TestDryRun_IsNotConfiguredWithoutClerk(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		var body struct {
			Error struct{ Code, Message string }
		}
		decode(t, h.call(method, "/v1/reconcile/dry-run", testAdminKey), http.StatusNotImplemented, &body)
		if body.Error.Code != "not_configured" || !strings.Contains(body.Error.Message, "CLERK_SECRET_KEY") {
			t.Errorf("%s: %+v", method, body.Error)
		}
	}
}

type dryRunKindBody struct {
	Clerk          int    `json:"clerk"`
	Local          *int   `json:"local"`
	Applied        int    `json:"applied"`
	Unchanged      int    `json:"unchanged"`
	Deleted        int    `json:"deleted"`
	Refused        bool   `json:"refused"`
	ToDelete       int    `json:"toDelete"`
	Complete       bool   `json:"complete"`
	DeletesSkipped string `json:"deletesSkipped"`
}

type dryRunBody struct {
	State  string `json:"state"`
	Listed int    `json:"listed"`
	Report *struct {
		Applied       int             `json:"applied"`
		Deleted       int             `json:"deleted"`
		Refused       bool            `json:"refused"`
		Users         *dryRunKindBody `json:"users"`
		Organizations *dryRunKindBody `json:"organizations"`
		Memberships   *dryRunKindBody `json:"memberships"`
	} `json:"report"`
	Changes []struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		UserID string `json:"userId"`
		Action string `json:"action"`
	} `json:"changes"`
	ChangesDropped int `json:"changesDropped"`
}

// waitDryRun follows the dry run until it is no longer running.
func (h *consoleHarness) waitDryRun() dryRunBody {
	h.t.Helper()
	var d dryRunBody
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		decode(h.t, h.get("/v1/reconcile/dry-run", testAdminKey), http.StatusOK, &d)
		if d.State != "running" || time.Now().After(deadline) {
			return d
		}
	}
}

// TestDryRun_ReportsEachKindAndTheChangesOfEvery runs a dry run that
// reads every kind, organizations refused over the limit, and one that
// finds organizations turned off: each kind read has its counts, a kind
// not read is null, and the changes name their kind and id.
func TestDryRun_ReportsEachKindAndTheChangesOfEvery(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var clock stdsync.Mutex
	orgsOff := false
	h := newConsoleHarness(t, func(o *consoleOptions) {
		o.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
		o.dryRun = func(ctx context.Context, onPage func(int, sync.Tally), onNote func(sync.Note)) (sync.ReconcileReport, error) {
			users := sync.KindReport{Kind: models.KindUser, Complete: true, Local: 4, Deleted: 1, Listed: sync.Tally{Read: 4, Applied: 1, Unchanged: 3}}
			onPage(0, users.Listed)
			onNote(sync.Note{Kind: models.KindUser, ID: "user_gone", Action: sync.NoteWouldDelete})
			clock.Lock()
			off := orgsOff
			clock.Unlock()
			if off {
				return sync.ReconcileReport{Kinds: []sync.KindReport{users,
					{Kind: models.KindOrganization, Complete: true, Off: true, Local: -1, DeletesSkipped: "organizations are not enabled in the Clerk instance"},
					{Kind: models.KindMembership, Complete: true, Off: true, Local: -1, DeletesSkipped: "memberships are not enabled in the Clerk instance"},
				}}, nil
			}
			orgs := sync.KindReport{Kind: models.KindOrganization, Complete: true, Local: 14, Refused: true,
				ToDelete: []string{"org_a", "org_b"}, Listed: sync.Tally{Read: 12, Unchanged: 12}}
			mships := sync.KindReport{Kind: models.KindMembership, Complete: true, Local: 40, Deleted: 1, Listed: sync.Tally{Read: 40, Applied: 2, Duplicate: 38}}
			onPage(0, orgs.Listed)
			onPage(0, mships.Listed)
			onNote(sync.Note{Kind: models.KindOrganization, ID: "org_a", Action: sync.NoteWouldDelete})
			onNote(sync.Note{Kind: models.KindMembership, ID: "orgmem_new", Action: sync.NoteWouldCreate})
			return sync.ReconcileReport{Kinds: []sync.KindReport{users, orgs, mships}}, nil
		}
	})
	decode(t, h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey), http.StatusAccepted, &dryRunBody{})
	d := h.waitDryRun()
	if d.State != "done" || d.Listed != 56 || d.Report == nil {
		t.Fatalf("dry run = %+v, want done, 56 listed (4 users, 12 organizations, 40 memberships)", d)
	}
	r := d.Report
	if r.Applied != 1 || r.Deleted != 1 || r.Refused || r.Users == nil || r.Users.Clerk != 4 || r.Users.Deleted != 1 {
		t.Errorf("users: top %+v, users %+v; want 1 applied and 1 deleted at the top and in users", r, r.Users)
	}
	if o := r.Organizations; o == nil || o.Clerk != 12 || o.Local == nil || *o.Local != 14 || o.Unchanged != 12 || !o.Refused || o.ToDelete != 2 || !o.Complete {
		t.Errorf("organizations = %+v, want 12 in Clerk, 14 local, refused with 2 to delete", o)
	}
	if m := r.Memberships; m == nil || m.Clerk != 40 || m.Applied != 2 || m.Unchanged != 38 || m.Deleted != 1 {
		t.Errorf("memberships = %+v, want 40 in Clerk, 2 applied, 38 unchanged, 1 deleted", m)
	}
	want := []string{"user user_gone user_gone would_delete", "organization org_a  would_delete", "membership orgmem_new  would_create"}
	var got []string
	for _, c := range d.Changes {
		got = append(got, strings.Join([]string{c.Kind, c.ID, c.UserID, c.Action}, " "))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("changes = %q, want %q", got, want)
	}

	clock.Lock()
	now, orgsOff = now.Add(time.Minute), true
	clock.Unlock()
	decode(t, h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey), http.StatusAccepted, &dryRunBody{})
	d = h.waitDryRun()
	if d.State != "done" || d.Report == nil || d.Report.Users == nil || d.Report.Organizations != nil || d.Report.Memberships != nil {
		t.Errorf("organizations turned off: %+v (report %+v); want users only, organizations and memberships null", d, d.Report)
	}
}

// TestDryRun_RunsInTheBackgroundOneAtATime drives a dry run that waits
// for the test: a second start is refused while it runs and for a minute
// after it started; its notes are bounded.
func TestDryRun_RunsInTheBackgroundOneAtATime(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var clock stdsync.Mutex
	now := time.Now()
	h := newConsoleHarness(t, func(o *consoleOptions) {
		o.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
		o.dryRun = func(ctx context.Context, onPage func(int, sync.Tally), onUser func(sync.Note)) (sync.ReconcileReport, error) {
			onPage(0, sync.Tally{Read: 500})
			for i := range 1005 {
				onUser(sync.Note{Kind: models.KindUser, ID: fmt.Sprintf("user_%d", i), Action: sync.NoteWouldCreate})
			}
			onUser(sync.Note{Kind: models.KindUser, ID: "user_kept", Action: sync.NoteKept})
			select {
			case <-release:
			case <-ctx.Done():
				return sync.ReconcileReport{}, ctx.Err()
			}
			return sync.ReconcileReport{Kinds: []sync.KindReport{{Kind: models.KindUser, Complete: true, Listed: sync.Tally{Read: 500, Applied: 1005}, Deleted: 2, Local: 7}}}, nil
		}
	})
	var d dryRunBody
	decode(t, h.get("/v1/reconcile/dry-run", testAdminKey), http.StatusOK, &d)
	if d.State != "none" {
		t.Errorf("before any: state %q", d.State)
	}
	decode(t, h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey), http.StatusAccepted, &d)
	if d.State != "running" {
		t.Errorf("started: state %q", d.State)
	}
	if r := h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey); r.Code != http.StatusConflict {
		t.Errorf("a second start while one runs: %s, want 409", r)
	}
	close(release)
	deadline := time.Now().Add(30 * time.Second)
	for d.State == "running" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		decode(t, h.get("/v1/reconcile/dry-run", testAdminKey), http.StatusOK, &d)
	}
	if d.State != "done" || d.Listed != 500 || d.Report == nil || d.Report.Applied != 1005 || d.Report.Deleted != 2 ||
		len(d.Changes) != 1000 || d.ChangesDropped != 5 || d.Changes[0].Action != "would_create" {
		t.Errorf("finished: %+v (report %+v), want done, 500 listed, 1000 changes and 5 dropped", d, d.Report)
	}
	if r := h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey); r.Code != http.StatusConflict {
		t.Errorf("a start within a minute of the last: %s, want 409", r)
	}
	clock.Lock()
	now = now.Add(time.Minute)
	clock.Unlock()
	if r := h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey); r.Code != http.StatusAccepted {
		t.Errorf("a start a minute later: %s, want 202", r)
	}
}

// jsStrings returns the quoted string literals ("…" and '…') of a script,
// skipping comments and template literals.
func jsStrings(js string) []string {
	var out []string
	for i := 0; i < len(js); i++ {
		switch c := js[i]; {
		case c == '/' && i+1 < len(js) && js[i+1] == '/':
			for i < len(js) && js[i] != '\n' {
				i++
			}
		case c == '`':
			for i++; i < len(js) && js[i] != '`'; i++ {
				if js[i] == '\\' {
					i++
				}
			}
		case c == '"' || c == '\'':
			var b strings.Builder
			for i++; i < len(js) && js[i] != c && js[i] != '\n'; i++ {
				if js[i] == '\\' && i+1 < len(js) {
					i++
				}
				b.WriteByte(js[i])
			}
			out = append(out, b.String())
		}
	}
	return out
}

// TestConsole_TextsAreTextNotMarkdown: the console's texts are shown as
// they are, so none may hold Markdown's backticks (code is a <code>).
func TestConsole_TextsAreTextNotMarkdown(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	js := string(h.get("/admin/console.js", "").Body)
	strs := jsStrings(js)
	if len(strs) < 100 {
		t.Fatalf("found %d string literals in console.js, the scan is wrong", len(strs))
	}
	for _, s := range strs {
		if strings.Contains(s, "`") {
			t.Errorf("console.js shows the text %q, with Markdown backticks", s)
		}
	}
}

// TestConsole_EventsOfferDiscardForAFailedEventWithAReason: the event page
// has a Discard button for failed events only, which asks for a reason and
// posts it; the event log's filter has the discarded status, and the event
// log wraps its cells so that the Error column stays in view.
func TestConsole_EventsOfferDiscardForAFailedEventWithAReason(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t)
	js, page, style := string(h.get("/admin/console.js", "").Body), string(h.get("/admin", "").Body),
		string(h.get("/admin/console.css", "").Body)
	for _, want := range []string{`ev.status === "failed" ? h("button"`, `"/discard", {}, undefined, { reason }`, `"failed", "discarded"]`,
		`ev.status !== "discarded"`} {
		if !strings.Contains(js, want) {
			t.Errorf("console.js lacks %s", want)
		}
	}
	for _, want := range []string{`<dialog id="discard"`, `<textarea id="discard-reason"`, `maxlength="1000"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if !strings.Contains(style, "#event-list td { overflow-wrap: anywhere; }") {
		t.Error("the event log's cells do not wrap: a long id pushes the Error column out of view")
	}
}
