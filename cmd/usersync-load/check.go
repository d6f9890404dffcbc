package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	stdsync "sync"
	"time"
)

// maxProblems is how many problems a report spells out; the rest are counted.
const maxProblems = 30

// maxCheckPages bounds the check's walk through the list of users.
const maxCheckPages = 50_000

// WebhookCounts says what became of the run's deliveries.
type WebhookCounts struct {
	Acknowledged   int // answered 2xx
	Unacknowledged int // no 2xx after every attempt (5xx or no answer)
	Rejected       int // answered 4xx: a valid signed event must never be
	NotSent        int // left unsent when the run's time ran out
}

// problems collects what is wrong, spelling out the first maxProblems.
type problems struct {
	mu   stdsync.Mutex
	list []string
	more int
}

func (p *problems) add(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
		return
	}
	p.more++
}

// ledger records, for every user of the run, which versions were sent and
// which were acknowledged, and what the answers said.
type ledger struct {
	mu        stdsync.Mutex
	attempted [][]bool      // [user][version]: a request carrying it went out
	acked     [][]bool      // [user][version]: a delivery of it was answered 2xx
	outcomes  [][]string    // [user][version]: the outcome of its first 2xx
	ackAt     [][]time.Time // [user][version]: when its first 2xx came
	counts    WebhookCounts
	problems  problems
	naive     bool // the answers are the naive handler's: not checked
	sessions  bool // the updates are sign-ins (-sessions)
}

func newLedger(users, updates int) *ledger {
	l := &ledger{attempted: make([][]bool, users), acked: make([][]bool, users), outcomes: make([][]string, users),
		ackAt: make([][]time.Time, users)}
	for n := range users {
		l.ackAt[n] = make([]time.Time, updates+1)
		l.attempted[n] = make([]bool, updates+1)
		l.acked[n] = make([]bool, updates+1)
		l.outcomes[n] = make([]string, updates+1)
	}
	return l
}

func (l *ledger) problem(format string, args ...any) { l.problems.add(format, args...) }

// attempt records that a request carrying e is about to go out: from then
// on usersync may store and apply e whatever answer comes back.
func (l *ledger) attempt(e event) {
	l.mu.Lock()
	l.attempted[e.user][e.version] = true
	l.mu.Unlock()
}

func (l *ledger) unacked() {
	l.mu.Lock()
	l.counts.Unacknowledged++
	l.mu.Unlock()
}

func (l *ledger) notSent(n int) {
	l.mu.Lock()
	l.counts.NotSent += n
	l.mu.Unlock()
}

func (l *ledger) rejected(e event, id string, code int, resp []byte) {
	l.mu.Lock()
	l.counts.Rejected++
	l.mu.Unlock()
	l.problem("event %s (%s of user %d, v%d) answered %d: %s", id, e.kind, e.user, e.version, code, clip(resp))
}

// ack records a 2xx answer a to a delivery of e and checks it: every
// event is processed; a create and an in-order update are applied; a
// shuffled update is applied or stale; a second delivery of an
// acknowledged event is a duplicate with the first one's outcome. The
// naive handler's answers say none of this and are not checked.
func (l *ledger) ack(e event, dup bool, orig delivered, a answer, id string) {
	now := time.Now()
	l.mu.Lock()
	l.counts.Acknowledged++
	l.acked[e.user][e.version] = true
	if l.ackAt[e.user][e.version].IsZero() {
		l.ackAt[e.user][e.version] = now
	}
	if l.outcomes[e.user][e.version] == "" {
		l.outcomes[e.user][e.version] = a.Outcome
	}
	l.mu.Unlock()

	if l.naive {
		return
	}
	if a.Status != "processed" {
		l.problem("event %s answered status %q, want processed", id, a.Status)
	}
	switch {
	case l.sessions && e.kind == KindUpdate:
		if a.Outcome != "activity" {
			l.problem("event %s (an in-order sign-in) answered outcome %q, want activity", id, a.Outcome)
		}
	case l.sessions && e.kind == KindShuffled:
		if a.Outcome != "activity" && a.Outcome != "stale" {
			l.problem("event %s (a shuffled sign-in) answered outcome %q, want activity or stale", id, a.Outcome)
		}
	case e.kind == KindCreate, e.kind == KindUpdate:
		if a.Outcome != "applied" {
			l.problem("event %s (%s) answered outcome %q, want applied", id, e.kind, a.Outcome)
		}
	case e.kind == KindShuffled:
		if a.Outcome != "applied" && a.Outcome != "stale" {
			l.problem("event %s (shuffled update) answered outcome %q, want applied or stale", id, a.Outcome)
		}
	}
	if dup && orig.acked {
		if !a.Duplicate {
			l.problem("second delivery of %s answered duplicate=false, after the first was acknowledged", id)
		}
		if a.Outcome != orig.answer.Outcome {
			l.problem("second delivery of %s answered outcome %q, the first %q", id, a.Outcome, orig.answer.Outcome)
		}
	}
}

