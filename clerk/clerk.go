// Package clerk is a client of Clerk's Backend API, for what usersync reads
// from it: the lists of users, organizations, memberships and Clerk
// Billing's subscription items, page by page, and single users and
// organizations. It waits out
// 429s as Clerk asks, tries server and network errors again with backoff,
// and keeps a process's requests under a rate limit.
package clerk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/usersync/usersync/models"
)

// MaxPageLimit is the largest page Clerk's lists serve.
const MaxPageLimit = 500

// Limits of one read from Clerk.
const (
	requestTimeout = time.Minute
	maxPageBytes   = 128 << 20 // 500 users with large metadata stay well under
	maxUserBytes   = 4 << 20   // one user or organization object
	maxSnippet     = 200       // bytes of an error body shown to the operator
	// getUserTimeout bounds a read of one user or organization, retries
	// and the wait for the rate limit included; the read is shared by
	// every caller asking for the object meanwhile, so it does not end with
	// the first one's (it ends when the last one leaves).
	getUserTimeout = 30 * time.Second
)

// RetryPolicy says how a read from Clerk is tried again.
type RetryPolicy struct {
	Tries      int           // tries per read on server and network errors
	Backoff    time.Duration // wait before the second try; doubles after each
	Throttled  int           // 429 answers in a row for one read before giving up
	RetryAfter time.Duration // wait after a 429 without a usable Retry-After
}

// DefaultRetry is the policy of New.
var DefaultRetry = RetryPolicy{Tries: 4, Backoff: 500 * time.Millisecond, Throttled: 30, RetryAfter: 2 * time.Second}

// Retry describes a wait before a read is tried again, for Client.OnRetry.
type Retry struct {
	What      string        // "offset 500" (users), "organizations offset 500", "user user_123", "organization org_123"
	Throttled bool          // Clerk answered 429
	Wait      time.Duration // how long the client waits
	Err       error         // what went wrong
}

// Client reads from Clerk's Backend API. Its fields may be changed
// before first use.
type Client struct {
	HTTP  *http.Client
	Retry RetryPolicy
	// Limiter, if set, is waited on before every request: Clerk allows
	// 100 requests per 10 s on development instances and 1,000 on
	// production ones, for all clients of an instance together. A wait
	// that would pass the caller's deadline fails at once.
	Limiter *rate.Limiter
	// OnRetry, if set, is told of every wait before a retry.
	OnRetry func(Retry)

	base   *url.URL // CLERK_API_URL
	key    string
	flight Flight // concurrent reads of one object share one request
}

