package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// With -endpoint, the run is also an app that receives usersync's
// outbound webhooks: a receiver on a loopback port of this process,
// registered as an endpoint through the admin API before the load and
// deleted after it, verifies every delivery with svix and records what it
// got; after the end-state check the run waits (Config.EndpointWait) until
// every user it created has arrived in the state the check read back.

const (
	// maxDelivery bounds a delivery's body that the receiver reads.
	maxDelivery = 1 << 20
	// deleteTimeout bounds the endpoint's deletion at the end, interrupted
	// or not.
	deleteTimeout = 10 * time.Second
	// endpointPath is the receiver's path.
	endpointPath = "/hooks/usersync-load"
	// maxEndpointLatency bounds Config.EndpointLatency: well within
	// usersync's time limit of a request.
	maxEndpointLatency = 5 * time.Second
)

// userState is a user's state as a delivery (or a read) shows it: enough
// to tell the version of the run and the write that made it.
type userState struct {
	Email, DisplayName, UpdatedAt string
}

func stateOf(u apiUser) userState {
	return userState{Email: u.Email, DisplayName: u.DisplayName, UpdatedAt: u.UpdatedAt}
}

// received is what the receiver got of one user.
type received struct {
	ids      map[string]struct{}     // webhook-ids
	newest   time.Time               // the newest data.updatedAt
	arrivals map[userState]time.Time // the first arrival of each state
}

// receiver is the app's endpoint: it verifies each delivery's signature
// with the secret usersync gave at registration and records, per user of
// the run, the webhook-ids, the states and when each first arrived.
type receiver struct {
	srv     *http.Server
	url     string
	prefix  string        // of the run's user ids
	states  int           // distinct states kept per user, at most
	latency time.Duration // taken to answer each delivery (Config.EndpointLatency)
	// changed is signalled after each recorded delivery.
	changed chan struct{}
	// window, once sending starts, counts the run's deliveries per window
	// of sending.
	window atomic.Pointer[windows]

	mu         stdsync.Mutex
	hook       *svix.Webhook // nil until the endpoint is registered
	deliveries int           // requests that carried a delivery
	invalid    int           // of them, signatures that did not verify
	foreign    int           // valid deliveries of users not of this run
	ids        map[string]struct{}
	older      int // deliveries of a state older than one received before
	// receiving counts, per user, the deliveries being received; overlaps
	// counts deliveries that came while another of the user was.
	receiving map[string]int
	overlaps  int
	users     map[string]*received
	problems  problems
}

// startReceiver listens on a loopback port and serves the receiver.
func startReceiver(prefix string, states int, latency time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("endpoint: listen on loopback: %w", err)
	}
	rc := &receiver{prefix: prefix, states: states, latency: latency, changed: make(chan struct{}, 1),
		ids: map[string]struct{}{}, users: map[string]*received{}, receiving: map[string]int{}}
	rc.url = "http://" + ln.Addr().String() + endpointPath
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 20 * time.Second}
	go func() { _ = rc.srv.Serve(ln) }() // ends with Close
	return rc, nil
}

func (rc *receiver) close() { _ = rc.srv.Close() }

func (rc *receiver) setSecret(secret string) error {
	h, err := svix.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("endpoint: usersync answered a secret that is not a whsec_ secret: %w", err)
	}
	rc.mu.Lock()
	rc.hook = h
	rc.mu.Unlock()
	return nil
}

// delivery is the part of an outbound webhook's body the receiver reads.
type delivery struct {
	Type string  `json:"type"`
	Data apiUser `json:"data"`
}

