package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	stdsync "sync"
	"syscall"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/usersync/usersync/models"
)

// Limits keep every run bounded in count as well as in time.
const (
	maxUsers       = 100_000
	maxUpdates     = 1_000
	maxEvents      = 1_000_000 // users × (1 + updates)
	maxReads       = 1_000_000
	maxConcurrency = 512
	maxAttempts    = 10
	maxTimeout     = time.Hour
	maxPageSize    = 200 // the API's largest limit

	// requestTimeout bounds one request: Svix gives up on an answer after 15 s.
	requestTimeout = 20 * time.Second
	// maxAnswer bounds how much of an answer is read.
	maxAnswer = 4 << 20
)

// Config is one load run.
type Config struct {
	URL      string // usersync's base URL; loopback addresses only
	Secret   string // webhook signing secret (whsec_...)
	APIKey   string // key for the users API
	Template []byte // a Clerk user event body that events are built from
	Users    int    // new users in the run
	Updates  int    // user.updated events per user
	// Sessions sends each update as a sign-in instead: a session.created
	// of the user, active at the update's time, embedding the user's state
	// as created (not newer), which moves only its lastActiveAt.
	Sessions    bool
	Duplicates  float64 // fraction of events delivered a second time
	Shuffled    float64 // fraction of users whose updates are sent at once, shuffled
	Reads       int     // API reads, single users and list pages, half each
	PageSize    int     // limit of a list page; 0 means 50
	Concurrency int     // requests in flight at most; 0 means 8
	// Rate, if not 0, spaces the webhook's requests evenly at that many a
	// second (a steady stream), within Concurrency in flight.
	Rate     int
	Attempts int           // attempts per delivery, retries included; 0 means 4
	Timeout  time.Duration // bound of the whole run; 0 means 2 minutes
	Seed     int64         // the mix; the same seed sends the same mix
	RunID    string        // part of the run's user ids; "" picks a fresh one
	// Naive says the target is the naive handler of the baseline, not
	// usersync: its answers are not usersync's, and its end state is
	// reported, not judged (see Report.OK).
	Naive bool
	// Endpoint registers an app's receiver, in this process on a loopback
	// port, as an outbound webhook endpoint of usersync (with AdminKey)
	// for the run, and checks that every user the run created arrives
	// there in its final state, within EndpointWait (0 means 60 s) of
	// the end-state check.
	Endpoint     bool
	AdminKey     string
	EndpointWait time.Duration
	// EndpointLatency is how long the receiver takes to answer each
	// delivery (an app at work): two deliveries of one user that usersync
	// sent at once, which it must never do, overlap for that long where
	// the receiver sees them.
	EndpointLatency time.Duration
	// HangingEndpoints, with Endpoint, registers that many endpoints
	// more (at most 8) on one loopback server of this process that reads
	// each delivery and never answers it, to measure the receiver's lag
	// while other endpoints hang; they are deleted at the end.
	HangingEndpoints int
	// Drain, with Endpoint, registers the endpoint only after the load
	// and its check, then resyncs it: every user's state is sent from a
	// backlog of as many deliveries, and the report gives the rate they
	// were received at.
	Drain bool
	// endpointSecret, if set, is the secret the receiver verifies with,
	// given the one usersync answered: tests give it another.
	endpointSecret func(string) string
}

