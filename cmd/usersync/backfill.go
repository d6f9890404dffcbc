package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// maxBackfillLimit is the largest page Clerk's GET /users serves.
const maxBackfillLimit = 500

// backfillOptions are the flags of usersync backfill.
type backfillOptions struct {
	limit  int // users per page, 1 to maxBackfillLimit
	offset int // where to start (or resume) in Clerk's list
}

// backfillCommand is `usersync backfill`.
func backfillCommand(fs *flag.FlagSet) func(context.Context, config, io.Writer) error {
	var opts backfillOptions
	fs.IntVar(&opts.limit, "limit", maxBackfillLimit, "users per page read from Clerk, 1 to 500")
	fs.IntVar(&opts.offset, "offset", 0, "start at this offset in Clerk's user list (to resume a run that stopped)")
	return func(ctx context.Context, cfg config, out io.Writer) error { return runBackfill(ctx, cfg, opts, out) }
}

// retryPolicy says how a page read from Clerk is tried again.
type retryPolicy struct {
	tries      int           // tries per page on server and network errors
	backoff    time.Duration // wait before the second try; doubles after each
	throttled  int           // 429 answers in a row for one page before giving up
	retryAfter time.Duration // wait after a 429 without a usable Retry-After
}

// backfillRetry is the policy of every backfill; tests shorten it.
var backfillRetry = retryPolicy{tries: 4, backoff: 500 * time.Millisecond, throttled: 30, retryAfter: 2 * time.Second}

// Limits of one read from Clerk.
const (
	clerkRequestTimeout = time.Minute
	maxPageBytes        = 128 << 20 // 500 users with large metadata stay well under
	maxSnippet          = 200       // bytes of an error body shown to the operator
)

// runBackfill reads every user from Clerk's Backend API, page by page in
// creation order, and applies each one as a user.updated webhook carrying
// that state would be: through the sync service, so that the ordering rules
// hold (a backfilled state never overwrites a newer one and never revives a
// deleted user) and a rerun recognises the users it has already applied.
//
// A user that can never be applied is counted as failed and the run goes
// on. Any other failure stops the run with an error that says where it
// stopped; every user before that point is applied, so a rerun, from the
// start or with -offset, completes the job.
func runBackfill(ctx context.Context, cfg config, opts backfillOptions, out io.Writer) error {
	if cfg.ClerkSecretKey == "" {
		return errors.New("CLERK_SECRET_KEY is not set: set it to the instance's secret key (sk_live_... or sk_test_...) from the Clerk dashboard")
	}
	if opts.limit < 1 || opts.limit > maxBackfillLimit {
		return fmt.Errorf("-limit: %d is not between 1 and %d", opts.limit, maxBackfillLimit)
	}
	if opts.offset < 0 {
		return fmt.Errorf("-offset: %d is negative", opts.offset)
	}
	clerk, err := newClerkUsers(cfg, out)
	if err != nil {
		return err
	}

	log := newLogger(cfg)
	store, closeStore, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()
	svc := newService(cfg, store)

	var total backfillTally
	stopped := func(offset int, err error) error {
		fmt.Fprintf(out, "backfill: stopped at offset %d after %s\n", offset, total)
		if offset == 0 {
			return fmt.Errorf("backfill stopped at offset 0: %w; rerun to complete the job", err)
		}
		return fmt.Errorf("backfill stopped at offset %d: %w; the users before it are applied: rerun, with -offset %d to go on from there, to complete the job", offset, err, offset)
	}
	offset := opts.offset
	for {
		users, err := clerk.page(ctx, offset, opts.limit)
		if err != nil {
			return stopped(offset, err)
		}
		var page backfillTally
		for i, raw := range users {
			res, userID, err := applyClerkUser(ctx, svc, raw)
			switch {
			case err == nil:
				page.count(res)
			case errors.Is(err, models.ErrInvalid) || errors.Is(err, models.ErrRetryLater):
				// Stored as failed: invalid ones wait for an operator, the
				// others for the recovery sweep.
				page.users++
				page.failed++
				fmt.Fprintf(out, "backfill: offset %d: user %s not applied: %v\n", offset+i, orNoID(userID), err)
			default:
				total.add(page)
				return stopped(offset, fmt.Errorf("apply user %s: %w", orNoID(userID), err))
			}
		}
		total.add(page)
		if len(users) > 0 {
			fmt.Fprintf(out, "backfill: offset %d: %s\n", offset, page)
		}
		offset += len(users)
		if len(users) < opts.limit {
			break
		}
	}
	fmt.Fprintf(out, "backfill: done, offsets %d to %d: %s\n", opts.offset, offset, total)
	return nil
}