// ServeHTTP receives one delivery: 204 once verified and recorded (after
// the receiver's latency), 401 when its signature does not verify.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	if req.Method != http.MethodPost || req.URL.Path != endpointPath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxDelivery))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.hook == nil {
		// Before the registration's answer: usersync retries later.
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	rc.deliveries++
	if err := rc.hook.Verify(body, req.Header); err != nil {
		rc.invalid++
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil || d.Data.UserID == "" {
		rc.problems.add("delivery %s is not a user's webhook: %s", clip([]byte(req.Header.Get("webhook-id"))), clip(body))
		w.WriteHeader(http.StatusNoContent)
		return
	}
	id := req.Header.Get("webhook-id")
	if rc.receiving[d.Data.UserID] > 0 {
		rc.overlaps++
		rc.problems.add("delivery %s of user %s came while another of that user was being received", clip([]byte(id)), d.Data.UserID)
	}
	rc.receiving[d.Data.UserID]++
	defer func() { rc.receiving[d.Data.UserID]-- }() // before the lock's release: defers run last in, first out
	if !strings.HasPrefix(d.Data.UserID, rc.prefix) {
		rc.foreign++
		rc.wait()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rc.ids[id] = struct{}{}
	rc.window.Load().add(at)
	u := rc.users[d.Data.UserID]
	if u == nil {
		u = &received{ids: map[string]struct{}{}, arrivals: map[userState]time.Time{}}
		rc.users[d.Data.UserID] = u
	}
	u.ids[id] = struct{}{}
	if t, err := time.Parse(time.RFC3339Nano, d.Data.UpdatedAt); err != nil {
		rc.problems.add("delivery %s of user %s: updatedAt %q is not a time", clip([]byte(id)), d.Data.UserID, d.Data.UpdatedAt)
	} else if t.Before(u.newest) {
		rc.older++
		rc.problems.add("delivery %s of user %s shows updatedAt %s after %s was received", clip([]byte(id)), d.Data.UserID,
			d.Data.UpdatedAt, u.newest.Format(time.RFC3339Nano))
	} else {
		u.newest = t
	}
	s := stateOf(d.Data)
	if _, seen := u.arrivals[s]; !seen && len(u.arrivals) < rc.states {
		u.arrivals[s] = at
	}
	rc.wait()
	select {
	case rc.changed <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// wait takes the receiver's latency, its lock released (it holds it
// before and after).
func (rc *receiver) wait() {
	if rc.latency > 0 {
		rc.mu.Unlock()
		time.Sleep(rc.latency)
		rc.mu.Lock()
	}
}

// arrival returns when state s of user uid first arrived.
func (rc *receiver) arrival(uid string, s userState) (time.Time, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	u := rc.users[uid]
	if u == nil {
		return time.Time{}, false
	}
	at, ok := u.arrivals[s]
	return at, ok
}

// newestOf describes the newest state received of user uid.
func (rc *receiver) newestOf(uid string) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	u := rc.users[uid]
	if u == nil {
		return "nothing received that verifies"
	}
	var newest userState
	for s := range u.arrivals {
		if s.UpdatedAt > newest.UpdatedAt || newest.UpdatedAt == "" {
			newest = s
		}
	}
	return fmt.Sprintf("%d webhook-ids received, the newest showing %q, updatedAt %s", len(u.ids), newest.DisplayName, newest.UpdatedAt)
}

// endpoint is the receiver registered with usersync.
type endpoint struct {
	r      *runner
	recv   *receiver
	id     string
	delete stdsync.Once
	delErr error
}

// openEndpoint starts the receiver and registers it with usersync for
// every user event.
func (r *runner) openEndpoint(ctx context.Context) (*endpoint, error) {
	recv, err := startReceiver(r.prefix(), r.cfg.Updates+2, r.cfg.EndpointLatency)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(map[string]any{"url": recv.url, "eventTypes": []string{"user.*"}, "description": "usersync-load"})
	code, resp, _, err := r.admin(ctx, http.MethodPost, "/v1/endpoints", body)
	if err == nil && code != http.StatusCreated {
		err = fmt.Errorf("POST /v1/endpoints answered %d: %s", code, clip(resp))
		if code/100 == 4 && code != http.StatusUnauthorized && code != http.StatusForbidden {
			err = fmt.Errorf("%w (usersync must run with USERSYNC_ENDPOINTS_ALLOW_PRIVATE=true to deliver to a loopback endpoint)", err)
		}
	}
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err == nil {
		if err = json.Unmarshal(resp, &created); err == nil && (created.ID == "" || created.Secret == "") {
			err = fmt.Errorf("POST /v1/endpoints answered no id or secret: %s", clip(resp))
		}
	}
	if err != nil {
		recv.close()
		return nil, fmt.Errorf("register the endpoint: %w", err)
	}
	ep := &endpoint{r: r, recv: recv, id: created.ID}
	secret := created.Secret
	if r.cfg.endpointSecret != nil {
		secret = r.cfg.endpointSecret(secret)
	}
	if err := recv.setSecret(secret); err != nil {
		_ = ep.close(ctx)
		return nil, err
	}
	return ep, nil
}

// resyncEndpoint registers the endpoint (-drain) and starts its resync:
// usersync queues every user for it. It returns when the resync started.
func (r *runner) resyncEndpoint(ctx context.Context) (*endpoint, time.Time, error) {
	ep, err := r.openEndpoint(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	start := time.Now()
	code, resp, _, err := r.admin(ctx, http.MethodPost, "/v1/endpoints/"+url.PathEscape(ep.id)+"/resync", []byte(`{}`))
	if err == nil && code/100 != 2 {
		err = fmt.Errorf("answered %d: %s", code, clip(resp))
	}
	if err != nil {
		_ = ep.close(ctx)
		return nil, time.Time{}, fmt.Errorf("resync the endpoint: %w", err)
	}
	return ep, start, nil
}

// close deletes the endpoint, with a short time of its own even when ctx
// has ended, and stops the receiver; it does so once.
func (ep *endpoint) close(ctx context.Context) error {
	ep.delete.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		code, resp, _, err := ep.r.admin(ctx, http.MethodDelete, "/v1/endpoints/"+url.PathEscape(ep.id), nil)
		if err == nil && code != http.StatusNoContent && code != http.StatusNotFound {
			err = fmt.Errorf("answered %d: %s", code, clip(resp))
		}
		if err != nil {
			ep.delErr = fmt.Errorf("delete endpoint %s: %w", ep.id, err)
		}
		ep.recv.close()
	})
	return ep.delErr
}

// admin sends a request to the admin API with the admin key.
func (r *runner) admin(ctx context.Context, method, path string, body []byte) (code int, resp []byte, took time.Duration, err error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+r.cfg.AdminKey)
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	return r.do(ctx, method, path, h, body)
}