// normalize applies defaults and refuses values outside the limits.
func (c *Config) normalize() error {
	if c.PageSize == 0 {
		c.PageSize = 50
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Attempts == 0 {
		c.Attempts = 4
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.Endpoint && c.EndpointWait == 0 {
		c.EndpointWait = time.Minute
	}
	if c.RunID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		c.RunID = hex.EncodeToString(b)
	}
	switch {
	case c.Users < 1 || c.Users > maxUsers:
		return fmt.Errorf("%w: users must be 1 to %d", errUsage, maxUsers)
	case c.Updates < 0 || c.Updates > maxUpdates:
		return fmt.Errorf("%w: updates must be 0 to %d", errUsage, maxUpdates)
	case c.Users*(1+c.Updates) > maxEvents:
		return fmt.Errorf("%w: users × (1 + updates) must be at most %d", errUsage, maxEvents)
	case c.Reads < 0 || c.Reads > maxReads:
		return fmt.Errorf("%w: reads must be 0 to %d", errUsage, maxReads)
	case !(c.Duplicates >= 0 && c.Duplicates <= 1) || !(c.Shuffled >= 0 && c.Shuffled <= 1):
		return fmt.Errorf("%w: duplicates and shuffled are fractions from 0 to 1", errUsage)
	case c.PageSize < 1 || c.PageSize > maxPageSize:
		return fmt.Errorf("%w: page size must be 1 to %d", errUsage, maxPageSize)
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return fmt.Errorf("%w: concurrency must be 1 to %d", errUsage, maxConcurrency)
	case c.Rate < 0 || c.Rate > maxRate:
		return fmt.Errorf("%w: rate must be 0 (as fast as the concurrency allows) to %d a second", errUsage, maxRate)
	case c.Attempts < 1 || c.Attempts > maxAttempts:
		return fmt.Errorf("%w: attempts must be 1 to %d", errUsage, maxAttempts)
	case c.Timeout < 0 || c.Timeout > maxTimeout:
		return fmt.Errorf("%w: timeout must be at most %s", errUsage, maxTimeout)
	case c.Secret == "":
		return fmt.Errorf("%w: no webhook secret", errUsage)
	case c.APIKey == "":
		return fmt.Errorf("%w: no API key", errUsage)
	case c.Endpoint && c.AdminKey == "":
		return fmt.Errorf("%w: %w", errUsage, errNoAdminKey)
	case c.EndpointWait < 0 || c.EndpointWait > maxTimeout:
		return fmt.Errorf("%w: endpoint wait must be at most %s", errUsage, maxTimeout)
	case c.EndpointLatency < 0 || c.EndpointLatency > maxEndpointLatency:
		return fmt.Errorf("%w: endpoint latency must be at most %s (usersync's time limit of a request is 15 s)", errUsage, maxEndpointLatency)
	case c.HangingEndpoints < 0 || c.HangingEndpoints > maxHangingEndpoints:
		return fmt.Errorf("%w: hanging endpoints must be 0 to %d", errUsage, maxHangingEndpoints)
	case c.Drain && (!c.Endpoint || c.HangingEndpoints > 0 || c.Rate > 0):
		return fmt.Errorf("%w: -drain needs -endpoint, and neither -hanging-endpoints nor -rate", errUsage)
	case c.HangingEndpoints > 0 && !c.Endpoint:
		return fmt.Errorf("%w: hanging endpoints need -endpoint, whose receiver measures the lag they may cause", errUsage)
	case !models.KindUser.IsID("user_"+c.RunID) || len(c.RunID) > 32:
		return fmt.Errorf("%w: run id %q must be a short word of letters and digits", errUsage, c.RunID)
	}
	return nil
}

// loopbackURL parses raw and refuses it unless its host is localhost or a
// loopback address (127.0.0.0/8, ::1): this tool floods what it is pointed at.
func loopbackURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: url: %v", errUsage, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%w: url %q must be http or https", errUsage, raw)
	}
	if host := u.Hostname(); !isLoopbackHost(host) {
		return nil, fmt.Errorf("%w: url host %q is not a loopback address (127.0.0.0/8, ::1 or localhost)", errUsage, host)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newClient returns a client that connects to loopback addresses only
// (whatever a name resolves to), follows no redirect and uses no proxy.
func newClient(concurrency int) *http.Client {
	dialer := &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil || !isLoopbackHost(host) {
				return fmt.Errorf("refusing to connect to %s: not a loopback address", address)
			}
			return nil
		},
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			MaxIdleConns:        2 * concurrency,
			MaxIdleConnsPerHost: 2 * concurrency,
			IdleConnTimeout:     30 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Kind is a kind of operation; the report has numbers for each.
type Kind string

// The kinds of operation, in the order the report shows them.
const (
	KindCreate    Kind = "create"    // user.created of a new user
	KindUpdate    Kind = "update"    // user.updated of an existing user, in order
	KindShuffled  Kind = "shuffled"  // user.updated sent at once with the user's others, in shuffled order
	KindDuplicate Kind = "duplicate" // an event delivered again: same svix-id, signed again
	KindGet       Kind = "get"       // GET /v1/users/{userId}
	KindList      Kind = "list"      // GET /v1/users?limit=&cursor=
)

// Kinds lists every kind of operation.
var Kinds = []Kind{KindCreate, KindUpdate, KindShuffled, KindDuplicate, KindGet, KindList}

// event is one Clerk event of the run: version 0 is the user.created of
// user n, version v > 0 its v-th user.updated.
type event struct {
	kind    Kind
	user    int
	version int
}

// job is what one worker does in order: a chain of events (and their
// duplicates), or one read.
type job func(ctx context.Context)

// runner is the state of one run.
type runner struct {
	cfg    Config
	base   string
	client *http.Client
	hook   *svix.Webhook
	env    map[string]any // the template envelope
	data   map[string]any // its data
	emails []any          // its data.email_addresses
	t0     int64          // Clerk time (Unix ms) of version 0

	stats  *recorder
	ledger *ledger
	pace   *pacer       // with Rate
	acked  *windows     // with Endpoint: the webhooks acknowledged, per window of sending
	finals []finalState // the users the check read back, as it read them

	cursorMu stdsync.Mutex
	cursor   string // where the next list read starts
}

// Run sends the load that cfg describes to the usersync at cfg.URL, then
// checks the end state through the REST API. The error is for a run that
// could not start (bad config, unusable template); a failed check is in
// the report (see Report.OK).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	base, err := loopbackURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	hook, err := svix.NewWebhook(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: webhook secret is not a whsec_ base64 secret: %v", errUsage, err)
	}
	r := &runner{
		cfg: cfg, base: base.String(), client: newClient(cfg.Concurrency), hook: hook,
		t0:     time.Now().UnixMilli(),
		stats:  newRecorder(),
		ledger: newLedger(cfg.Users, cfg.Updates),
	}
	r.ledger.naive, r.ledger.sessions = cfg.Naive, cfg.Sessions
	defer r.client.CloseIdleConnections()
	if err := r.parseTemplate(cfg.Template); err != nil {
		return nil, err
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var ep *endpoint
	if cfg.Endpoint && !cfg.Drain {
		var err error
		if ep, err = r.openEndpoint(ctx); err != nil {
			return nil, err
		}
		defer func() { _ = ep.close(parent) }() // on every return; once
	}
	var hg *hangingServer
	if cfg.HangingEndpoints > 0 {
		var err error
		if hg, err = r.openHanging(ctx, cfg.HangingEndpoints); err != nil {
			return nil, err
		}
		defer func() { _ = hg.stop(parent) }() // on every return, before ep's; once
	}
	// The last quarter of the time is the check's.
	sendCtx, cancelSend := context.WithTimeout(ctx, cfg.Timeout*3/4)
	defer cancelSend()
	p := r.plan()
	start := time.Now()
	if cfg.Rate > 0 {
		r.pace = newPacer(cfg.Rate)
	}
	var backlog chan []int64
	if ep != nil {
		r.acked = newWindows(start)
		ep.recv.window.Store(newWindows(start))
		backlog = make(chan []int64, 1)
		go func() { backlog <- r.sampleBacklog(sendCtx, ep) }()
	}
	r.runJobs(sendCtx, p.creates)
	r.runJobs(sendCtx, p.mixed)
	sentAt := time.Now()
	sent := sentAt.Sub(start)
	cancelSend()
	var stream *Steady
	if ep != nil {
		stream = steady(<-backlog, r.acked, ep.recv.window.Load(), sent)
	}

	rep := &Report{
		RunID: cfg.RunID, Seed: cfg.Seed, URL: r.base, Config: cfg, Plan: p.counts,
		Elapsed: sent, Kinds: r.stats.summaries(),
	}
	rep.Webhooks = r.ledger.snapshot()
	rep.Check = r.check(ctx)
	if cfg.Drain {
		var err error
		if ep, sentAt, err = r.resyncEndpoint(ctx); err != nil {
			return nil, err
		}
		defer func() { _ = ep.close(parent) }() // on every return; once
	}
	if ep != nil {
		// The wait has a bound of its own, after the run's.
		rep.Outbound = r.awaitOutbound(parent, ep, sentAt)
		rep.Outbound.Steady = stream
		rep.Outbound.Drain = cfg.Drain
		if hg != nil {
			_ = hg.stop(parent) // its error is in the report
			rep.Outbound.Hanging = hg.report()
		}
		if err := ep.close(parent); err != nil {
			rep.Outbound.DeleteError = err.Error()
		}
	}
	return rep, nil
}