// applyClerkUser ingests one user object of Clerk's API as the webhook
// delivery of a user.updated event carrying it. Its error wraps
// models.ErrInvalid when the user can never be applied.
func applyClerkUser(ctx context.Context, svc *sync.Service, raw json.RawMessage) (res sync.Result, userID string, err error) {
	eventID, timestamp := backfillEventID(raw)
	body := make([]byte, 0, len(raw)+96)
	body = append(body, `{"object":"event","type":"user.updated","timestamp":`...)
	body = append(body, timestamp...)
	body = append(body, `,"data":`...)
	body = append(body, raw...)
	body = append(body, '}')
	ev, err := models.DecodeEvent(body)
	if err != nil {
		return sync.Result{}, "", err
	}
	userID = ev.UserID()
	res, err = svc.Ingest(ctx, sync.Delivery{EventID: eventID, Signature: "", Body: body, Event: ev})
	return res, userID, err
}

// backfillEventID returns the event id of a backfilled user state,
// backfill_<user id>_<updated_at>, so that a rerun finds the states it has
// applied already, and the user's updated_at as the envelope's timestamp.
// A user without a usable id or updated_at (it will fail validation) gets
// an id from a hash of its bytes, so that it is still recorded once.
func backfillEventID(raw json.RawMessage) (eventID string, timestamp []byte) {
	var u struct {
		ID        json.RawMessage `json:"id"`
		UpdatedAt json.RawMessage `json:"updated_at"`
	}
	_ = json.Unmarshal(raw, &u) // anything unusable is left empty
	var id string
	var at int64
	idOK := json.Unmarshal(u.ID, &id) == nil && id != "" && len(id) <= 128
	atOK := json.Unmarshal(u.UpdatedAt, &at) == nil && at > 0
	timestamp = []byte("null")
	if atOK {
		timestamp = strconv.AppendInt(nil, at, 10)
	}
	if idOK && atOK {
		return "backfill_" + id + "_" + string(timestamp), timestamp
	}
	sum := sha256.Sum256(raw)
	return "backfill_" + hex.EncodeToString(sum[:12]), timestamp
}

func orNoID(userID string) string {
	if userID == "" {
		return "(no id)"
	}
	return userID
}

// backfillTally counts what became of the users of a page or a run.
type backfillTally struct {
	users, applied, stale, deletedUser, duplicate, failed int
}

// count counts one user that the sync service processed.
func (t *backfillTally) count(res sync.Result) {
	t.users++
	switch {
	case res.Duplicate:
		t.duplicate++
	case res.Outcome == models.OutcomeApplied:
		t.applied++
	case res.Outcome == models.OutcomeStale:
		t.stale++
	case res.Outcome == models.OutcomeDeletedUser:
		t.deletedUser++
	default:
		t.failed++
	}
}

func (t *backfillTally) add(p backfillTally) {
	t.users += p.users
	t.applied += p.applied
	t.stale += p.stale
	t.deletedUser += p.deletedUser
	t.duplicate += p.duplicate
	t.failed += p.failed
}

func (t backfillTally) String() string {
	noun := "users"
	if t.users == 1 {
		noun = "user"
	}
	return fmt.Sprintf("%d %s (applied %d, stale %d, deleted_user %d, duplicate %d, failed %d)",
		t.users, noun, t.applied, t.stale, t.deletedUser, t.duplicate, t.failed)
}

// clerkUsers reads Clerk's user list, GET {CLERK_API_URL}/users, a page at
// a time.
type clerkUsers struct {
	client *http.Client
	url    *url.URL // the /users endpoint
	key    string
	out    io.Writer // where waits and retries are reported
	retry  retryPolicy
}

// newClerkUsers checks CLERK_API_URL and returns a reader of its users.
// The secret key travels only over HTTPS, or plain HTTP to this machine.
func newClerkUsers(cfg config, out io.Writer) (*clerkUsers, error) {
	u, err := url.Parse(strings.TrimRight(cfg.ClerkAPIURL, "/") + "/users")
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("CLERK_API_URL: %q is not an http(s) URL such as https://api.clerk.com/v1", cfg.ClerkAPIURL)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("CLERK_API_URL: %q would send CLERK_SECRET_KEY unencrypted: use https", cfg.ClerkAPIURL)
	}
	return &clerkUsers{
		client: &http.Client{Timeout: clerkRequestTimeout},
		url:    u,
		key:    string(cfg.ClerkSecretKey),
		out:    out,
		retry:  backfillRetry,
	}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tryError is a failed read of a page that a later try may get right.