// backlog describes the endpoint's backlog as usersync shows it.
func (ep *endpoint) backlog(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	code, resp, _, err := ep.r.admin(ctx, http.MethodGet, "/v1/endpoints/"+url.PathEscape(ep.id), nil)
	if err != nil {
		return err.Error()
	}
	var j struct {
		Backlog         *int64  `json:"backlog"`
		OldestPendingAt *string `json:"oldestPendingAt"`
		Enabled         bool    `json:"enabled"`
		DisabledReason  string  `json:"disabledReason"`
	}
	if code != http.StatusOK || json.Unmarshal(resp, &j) != nil || j.Backlog == nil {
		return fmt.Sprintf("GET /v1/endpoints/%s answered %d: %s", ep.id, code, clip(resp))
	}
	s := fmt.Sprintf("backlog %d", *j.Backlog)
	if j.OldestPendingAt != nil {
		s += ", oldest pending since " + *j.OldestPendingAt
	}
	if !j.Enabled {
		s += ", disabled: " + j.DisabledReason
	}
	return s
}

// Outbound is what the app's endpoint received (-endpoint).
type Outbound struct {
	Endpoint   string        // its id
	URL        string        // the receiver's
	Deliveries int           // requests that carried a delivery
	Invalid    int           // of them, signatures that did not verify
	WebhookIDs int           // distinct webhook-ids of the run's users
	Foreign    int           // valid deliveries of users not of this run
	Users      int           // users the load created, read back by the check
	Received   int           // of them, received in the state the check read back
	Lag        time.Duration // from the end of sending to the last final state received; 0 if all were in before
	// AfterAck is, per user received in its final state, from the
	// acknowledgment of the event that made that state to the state's
	// arrival (0 when it arrived first); users whose final event got no
	// acknowledgment are left out.
	AfterAck    []time.Duration
	Waited      time.Duration // how long the run waited after the check
	DeleteError string        // the endpoint could not be deleted
	Hanging     *Hanging      // the endpoints that never answer (-hanging-endpoints); nil without
	Steady      *Steady       // the backlog and what went out while sending
	// Drain: the endpoint was registered after the load and resynced
	// (-drain); Lag is then from the resync's start to the last state
	// received.
	Drain    bool
	Problems []string
	More     int
}