// parseTemplate keeps the template's envelope for building events.
func (r *runner) parseTemplate(b []byte) error {
	if err := json.Unmarshal(b, &r.env); err != nil {
		return fmt.Errorf("%w: template is not a JSON object: %v", errUsage, err)
	}
	data, ok := r.env["data"].(map[string]any)
	if !ok {
		return fmt.Errorf("%w: template has no data object", errUsage)
	}
	r.data = data
	r.emails, _ = data["email_addresses"].([]any)
	if len(r.emails) == 0 {
		r.emails = []any{map[string]any{"object": "email_address"}}
	}
	for _, e := range r.emails {
		if _, ok := e.(map[string]any); !ok {
			return fmt.Errorf("%w: template's data.email_addresses must hold objects", errUsage)
		}
	}
	return nil
}

// userID is the Clerk id of user n of this run. Every id of a run starts
// with prefix(), so the check can tell the run's users from others.
func (r *runner) userID(n int) string { return fmt.Sprintf("%s%d", r.prefix(), n) }

func (r *runner) prefix() string { return "user_load" + r.cfg.RunID + "x" }

// messageID is the svix-id of an event; its duplicates share it.
func (r *runner) messageID(e event) string {
	return fmt.Sprintf("msg_load%s_%d_%d", r.cfg.RunID, e.user, e.version)
}