type tryError struct {
	err       error
	throttled bool          // a 429
	wait      time.Duration // for a 429: how long Clerk asked to wait
}

func (e *tryError) Error() string { return e.err.Error() }
func (e *tryError) Unwrap() error { return e.err }

// page returns the users at offset, at most limit of them, each as the
// exact bytes Clerk sent. It waits out 429s as Clerk asks and tries server
// and network errors again a few times, with backoff.
func (c *clerkUsers) page(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	failures, throttles := 0, 0
	backoff := c.retry.backoff
	for {
		users, err := c.get(ctx, offset, limit)
		var te *tryError
		if err == nil || !errors.As(err, &te) || ctx.Err() != nil {
			return users, err
		}
		var wait time.Duration
		if te.throttled {
			throttles++
			if throttles > c.retry.throttled {
				return nil, fmt.Errorf("%w, %d times in a row", err, throttles)
			}
			wait = te.wait
			fmt.Fprintf(c.out, "backfill: offset %d: rate limited by Clerk, waiting %s\n", offset, wait)
		} else {
			failures++
			if failures >= c.retry.tries {
				return nil, fmt.Errorf("%w (tried %d times)", err, failures)
			}
			wait = backoff
			backoff *= 2
			fmt.Fprintf(c.out, "backfill: offset %d: %v; trying again in %s\n", offset, err, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// get reads one page once. Its error is a *tryError when another try may
// succeed.
func (c *clerkUsers) get(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	u := *c.url
	u.RawQuery = url.Values{
		"limit":    {strconv.Itoa(limit)},
		"offset":   {strconv.Itoa(offset)},
		"order_by": {"+created_at"},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "usersync-backfill")
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &tryError{err: fmt.Errorf("read users: %w", err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &tryError{err: fmt.Errorf("read users: %w", err)}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, &tryError{
			err:       fmt.Errorf("read users: Clerk answered %s", resp.Status),
			throttled: true,
			wait:      retryAfter(resp.Header.Get("Retry-After"), c.retry.retryAfter),
		}
	case resp.StatusCode >= 500:
		return nil, &tryError{err: fmt.Errorf("read users: Clerk answered %s", resp.Status)}
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("read users: Clerk answered %s: %s (check CLERK_SECRET_KEY)", resp.Status, c.snippet(body))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("read users: Clerk answered %s: %s", resp.Status, c.snippet(body))
	case len(body) > maxPageBytes:
		return nil, fmt.Errorf("read users: the page is larger than %d MiB: use a smaller -limit", maxPageBytes>>20)
	}
	users, ok := decodeUsers(body)
	if !ok {
		// The body may hold users' data: it is not shown.
		return nil, fmt.Errorf("read users: the answer (%s, %d bytes) is not a JSON array of users (check CLERK_API_URL)",
			orNone(resp.Header.Get("Content-Type")), len(body))
	}
	return users, nil
}

// decodeUsers reads a page: a JSON array of users, or, as newer API
// versions answer, an object with the array in "data".
func decodeUsers(body []byte) ([]json.RawMessage, bool) {
	body = bytes.TrimSpace(body)
	var users []json.RawMessage
	if len(body) > 0 && body[0] == '{' {
		var page struct {
			Data *[]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Data == nil {
			return nil, false
		}
		return *page.Data, true
	}
	if len(body) == 0 || body[0] != '[' || json.Unmarshal(body, &users) != nil {
		return nil, false
	}
	return users, true
}

// snippet is the start of an error body, on one line, without the key.
func (c *clerkUsers) snippet(body []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "?")), " ")
	if c.key != "" {
		s = strings.ReplaceAll(s, c.key, "REDACTED")
	}
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return orNone(s)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date. def is
// used when it is missing or unusable.
func retryAfter(h string, def time.Duration) time.Duration {
	h = strings.TrimSpace(h)
	if secs, err := strconv.Atoi(h); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(h); err == nil {
		return max(time.Until(at), 0)
	}
	return def
}