// answers describes the acknowledged versions of user n and their outcomes.
func (l *ledger) answers(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for v, ok := range l.acked[n] {
		if ok {
			parts = append(parts, strings.TrimSpace(fmt.Sprintf("v%d %s", v, l.outcomes[n][v])))
		}
	}
	return strings.Join(parts, ", ")
}

// user returns what was sent and acknowledged of user n.
func (l *ledger) user(n int) (attempted, acked []bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bool(nil), l.attempted[n]...), append([]bool(nil), l.acked[n]...)
}

// ackedAt is when version v of user n was first acknowledged; zero if
// it never was.
func (l *ledger) ackedAt(n, v int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ackAt[n][v]
}

func (l *ledger) snapshot() WebhookCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts
}

// Check is the verdict on the run's end state.
type Check struct {
	Users    int      // users of the run read back with GET
	Listed   int      // users of the run found in the list of users
	Problems []string // what is wrong, the first maxProblems of it
	More     int      // problems beyond those
}

// OK reports whether the end state is right.
func (c Check) OK() bool { return len(c.Problems) == 0 && c.More == 0 }

// check reads the run's users back and compares them with the ledger:
// every user with an acknowledged event shows its newest acknowledged
// version (or a newer one whose delivery got no 2xx, since usersync may
// have stored and applied it all the same) in both its email and its
// display name; it appears once in the list of users; and no user of the
// run's prefix exists that the run never sent.
func (r *runner) check(ctx context.Context) Check {
	probs := &r.ledger.problems
	counts := r.ledger.snapshot()
	if counts.Acknowledged == 0 {
		probs.add("no event was acknowledged")
	}

	listed, err := r.listRun(ctx)
	if err != nil {
		probs.add("list users: %v", err)
		listed = nil
	}
	var users []int
	for n := range r.cfg.Users {
		if att, _ := r.ledger.user(n); anyTrue(att) {
			users = append(users, n)
		}
	}
	got := make([]getResult, len(users))
	var jobs []job
	for i, n := range users {
		jobs = append(jobs, func(ctx context.Context) { got[i] = r.readBack(ctx, n) })
	}
	r.runJobs(ctx, jobs)
	unread := 0
	for i, n := range users {
		if ctx.Err() != nil && (got[i].err == nil && got[i].code == 0 || errors.Is(got[i].err, ctx.Err())) {
			unread++
			continue
		}
		r.judge(n, got[i], listed, probs)
		if g := got[i]; g.err == nil && g.code == http.StatusOK {
			r.finals = append(r.finals, finalState{n: n, user: g.user})
		}
	}
	if unread > 0 {
		probs.add("the run's time ran out during the check, %d of %d users unread: raise -timeout", unread, len(users))
	}
	for uid := range listed {
		n, err := strconv.Atoi(strings.TrimPrefix(uid, r.prefix()))
		if err == nil && n >= 0 && n < r.cfg.Users {
			if att, _ := r.ledger.user(n); anyTrue(att) {
				continue
			}
		}
		probs.add("user %s exists, but this run never sent it", uid)
	}

	probs.mu.Lock()
	defer probs.mu.Unlock()
	return Check{Users: len(users) - unread, Listed: len(listed), Problems: probs.list, More: probs.more}
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// getResult is a user read back by the check.
type getResult struct {
	code int
	user apiUser
	err  error
}

func (r *runner) readBack(ctx context.Context, n int) getResult {
	if ctx.Err() != nil {
		return getResult{err: ctx.Err()}
	}
	code, resp, _, err := r.get(ctx, "/v1/users/"+url.PathEscape(r.userID(n)))
	if err != nil {
		return getResult{err: err}
	}
	g := getResult{code: code}
	if code == http.StatusOK {
		if err := json.Unmarshal(resp, &g.user); err != nil {
			g.err = fmt.Errorf("answer %q is not a user: %w", clip(resp), err)
		}
	} else if code != http.StatusNotFound {
		g.err = fmt.Errorf("answered %d: %s", code, clip(resp))
	}
	return g
}

// judge compares user n as read back with what the run sent and had
// acknowledged. listed is nil when the list could not be read.
func (r *runner) judge(n int, g getResult, listed map[string]int, probs *problems) {
	uid := r.userID(n)
	attempted, acked := r.ledger.user(n)
	newest := -1
	for v, ok := range acked {
		if ok {
			newest = v
		}
	}
	if g.err != nil {
		probs.add("user %s: %v", uid, g.err)
		return
	}
	if g.code == http.StatusNotFound {
		if newest >= 0 {
			probs.add("user %s: v%d was acknowledged, but GET answers 404", uid, newest)
		}
		if listed != nil && listed[uid] > 0 {
			probs.add("user %s is listed, but GET answers 404", uid)
		}
		return
	}
	if r.cfg.Sessions {
		// Sign-ins leave the user as created and move its lastActiveAt
		// to the newest of them acknowledged (or a newer one sent).
		r.judgeActivity(n, g.user, attempted, acked, probs)
		attempted, acked = attempted[:1], acked[:1]
		newest = min(newest, 0)
	}
	v, ok := r.version(n, g.user)
	switch {
	case !ok:
		probs.add("user %s shows displayName %q and email %q, not one version this run sent", uid, g.user.DisplayName, g.user.Email)
	case v == newest:
	case v > newest && attempted[v] && !acked[v]:
		// Sent, and stored, but its answer was lost or a 5xx: a later
		// retry or the recovery sweep applies it.
	case v > newest:
		probs.add("user %s shows v%d, which was never sent", uid, v)
	default:
		probs.add("user %s shows v%d, but v%d was acknowledged (answers: %s)", uid, v, newest, r.ledger.answers(n))
	}
	if listed != nil && listed[uid] != 1 {
		probs.add("user %s is active, but the list of users shows it %d times", uid, listed[uid])
	}
}

// judgeActivity checks user n's lastActiveAt after -sessions' sign-ins:
// the time of its newest acknowledged sign-in, or of a newer one sent
// whose answer was lost.
func (r *runner) judgeActivity(n int, u apiUser, attempted, acked []bool, probs *problems) {
	newest := 0
	for v := 1; v < len(acked); v++ {
		if acked[v] {
			newest = v
		}
	}
	if newest == 0 {
		return
	}
	got := -1
	if u.LastActiveAt != nil {
		got = int((u.LastActiveAt.UnixMilli() - r.t0) / 1000)
	}
	switch {
	case got == newest:
	case got > newest && got < len(attempted) && attempted[got] && !acked[got]:
	default:
		probs.add("user %s is last active at sign-in %d (%v), but sign-in %d was acknowledged", r.userID(n), got, u.LastActiveAt, newest)
	}
}

// version returns the version of user n that u shows; ok is false unless
// its display name and email are those of the same version.
func (r *runner) version(n int, u apiUser) (v int, ok bool) {
	var un int
	if _, err := fmt.Sscanf(u.DisplayName, "Load u%d v%d", &un, &v); err != nil {
		return 0, false
	}
	if un != n || v < 0 || v > r.cfg.Updates || u.DisplayName != displayName(n, v) || u.Email != r.email(n, v) {
		return 0, false
	}
	return v, true
}

// listRun walks every page of the list of users, counting how many times
// each user of the run appears.
func (r *runner) listRun(ctx context.Context) (map[string]int, error) {
	seen := map[string]int{}
	cursor := ""
	for range maxCheckPages {
		code, resp, _, err := r.get(ctx, listPath(maxPageSize, cursor))
		if err != nil {
			return seen, err
		}
		if code != http.StatusOK {
			return seen, fmt.Errorf("page after %q answered %d: %s", cursor, code, clip(resp))
		}
		var p usersPage
		if err := json.Unmarshal(resp, &p); err != nil {
			return seen, fmt.Errorf("page after %q: %w", cursor, err)
		}
		for _, u := range p.Data {
			if strings.HasPrefix(u.UserID, r.prefix()) {
				seen[u.UserID]++
			}
		}
		if p.NextCursor == nil || *p.NextCursor == "" {
			return seen, nil
		}
		if *p.NextCursor == cursor {
			return seen, fmt.Errorf("the cursor after %q does not move on", cursor)
		}
		cursor = *p.NextCursor
	}
	return seen, fmt.Errorf("more than %d pages", maxCheckPages)
}