// Every version of a user has its own display name and email, so that a
// read tells which version is stored.
func displayName(n, v int) string { return fmt.Sprintf("Load u%d v%d", n, v) }

func (r *runner) email(n, v int) string {
	return strings.ToLower(fmt.Sprintf("%s.v%d@example.com", r.userID(n), v))
}

// body builds the Clerk event of e from the template: the same size and
// shape, another user, name, email and time. The template is only read.
func (r *runner) body(e event) ([]byte, error) {
	if r.cfg.Sessions && e.version > 0 {
		return r.sessionBody(e)
	}
	uid := r.userID(e.user)
	at := r.t0 + int64(e.version)*1000
	env := maps.Clone(r.env)
	d := maps.Clone(r.data)
	env["data"] = d
	env["type"] = "user.updated"
	if e.version == 0 {
		env["type"] = "user.created"
	}
	env["timestamp"] = at + 40
	d["id"] = uid
	d["updated_at"] = at
	d["first_name"] = "Load"
	d["last_name"] = fmt.Sprintf("u%d v%d", e.user, e.version)
	d["username"] = nil
	emails := make([]any, len(r.emails))
	for i, tmpl := range r.emails {
		m := maps.Clone(tmpl.(map[string]any))
		m["id"] = fmt.Sprintf("idn_%s_%d", uid, i)
		m["email_address"] = fmt.Sprintf("%s.alt%d@example.com", uid, i)
		if i == 0 {
			m["email_address"] = r.email(e.user, e.version)
		}
		emails[i] = m
	}
	d["email_addresses"] = emails
	d["primary_email_address_id"] = fmt.Sprintf("idn_%s_0", uid)
	return json.Marshal(env)
}

// activeAt is the Clerk time of the sign-in of e (-sessions).
func (r *runner) activeAt(e event) int64 { return r.t0 + int64(e.version)*1000 }

// sessionBody builds the session.created of e (-sessions): user n signs
// in at the update's time; the session embeds the user as created
// (version 0), so only its activity is news.
func (r *runner) sessionBody(e event) ([]byte, error) {
	created, err := r.body(event{kind: KindCreate, user: e.user})
	if err != nil {
		return nil, err
	}
	var user struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(created, &user); err != nil {
		return nil, err
	}
	user.Data["banned"], user.Data["locked"] = false, false // Clerk's user object today carries both
	at := r.activeAt(e)
	uid := r.userID(e.user)
	return json.Marshal(map[string]any{
		"object": "event", "type": "session.created", "timestamp": at + 40,
		"data": map[string]any{
			"object": "session", "id": fmt.Sprintf("sess_%s%d", strings.TrimPrefix(uid, "user_"), e.version),
			"user_id": uid, "user": user.Data, "status": "active", "client_id": "client_load",
			"last_active_at": at, "created_at": at - 500, "updated_at": at, "expire_at": at + 86_400_000,
			"latest_activity": map[string]any{"object": "session_activity", "device_type": "desktop", "browser_name": "Chrome",
				"ip_address": "192.0.2.1", "city": "Load", "country": "US"},
		},
	})
}

// PlanCounts is what a run means to send.
type PlanCounts struct {
	Events     int // distinct events (creates and updates)
	Duplicates int // second deliveries of some of them
	Shuffled   int // users whose updates go out at once, shuffled
	Reads      int
}

type plan struct {
	creates, mixed []job
	counts         PlanCounts
}