// OK reports whether every user the load created was received in its
// final state and every delivery verified.
func (o *Outbound) OK() bool { return o == nil || len(o.Problems) == 0 && o.More == 0 }

// finalState is a user of the run as the check read it back.
type finalState struct {
	n    int
	user apiUser
}

// awaitOutbound waits, at most cfg.EndpointWait, until every user the
// check read back has been received in that state, and says what the
// receiver got. sent is when sending ended.
func (r *runner) awaitOutbound(ctx context.Context, ep *endpoint, sent time.Time) *Outbound {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.EndpointWait)
	defer cancel()
	missing := func() int {
		m := 0
		for _, f := range r.finals {
			if _, ok := ep.recv.arrival(f.user.UserID, stateOf(f.user)); !ok {
				m++
			}
		}
		return m
	}
	// Checked at most every 50 ms, not at each arrival: each check reads
	// every user, and arrivals come by the thousand.
	for missing() > 0 && ctx.Err() == nil {
		select {
		case <-ep.recv.changed:
		case <-ctx.Done():
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	o := &Outbound{Endpoint: ep.id, URL: ep.recv.url, Users: len(r.finals), Waited: time.Since(start)}
	probs := &problems{}
	rc := ep.recv
	rc.mu.Lock()
	o.Deliveries, o.Invalid, o.WebhookIDs, o.Foreign = rc.deliveries, rc.invalid, len(rc.ids), rc.foreign
	older, overlaps := rc.older, rc.overlaps
	rc.problems.mu.Lock()
	recvProblems, recvMore := slices.Clone(rc.problems.list), rc.problems.more
	rc.problems.mu.Unlock()
	rc.mu.Unlock()
	if o.Invalid > 0 {
		probs.add("%d of %d deliveries have a signature that does not verify with the endpoint's secret", o.Invalid, o.Deliveries)
	}
	if older > 0 {
		probs.add("%d deliveries showed a user older than one received before", older)
	}
	if overlaps > 0 {
		probs.add("%d deliveries of a user came while another of that user was being received: usersync sent one object twice at once", overlaps)
	}
	if m := missing(); m > 0 {
		probs.add("%d of %d users not received in their final state within %s; the endpoint shows %s", m, o.Users, r.cfg.EndpointWait, ep.backlog(ctx))
	}
	var last time.Time
	for _, f := range r.finals {
		at, ok := ep.recv.arrival(f.user.UserID, stateOf(f.user))
		if !ok {
			probs.add("user %s: its final state (%q, updatedAt %s) was not received: %s", f.user.UserID,
				f.user.DisplayName, f.user.UpdatedAt, ep.recv.newestOf(f.user.UserID))
			continue
		}
		o.Received++
		if at.After(last) {
			last = at
		}
		if v, ok := r.version(f.n, f.user); ok && !r.cfg.Drain {
			if acked := r.ledger.ackedAt(f.n, v); !acked.IsZero() {
				o.AfterAck = append(o.AfterAck, max(at.Sub(acked), 0))
			}
		}
	}
	if !last.IsZero() {
		o.Lag = max(last.Sub(sent), 0)
	}
	for _, p := range recvProblems {
		probs.add("%s", p)
	}
	probs.more += recvMore
	o.Problems, o.More = probs.list, probs.more
	return o
}

// errNoAdminKey says where the admin key of -endpoint comes from.
var errNoAdminKey = errors.New("-endpoint registers an endpoint through the admin API and needs an admin key: pass -admin-key, set USERSYNC_ADMIN_KEYS, or keep adminKey in DATA_DIR/secrets.json")
