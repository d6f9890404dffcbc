// Package client reads the copy usersync keeps of an application's Clerk
// users, organizations, memberships, invitations and Clerk Billing over its REST API,
// and verifies and parses the outbound webhooks it sends.
//
// It imports the standard library only, so an application that imports
// it pulls in none of the service's dependencies:
//
//	c := client.New("http://usersync:8080", os.Getenv("USERSYNC_API_KEY"), client.Options{})
//	u, err := c.User(ctx, "user_2abc")
//	if client.IsNotFound(err) {
//		u, err = c.SyncUser(ctx, "user_2abc") // the sign-up race
//	}
//
// Every read of the API has a method: one object (User, Organization,
// UserBilling…), a list (Users, Organizations, OrganizationMemberships…:
// a List to read a page at a time, or to walk item by item), and the
// change feeds (UserChanges, OrganizationChanges, MembershipChanges,
// PlanChanges: a Feed that walks from a saved cursor). The event log,
// subscriptions and payment attempts need an admin key. An answer other
// than 2xx is an *Error carrying the API's code and request id; a 429 or
// a 503 is tried again, after its Retry-After (see Options).
//
// An organization's invitations are a List too (OrganizationInvitations),
// and one invitation a method (OrganizationInvitation).
//
// A Verifier checks an outbound message's Standard Webhooks signature
// and returns it as an Event, its data typed by its type.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options are how a Client talks to usersync; the zero value is the
// defaults.
type Options struct {
	// HTTPClient sends the requests; nil: http.DefaultClient.
	HTTPClient *http.Client
	// Retries is how many times a request answered 429 or 503 is sent
	// again; 0: 3; negative: never.
	Retries int
	// MaxWait is the longest wait before sending a request again: an
	// answer whose Retry-After asks for longer is returned as it is. 0:
	// 30 s.
	MaxWait time.Duration
}

// Client reads one usersync with one key: an API key reads the copy, an
// admin key also the deleted objects, the event log and Clerk Billing's
// subscriptions and payment attempts. It is safe for concurrent use.
type Client struct {
	base    string
	key     string
	http    *http.Client
	retries int
	maxWait time.Duration
}

// New returns a client of the usersync at baseURL (http://usersync:8080)
// reading with key.
func New(baseURL, key string, o Options) *Client {
	c := &Client{base: strings.TrimSuffix(baseURL, "/"), key: key, http: o.HTTPClient, retries: o.Retries, maxWait: o.MaxWait}
	if c.http == nil {
		c.http = http.DefaultClient
	}
	switch {
	case c.retries == 0:
		c.retries = 3
	case c.retries < 0:
		c.retries = 0
	}
	if c.maxWait <= 0 {
		c.maxWait = 30 * time.Second
	}
	return c
}

// get reads path with query into a T.
func get[T any](ctx context.Context, c *Client, path string, query url.Values) (T, error) {
	var v T
	err := c.do(ctx, http.MethodGet, path, query, &v)
	return v, err
}

// post posts path, with no body, and reads its answer into a T.
func post[T any](ctx context.Context, c *Client, path string) (T, error) {
	var v T
	err := c.do(ctx, http.MethodPost, path, nil, &v)
	return v, err
}

// do sends method path?query (path escaped), again after a 429 or a 503,
// and decodes a 2xx answer into out.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, out any) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	for attempt := 0; ; attempt++ {
		err := c.once(ctx, method, u, out)
		var e *Error
		if !errors.As(err, &e) || !e.Temporary() || attempt >= c.retries {
			return err
		}
		wait := e.RetryAfter
		if !e.askedWait {
			wait = time.Second << attempt
		}
		if wait > c.maxWait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// once sends one request.
func (c *Client) once(ctx context.Context, method, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return newError(res)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("usersync: %s %s: the answer is not what the client expects: %w", method, req.URL.Path, err)
	}
	return nil
}

// newError reads an answer other than 2xx.
func newError(res *http.Response) *Error {
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"requestId"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = json.Unmarshal(b, &body)
	e := &Error{Status: res.StatusCode, Code: body.Error.Code, Message: body.Error.Message, RequestID: body.Error.RequestID}
	e.RetryAfter, e.askedWait = retryAfter(res.Header.Get("Retry-After"), time.Now())
	if e.RequestID == "" {
		e.RequestID = res.Header.Get("X-Request-Id")
	}
	if e.Message == "" {
		e.Message = http.StatusText(res.StatusCode)
	}
	return e
}

// retryAfter reads a Retry-After header at now: seconds, or an HTTP date;
// ok is false when there is none, or it cannot be read.
func retryAfter(h string, now time.Time) (wait time.Duration, ok bool) {
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