// plan builds the run's jobs from its seed: first every user's
// user.created; then, mixed, the in-order update chains, the shuffled
// bursts and the reads.
func (r *runner) plan() plan {
	cfg := r.cfg
	rng := mrand.New(mrand.NewPCG(uint64(cfg.Seed), 0x5eed))
	events := cfg.Users * (1 + cfg.Updates)
	index := func(e event) int { // of an event among all events
		if e.version == 0 {
			return e.user
		}
		return cfg.Users + e.user*cfg.Updates + e.version - 1
	}
	dup := make([]bool, events)
	nDup := ceilFrac(events, cfg.Duplicates)
	for _, i := range rng.Perm(events)[:nDup] {
		dup[i] = true
	}
	shuffled := make([]bool, cfg.Users)
	nShuffled := 0
	if cfg.Updates > 0 {
		nShuffled = ceilFrac(cfg.Users, cfg.Shuffled)
		for _, n := range rng.Perm(cfg.Users)[:nShuffled] {
			shuffled[n] = true
		}
	}
	chain := func(evs ...event) job {
		return func(ctx context.Context) {
			for _, e := range evs {
				if ctx.Err() != nil {
					r.ledger.notSent(1 + btoi(dup[index(e)]))
					continue
				}
				first := r.deliver(ctx, e, false, delivered{})
				if dup[index(e)] {
					if ctx.Err() != nil {
						r.ledger.notSent(1)
						continue
					}
					r.deliver(ctx, e, true, first)
				}
			}
		}
	}

	var p plan
	p.counts = PlanCounts{Events: events, Duplicates: nDup, Shuffled: nShuffled, Reads: cfg.Reads}
	for _, n := range rng.Perm(cfg.Users) {
		p.creates = append(p.creates, chain(event{kind: KindCreate, user: n}))
	}

	// Units keep a shuffled user's updates next to each other in the queue,
	// so that free workers take them at the same moment.
	var units [][]job
	for n := range cfg.Users {
		if cfg.Updates == 0 {
			break
		}
		if !shuffled[n] {
			evs := make([]event, cfg.Updates)
			for v := range evs {
				evs[v] = event{kind: KindUpdate, user: n, version: v + 1}
			}
			units = append(units, []job{chain(evs...)})
			continue
		}
		var burst []job
		for _, v := range rng.Perm(cfg.Updates) {
			burst = append(burst, chain(event{kind: KindShuffled, user: n, version: v + 1}))
		}
		units = append(units, burst)
	}
	for i := range cfg.Reads {
		if i%2 == 0 {
			n := rng.IntN(cfg.Users)
			units = append(units, []job{func(ctx context.Context) { r.readUser(ctx, n) }})
		} else {
			units = append(units, []job{r.readPage})
		}
	}
	rng.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
	for _, u := range units {
		p.mixed = append(p.mixed, u...)
	}
	return p
}

// ceilFrac is ⌈n·f⌉, so that any fraction above 0 yields at least one;
// the slack keeps 150 × 0.3 at 45 despite floating point.
func ceilFrac(n int, f float64) int {
	k := int(math.Ceil(float64(n)*f - 1e-9))
	return min(max(k, 0), n)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runJobs runs jobs on cfg.Concurrency workers until they are done or ctx
// ends; the jobs left then report themselves as not sent.
func (r *runner) runJobs(ctx context.Context, jobs []job) {
	queue := make(chan job)
	var wg stdsync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Go(func() {
			for j := range queue {
				j(ctx) // a job checks ctx before each request
			}
		})
	}
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	wg.Wait()
}

// answer is what the webhook says of an acknowledged delivery.
type answer struct {
	Status    string `json:"status"`
	Outcome   string `json:"outcome"`
	Duplicate bool   `json:"duplicate"`
}

// delivered is the fate of one delivery.
type delivered struct {
	acked  bool
	answer answer
}

// deliver sends e as Svix does: signed with a fresh timestamp on every
// attempt, again after a 5xx or a transport error, at most cfg.Attempts
// times. dup marks a second delivery; orig is the first one's fate.
func (r *runner) deliver(ctx context.Context, e event, dup bool, orig delivered) delivered {
	kind := e.kind
	if dup {
		kind = KindDuplicate
	}
	body, err := r.body(e)
	if err != nil {
		r.ledger.problem("build event %s: %v", r.messageID(e), err)
		return delivered{}
	}
	id := r.messageID(e)
	sent := false
	for attempt := 1; attempt <= r.cfg.Attempts; attempt++ {
		if attempt > 1 && !sleep(ctx, backoff(attempt)) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		r.ledger.attempt(e)
		sent = true
		code, resp, took, err := r.post(ctx, id, body)
		if err != nil && ctx.Err() != nil {
			break // cut by the run's own deadline: not the server's doing
		}
		r.stats.record(kind, took, err == nil && code/100 == 2, attempt > 1)
		if err != nil || code >= 500 {
			continue
		}
		if code/100 != 2 {
			r.ledger.rejected(e, id, code, resp)
			return delivered{}
		}
		var a answer
		if err := json.Unmarshal(resp, &a); err != nil {
			r.ledger.problem("event %s: answer %q is not the webhook's JSON: %v", id, clip(resp), err)
		}
		r.ledger.ack(e, dup, orig, a, id)
		r.acked.add(time.Now())
		return delivered{acked: true, answer: a}
	}
	if sent {
		r.ledger.unacked()
	} else {
		r.ledger.notSent(1)
	}
	return delivered{}
}