// New returns a client of the API at apiURL (such as
// https://api.clerk.com/v1) with the instance's secret key. The key
// travels only over HTTPS, or plain HTTP to this machine; errors name
// CLERK_SECRET_KEY or CLERK_API_URL.
func New(apiURL, secretKey string) (*Client, error) {
	if secretKey == "" {
		return nil, errors.New("CLERK_SECRET_KEY is not set: set it to the instance's secret key (sk_live_... or sk_test_...) from the Clerk dashboard")
	}
	u, err := url.Parse(strings.TrimRight(apiURL, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("CLERK_API_URL: %q is not an http(s) URL such as https://api.clerk.com/v1", apiURL)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("CLERK_API_URL: %q would send CLERK_SECRET_KEY unencrypted: use https", apiURL)
	}
	return &Client{
		HTTP:    &http.Client{Timeout: requestTimeout},
		Retry:   DefaultRetry,
		Limiter: NewLimiter(DefaultRate, DefaultPer),
		base:    u,
		key:     secretKey,
	}, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ListUsers returns the users at offset in Clerk's list in creation order,
// at most limit (1 to MaxPageLimit) of them, each as the exact bytes Clerk
// sent. It waits out 429s and tries server and network errors again a few
// times; the error of a read that still fails says why.
func (c *Client) ListUsers(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	return c.list(ctx, "/users", "users", "offset "+strconv.Itoa(offset), offset, limit, byCreation)
}

// byCreation is the order of the lists of users, organizations and
// memberships: oldest first.
var byCreation = url.Values{"order_by": {"+created_at"}}

// ListSubscriptionItems returns the Clerk Billing subscription items of
// the whole instance at offset in Clerk's list (GET
// /billing/subscription_items), the newest first (Clerk's only order), at
// most limit (1 to MaxPageLimit) of them, as ListUsers does users. It
// asks for the free plans' items too (include_free=true): without it
// Clerk leaves them out, and a payer on a free plan would look
// unsubscribed. An instance without Billing enabled answers an error
// wrapping models.ErrFeatureOff (see get).
func (c *Client) ListSubscriptionItems(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	return c.list(ctx, billingItemsPath, "subscription items", "subscription_items offset "+strconv.Itoa(offset), offset, limit,
		url.Values{"include_free": {"true"}})
}

// billingItemsPath is Clerk's list of subscription items.
const billingItemsPath = "/billing/subscription_items"

// ListOrganizations returns the organizations at offset in Clerk's list
// (GET /organizations) in creation order, with their members_count, at
// most limit (1 to MaxPageLimit) of them, as ListUsers does users.
func (c *Client) ListOrganizations(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	return c.list(ctx, "/organizations", "organizations", "organizations offset "+strconv.Itoa(offset), offset, limit,
		url.Values{"include_members_count": {"true"}, "order_by": {"+created_at"}})
}

// ListMemberships returns the organization memberships of the whole
// instance at offset in Clerk's list (GET /organization_memberships) in
// creation order, at most limit (1 to MaxPageLimit) of them, as ListUsers
// does users.
func (c *Client) ListMemberships(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	return c.list(ctx, "/organization_memberships", "memberships", "memberships offset "+strconv.Itoa(offset), offset, limit, byCreation)
}

// ListInvitations returns the organization invitations of the whole
// instance, of every status, at offset in Clerk's list (GET
// /organization_invitations) in creation order, at most limit (1 to
// MaxPageLimit) of them, as ListUsers does users.
func (c *Client) ListInvitations(ctx context.Context, offset, limit int) ([]json.RawMessage, error) {
	return c.list(ctx, "/organization_invitations", "invitations", "invitations offset "+strconv.Itoa(offset), offset, limit, byCreation)
}

// UserMemberships returns the organization memberships of one user at
// offset (GET /users/{id}/organization_memberships), at most limit of
// them, or an error wrapping models.ErrNotFound when Clerk does not know
// the user.
func (c *Client) UserMemberships(ctx context.Context, userID string, offset, limit int) ([]json.RawMessage, error) {
	if !models.KindUser.IsID(userID) {
		return nil, models.Public(models.ErrInvalid, "%s is not a Clerk user id", models.Quote(userID)).In("userId")
	}
	return c.list(ctx, "/users/"+url.PathEscape(userID)+"/organization_memberships", "memberships",
		"memberships of user "+userID, offset, limit, byCreation)
}

// list reads one page of a list at path, with the parameters extra (its
// order among them); noun names its items in errors, what the page in
// OnRetry.
func (c *Client) list(ctx context.Context, path, noun, what string, offset, limit int, extra url.Values) ([]json.RawMessage, error) {
	op := "read " + noun
	if limit < 1 || limit > MaxPageLimit || offset < 0 {
		return nil, fmt.Errorf("%s: limit %d or offset %d out of range", op, limit, offset)
	}
	q := url.Values{
		"limit":  {strconv.Itoa(limit)},
		"offset": {strconv.Itoa(offset)},
	}
	for k, v := range extra {
		q[k] = v
	}
	var items []json.RawMessage
	err := c.retry(ctx, what, func() error {
		body, ctype, err := c.get(ctx, path, q, maxPageBytes, op)
		if err != nil {
			return err
		}
		var ok bool
		if items, ok = decodeList(body); !ok {
			// The body may hold users' data: it is not shown.
			return fmt.Errorf("%s: the answer (%s, %d bytes) is not a JSON array of %s (check CLERK_API_URL)",
				op, orNone(ctype), len(body), noun)
		}
		return nil
	})
	return items, err
}

// GetUser returns the user with id as Clerk sends it, or an error wrapping
// models.ErrNotFound when Clerk answers 404 (no such user in this
// instance). Other errors mean the user's state is unknown. Concurrent
// calls for one id make one request.
func (c *Client) GetUser(ctx context.Context, id string) (json.RawMessage, error) {
	if !models.KindUser.IsID(id) {
		// Nothing else goes into the path: "..", "/" or "?" would ask
		// Clerk for something other than this user.
		return nil, models.Public(models.ErrInvalid, "%s is not a Clerk user id", models.Quote(id)).In("userId")
	}
	return c.getObject(ctx, id, "/users/"+url.PathEscape(id), nil, "user")
}

// GetOrganization returns the organization with id as Clerk sends it
// (with its members_count), or an error wrapping models.ErrNotFound when
// Clerk answers 404, as GetUser does for a user. Only an organization id
// is asked for: Clerk's route takes a slug too.
func (c *Client) GetOrganization(ctx context.Context, id string) (json.RawMessage, error) {
	if !models.KindOrganization.IsID(id) {
		return nil, models.Public(models.ErrInvalid, "%s is not a Clerk organization id", models.Quote(id)).In("orgId")
	}
	return c.getObject(ctx, id, "/organizations/"+url.PathEscape(id), url.Values{"include_members_count": {"true"}}, "organization")
}

// getObject reads one object at path, shared by the concurrent callers
// that ask for id (ids of different kinds differ by their prefix).
func (c *Client) getObject(ctx context.Context, id, path string, q url.Values, noun string) (json.RawMessage, error) {
	return c.flight.Do(ctx, id, func(rctx context.Context) (json.RawMessage, error) {
		rctx, cancel := context.WithTimeout(rctx, getUserTimeout)
		defer cancel()
		var obj json.RawMessage
		err := c.retry(rctx, noun+" "+id, func() error {
			op := "read " + noun + " " + strconv.Quote(id)
			body, _, err := c.get(rctx, path, q, maxUserBytes, op)
			if err != nil {
				return err
			}
			body = bytes.TrimSpace(body)
			if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
				return fmt.Errorf("%s: the answer (%d bytes) is not a JSON object (check CLERK_API_URL)", op, len(body))
			}
			obj = body
			return nil
		})
		return obj, err
	})
}

// tryError is a failed read that a later try may get right.
type tryError struct {
	err       error
	throttled bool          // a 429
	wait      time.Duration // for a 429: how long Clerk asked to wait
}

func (e *tryError) Error() string { return e.err.Error() }
func (e *tryError) Unwrap() error { return e.err }

// retry calls read until it succeeds, fails for good, or the retries run out.
func (c *Client) retry(ctx context.Context, what string, read func() error) error {
	failures, throttles := 0, 0
	backoff := c.Retry.Backoff
	for {
		err := read()
		var te *tryError
		if err == nil || !errors.As(err, &te) || ctx.Err() != nil {
			return err
		}
		var wait time.Duration
		if te.throttled {
			throttles++
			if throttles > c.Retry.Throttled {
				return fmt.Errorf("%w, %d times in a row", err, throttles)
			}
			wait = te.wait
		} else {
			failures++
			if failures >= c.Retry.Tries {
				return fmt.Errorf("%w (tried %d times)", err, failures)
			}
			wait = backoff
			backoff *= 2
		}
		if c.OnRetry != nil {
			c.OnRetry(Retry{What: what, Throttled: te.throttled, Wait: wait, Err: te.err})
		}
		if err := sleep(ctx, wait); err != nil {
			return err
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

// get sends one GET to path under the base URL. Its error is a *tryError
// when another try may succeed, and wraps models.ErrNotFound for a 404.
func (c *Client) get(ctx context.Context, path string, q url.Values, maxBytes int, op string) (body []byte, contentType string, err error) {
	if c.Limiter != nil {
		if err := c.Limiter.Wait(ctx); err != nil {
			return nil, "", fmt.Errorf("%s: %w", op, err)
		}
	}
	u := *c.base
	u.Path += path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "usersync")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", &tryError{err: fmt.Errorf("%s: %w", op, c.redact(err))}
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, int64(maxBytes)+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "", &tryError{err: fmt.Errorf("%s: %w", op, err)}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, "", &tryError{
			err:       fmt.Errorf("%s: Clerk answered %s", op, resp.Status),
			throttled: true,
			wait:      retryAfter(resp.Header.Get("Retry-After"), c.Retry.RetryAfter),
		}
	case resp.StatusCode >= 500:
		return nil, "", &tryError{err: fmt.Errorf("%s: Clerk answered %s", op, resp.Status)}
	case path == billingItemsPath && billingOff(resp.StatusCode, body):
		return nil, "", fmt.Errorf("%s: Clerk answered %s: %s: Billing is not enabled in this instance: %w", op, resp.Status, c.snippet(body), models.ErrFeatureOff)
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s: Clerk answered %s: %s: %w", op, resp.Status, c.snippet(body), models.ErrNotFound)
	case resp.StatusCode == http.StatusForbidden && hasErrorCode(body, "organization_not_enabled_in_instance"):
		return nil, "", fmt.Errorf("%s: Clerk answered %s: organizations are not enabled in this instance: %w", op, resp.Status, models.ErrFeatureOff)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, "", fmt.Errorf("%s: Clerk answered %s: %s (check CLERK_SECRET_KEY)", op, resp.Status, c.snippet(body))
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, "", fmt.Errorf("%s: Clerk answered %s: %s", op, resp.Status, c.snippet(body))
	case len(body) > maxBytes:
		return nil, "", fmt.Errorf("%s: the answer is larger than %d MiB: use a smaller -limit", op, maxBytes>>20)
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// billingOff reports whether Clerk's answer to the list of subscription
// items says that the instance has Clerk Billing turned off. Clerk does
// not document that answer: a list (not one object) answered 404 has no
// route in this instance, and a 403 whose error code says a feature is
// not enabled (organizations' is organization_not_enabled_in_instance)
// or names billing is taken for it too. Any other 401 or 403 is a
// key's (check CLERK_SECRET_KEY). A wrong CLERK_API_URL answers 404 to
// the users' list as well, which fails the run.
func billingOff(status int, body []byte) bool {
	switch status {
	case http.StatusNotFound:
		return true
	case http.StatusForbidden:
		for _, code := range errorCodes(body) {
			code = strings.ToLower(code)
			if strings.Contains(code, "not_enabled") || strings.Contains(code, "billing") || strings.Contains(code, "commerce") {
				return true
			}
		}
	}
	return false
}

// hasErrorCode reports whether a Clerk error body ({"errors": [{"code":
// ...}]}) has an error with code.
func hasErrorCode(body []byte, code string) bool {
	return slices.Contains(errorCodes(body), code)
}

// errorCodes are the codes of a Clerk error body's errors; none when the
// body is not one.
func errorCodes(body []byte) []string {
	var e struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return nil
	}
	codes := make([]string, len(e.Errors))
	for i, err := range e.Errors {
		codes[i] = err.Code
	}
	return codes
}

// redact removes the key from an error that may quote the request.
func (c *Client) redact(err error) error {
	if c.key != "" && strings.Contains(err.Error(), c.key) {
		return errors.New(strings.ReplaceAll(err.Error(), c.key, "REDACTED"))
	}
	return err
}

// decodeList reads a page: a JSON array, or, as newer API versions answer
// (and every version for organizations and memberships), an object with
// the array in "data".
func decodeList(body []byte) ([]json.RawMessage, bool) {
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
func (c *Client) snippet(body []byte) string {
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