// backoff is the wait before an attempt: 100 ms, doubling, at most 2 s,
// with jitter.
func backoff(attempt int) time.Duration {
	d := min(100*time.Millisecond<<(attempt-2), 2*time.Second)
	return d/2 + mrand.N(d/2+1)
}

// sleep waits d or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// post sends one signed webhook request, in its slot of the steady
// stream (Rate).
func (r *runner) post(ctx context.Context, id string, body []byte) (code int, resp []byte, took time.Duration, err error) {
	if r.pace != nil && !r.pace.wait(ctx) {
		return 0, nil, 0, ctx.Err()
	}
	now := time.Now()
	sig, err := r.hook.Sign(id, now, body)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("sign %s: %w", id, err)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("svix-id", id)
	h.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("svix-signature", sig)
	return r.do(ctx, http.MethodPost, "/webhooks/clerk", h, body)
}

// get reads path with the API key.
func (r *runner) get(ctx context.Context, path string) (code int, resp []byte, took time.Duration, err error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+r.cfg.APIKey)
	return r.do(ctx, http.MethodGet, path, h, nil)
}

// do sends one request and reads the answer; took is the time from sending
// to the end of the answer.
func (r *runner) do(ctx context.Context, method, path string, h http.Header, body []byte) (code int, resp []byte, took time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header = h
	start := time.Now()
	res, err := r.client.Do(req)
	if err != nil {
		return 0, nil, time.Since(start), err // it names the method and URL
	}
	defer res.Body.Close()
	resp, err = io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	took = time.Since(start)
	if err != nil {
		return 0, nil, took, fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return res.StatusCode, resp, took, nil
}

// readUser reads user n as the app does. 404 is a fine answer: the user's
// create may not be acknowledged.
func (r *runner) readUser(ctx context.Context, n int) {
	if ctx.Err() != nil {
		return
	}
	code, _, took, err := r.get(ctx, "/v1/users/"+url.PathEscape(r.userID(n)))
	r.stats.record(KindGet, took, err == nil && (code == http.StatusOK || code == http.StatusNotFound), false)
}

// usersPage is an answer of GET /v1/users.
type usersPage struct {
	Data       []apiUser `json:"data"`
	NextCursor *string   `json:"nextCursor"`
}

// apiUser is the part of an API user the check reads.
type apiUser struct {
	UserID      string `json:"userId"`
	Email       string `json:"email"`
	DisplayName string `json:"displayName"`
	UpdatedAt   string `json:"updatedAt"`
	// LastActiveAt is the newest sign-in of -sessions.
	LastActiveAt *time.Time `json:"lastActiveAt"`
	DeletedAt    *string    `json:"deletedAt"`
}

// readPage reads the list page after the last one read, and starts again
// from the first page after the last: pages go on being read while users
// are written.
func (r *runner) readPage(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	r.cursorMu.Lock()
	cursor := r.cursor
	r.cursorMu.Unlock()
	code, resp, took, err := r.get(ctx, listPath(r.cfg.PageSize, cursor))
	ok := err == nil && code == http.StatusOK
	var page usersPage
	if ok {
		if jerr := json.Unmarshal(resp, &page); jerr != nil {
			ok = false
		}
	}
	r.stats.record(KindList, took, ok, false)
	if !ok {
		return
	}
	r.cursorMu.Lock()
	if r.cursor == cursor { // else a concurrent read moved on already
		r.cursor = ""
		if page.NextCursor != nil {
			r.cursor = *page.NextCursor
		}
	}
	r.cursorMu.Unlock()
}

func listPath(limit int, cursor string) string {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(limit))
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return "/v1/users?" + q.Encode()
}

// clip shortens an answer for a message.
func clip(b []byte) string {
	const n = 200
	s := string(bytes.TrimSpace(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
