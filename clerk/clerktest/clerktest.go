// Package clerktest is a stand-in for Clerk's Backend API: the paged
// lists (limit and offset, as Clerk pages them) of users (GET /v1/users, a
// JSON array), organizations (GET /v1/organizations) and every membership
// of the instance (GET /v1/organization_memberships) and every invitation
// of the instance (GET /v1/organization_invitations), a user's memberships
// (GET /v1/users/{id}/organization_memberships), the last three as
// {"data", "total_count"}; single users and organizations (GET
// /v1/users/{id}, GET /v1/organizations/{id}); Clerk Billing's
// subscription items (GET /v1/billing/subscription_items, newest first,
// the free plans' items only with include_free=true, as Clerk serves
// them); and, if asked, a 429 every Nth request. Tests serve it on a loopback httptest server (New);
// cmd/clerk-standin serves it from fixture files (LoadFixtures), so that
// backfill, reconcile and the sync routes can be tried without a Clerk.
package clerktest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"
)

// Request is what the fake saw of one request.
type Request struct {
	Path                         string // /v1/users, /v1/users/{id}, /v1/organizations…
	Auth, Limit, Offset, OrderBy string
	// IncludeMembersCount is the include_members_count parameter.
	IncludeMembersCount string
	// IncludeFree is the include_free parameter.
	IncludeFree string
	At          time.Time
	// Done is closed when the client gives up the request.
	Done <-chan struct{}
}

// Answer may answer a request instead of the fake: it gets the request and
// how many requests with the same path and offset came before it, and
// returns 0 to let the fake answer.
type Answer func(w http.ResponseWriter, r Request, before int) int

// Server is a fake Clerk. Its users, organizations and memberships are
// each kept in creation order.
type Server struct {
	URL string // CLERK_API_URL, once served by New

	mu      stdsync.Mutex
	users   []json.RawMessage
	orgs    []json.RawMessage
	members []json.RawMessage
	// invites are the organization invitations, in creation order.
	invites []json.RawMessage
	// items are the subscription items, newest first.
	items      []json.RawMessage
	reqs       []Request
	answer     Answer
	orgsOff    bool
	billingOff bool
	// forget keeps no requests (a stand-in that serves for long).
	forget bool
	// throttleEvery answers every throttleEvery-th request 429, with
	// Retry-After retryAfter seconds; 0: never. served counts requests.
	throttleEvery, retryAfter, served int
}

// New serves users until the test ends, on a loopback server; it has no
// organizations until some are added.
func New(t testing.TB, users []json.RawMessage) *Server {
	t.Helper()
	c := NewServer(users, nil, nil)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1"
	return c
}

// NewServer is a stand-in Clerk with these users, organizations and
// memberships, each in creation order; serve it as an http.Handler.
func NewServer(users, orgs, members []json.RawMessage) *Server {
	return &Server{users: users, orgs: orgs, members: members}
}

// ServeHTTP answers one request as Clerk's Backend API would.
func (c *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.serve(w, r) }

// Throttle answers every nth request (counting all, from the next one)
// 429 with Retry-After retryAfter seconds, as Clerk does past its rate
// limit: deterministically, so that a test or a walkthrough sees the
// client wait and go on. n 0 turns it off.
func (c *Server) Throttle(n, retryAfter int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.throttleEvery, c.retryAfter, c.served = max(n, 0), max(retryAfter, 0), 0
}

// KeepNoRequests makes the server forget the requests it serves (Requests
// is then empty): for a stand-in that serves for long.
func (c *Server) KeepNoRequests() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget, c.reqs = true, nil
}

// Counts says how many users, organizations and memberships the server
// has.
func (c *Server) Counts() (users, orgs, members int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.users), len(c.orgs), len(c.members)
}

// FixtureFiles are the files LoadFixtures reads from a directory, each a
// JSON array of Clerk's objects as its Backend API serves them, in
// creation order.
var FixtureFiles = [3]string{"users.json", "organizations.json", "memberships.json"}

// LoadFixtures reads the users, organizations and memberships of a
// stand-in Clerk from dir's FixtureFiles; a missing file is none of them.
// Each object must be a JSON object with a string "id".
func LoadFixtures(dir string) (users, orgs, members []json.RawMessage, err error) {
	lists := [3][]json.RawMessage{}
	for i, name := range FixtureFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if err := json.Unmarshal(b, &lists[i]); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: not a JSON array of objects: %w", filepath.Join(dir, name), err)
		}
		for j, o := range lists[i] {
			if id, _, _ := ids(o); id == "" {
				return nil, nil, nil, fmt.Errorf("%s: item %d has no string \"id\"", filepath.Join(dir, name), j)
			}
		}
	}
	return lists[0], lists[1], lists[2], nil
}

// SubscriptionItemsFile is the file LoadSubscriptionItems reads: a JSON
// array of Clerk Billing's subscription items, newest first, as GET
// /v1/billing/subscription_items lists them.
const SubscriptionItemsFile = "subscription_items.json"

// LoadSubscriptionItems reads the subscription items of a stand-in Clerk
// from dir's SubscriptionItemsFile; a missing file is none (an instance
// with Billing and no item). Each must be a JSON object with a string
// "id".
func LoadSubscriptionItems(dir string) ([]json.RawMessage, error) {
	return loadList(filepath.Join(dir, SubscriptionItemsFile))
}

// InvitationsFile is the file LoadInvitations reads: a JSON array of
// Clerk's organization invitations, in creation order, as GET
// /v1/organization_invitations lists them.
const InvitationsFile = "invitations.json"

// LoadInvitations reads the organization invitations of a stand-in Clerk
// from dir's InvitationsFile; a missing file is none. Each must be a JSON
// object with a string "id".
func LoadInvitations(dir string) ([]json.RawMessage, error) {
	return loadList(filepath.Join(dir, InvitationsFile))
}

// loadList reads the JSON array of objects of the file name; a missing
// file is none.
func loadList(name string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, fmt.Errorf("%s: not a JSON array of objects: %w", name, err)
	}
	for j, o := range items {
		if id, _, _ := ids(o); id == "" {
			return nil, fmt.Errorf("%s: item %d has no string \"id\"", name, j)
		}
	}
	return items, nil
}

// ids reads the id of an object, and of a membership its organization's
// and user's.
func ids(raw json.RawMessage) (id, orgID, userID string) {
	var o struct {
		ID           string `json:"id"`
		Organization struct {
			ID string `json:"id"`
		} `json:"organization"`
		PublicUserData struct {
			UserID string `json:"user_id"`
		} `json:"public_user_data"`
	}
	_ = json.Unmarshal(raw, &o)
	return o.ID, o.Organization.ID, o.PublicUserData.UserID
}

func userID(raw json.RawMessage) string {
	id, _, _ := ids(raw)
	return id
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"errors":[{"message":"not found","code":"resource_not_found"}]}`))
}

func (c *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		notFound(w)
		return
	}
	q := r.URL.Query()
	req := Request{
		Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Limit: q.Get("limit"), Offset: q.Get("offset"),
		OrderBy: q.Get("order_by"), IncludeMembersCount: q.Get("include_members_count"), IncludeFree: q.Get("include_free"),
		At: time.Now(), Done: r.Context().Done(),
	}
	c.mu.Lock()
	before := 0
	for _, seen := range c.reqs {
		if seen.Path == req.Path && seen.Offset == req.Offset {
			before++
		}
	}
	if !c.forget {
		c.reqs = append(c.reqs, req)
	}
	answer := c.answer
	c.served++
	throttled := c.throttleEvery > 0 && c.served%c.throttleEvery == 0
	retryAfter := c.retryAfter
	c.mu.Unlock()

	if throttled {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"errors":[{"message":"Too many requests","long_message":"Too many requests, retry later","code":"too_many_requests"}]}`))
		return
	}
	if answer != nil && answer(w, req, before) != 0 {
		return
	}
	c.mu.Lock()
	// As the answer may have changed them.
	users, orgs, members, invites, orgsOff := c.users, c.orgs, c.members, c.invites, c.orgsOff
	items, billingOff := c.items, c.billingOff
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.Path
	switch {
	case orgsOff && (strings.HasPrefix(path, "/v1/organization") || strings.HasSuffix(path, "/organization_memberships")):
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"errors":[{"message":"access denied","long_message":"The organizations feature is not enabled for this instance. You can enable it at https://dashboard.clerk.com.","code":"organization_not_enabled_in_instance"}]}`))
	case path == "/v1/billing/subscription_items" && billingOff:
		// What Clerk answers is not documented: a 404, as for a route the
		// instance does not have (see clerk.billingOff).
		notFound(w)
	case path == "/v1/billing/subscription_items":
		if req.IncludeFree != "true" {
			// Clerk's include_free defaults to false.
			items = without(items, isFree)
		}
		page(w, req, items, true)
	case path == "/v1/users":
		page(w, req, users, false)
	case path == "/v1/organizations":
		page(w, req, orgs, true)
	case path == "/v1/organization_memberships":
		page(w, req, members, true)
	case path == "/v1/organization_invitations":
		page(w, req, invites, true)
	case strings.HasPrefix(path, "/v1/users/") && strings.HasSuffix(path, "/organization_memberships"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/users/"), "/organization_memberships")
		var theirs []json.RawMessage
		for _, m := range members {
			if _, _, u := ids(m); u == id {
				theirs = append(theirs, m)
			}
		}
		// A user with a membership exists, even if the fake was not given it.
		if len(theirs) == 0 && find(users, id) == nil {
			notFound(w)
			return
		}
		page(w, req, theirs, true)
	case strings.HasPrefix(path, "/v1/users/"):
		if u := find(users, strings.TrimPrefix(path, "/v1/users/")); u != nil {
			_, _ = w.Write(u)
			return
		}
		notFound(w)
	case strings.HasPrefix(path, "/v1/organizations/"):
		if o := find(orgs, strings.TrimPrefix(path, "/v1/organizations/")); o != nil {
			_, _ = w.Write(o)
			return
		}
		notFound(w)
	default:
		notFound(w)
	}
}

func find(list []json.RawMessage, id string) json.RawMessage {
	for _, o := range list {
		if userID(o) == id {
			return o
		}
	}
	return nil
}

// page writes one page of list: a JSON array, or with data Clerk's
// {"data": [...], "total_count": n}.
func page(w http.ResponseWriter, req Request, list []json.RawMessage, data bool) {
	limit, err1 := strconv.Atoi(req.Limit)
	offset, err2 := strconv.Atoi(req.Offset)
	if err1 != nil || err2 != nil || limit < 1 || limit > 500 || offset < 0 {
		http.Error(w, `{"errors":[{"code":"form_param_value_invalid"}]}`, http.StatusUnprocessableEntity)
		return
	}
	items := list[min(offset, len(list)):min(offset+limit, len(list))]
	var b bytes.Buffer
	if data {
		b.WriteString(`{"data": `)
	}
	b.WriteString("[\n  ")
	for i, it := range items {
		if i > 0 {
			b.WriteString(",\n  ")
		}
		b.Write(it)
	}
	b.WriteString("\n]")
	if data {
		b.WriteString(`, "total_count": ` + strconv.Itoa(len(list)) + "}")
	}
	b.WriteString("\n")
	_, _ = w.Write(b.Bytes())
}

// TurnOrganizationsOff makes the fake answer as Clerk does for an
// instance with the organizations feature turned off: 403
// organization_not_enabled_in_instance to every organization and
// membership route.
func (c *Server) TurnOrganizationsOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orgsOff = true
}

// TurnBillingOff makes the fake answer as an instance without Clerk
// Billing: 404 to the list of subscription items.
func (c *Server) TurnBillingOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.billingOff = true
}

// SetSubscriptionItems sets the subscription items of the instance, the
// newest first, as GET /v1/billing/subscription_items lists them.
func (c *Server) SetSubscriptionItems(items []json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = items
}

// isFree reports whether a subscription item is on a free plan: its
// plan's amount is 0 or absent.
func isFree(raw json.RawMessage) bool {
	var it struct {
		Plan struct {
			Amount *int64 `json:"amount"`
		} `json:"plan"`
	}
	_ = json.Unmarshal(raw, &it)
	return it.Plan.Amount == nil || *it.Plan.Amount == 0
}

// SetAnswer sets the hook that may answer requests instead of the fake.
func (c *Server) SetAnswer(f Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answer = f
}

// Remove deletes the object with id (a user, organization or membership,
// told apart by the id's prefix), as a deletion in Clerk's dashboard
// does: the objects after it move up one place in their list. Removing a
// user or an organization removes its memberships too, as Clerk does, and
// removing an organization its invitations.
func (c *Server) Remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &c.users
	switch {
	case strings.HasPrefix(id, "org_"):
		list = &c.orgs
	case strings.HasPrefix(id, "orgmem_"):
		list = &c.members
	}
	*list = without(*list, func(raw json.RawMessage) bool { return userID(raw) == id })
	if list != &c.members {
		c.members = without(c.members, func(raw json.RawMessage) bool {
			_, org, user := ids(raw)
			return org == id || user == id
		})
	}
	if strings.HasPrefix(id, "org_") {
		c.invites = without(c.invites, func(raw json.RawMessage) bool {
			var inv struct {
				OrganizationID string `json:"organization_id"`
			}
			_ = json.Unmarshal(raw, &inv)
			return inv.OrganizationID == id
		})
	}
}

// without returns list without the items drop selects, in a new array
// (a page being written keeps the old one).
func without(list []json.RawMessage, drop func(json.RawMessage) bool) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(list))
	for _, it := range list {
		if !drop(it) {
			out = append(out, it)
		}
	}
	return out
}

// Add appends a user, as a sign-up does.
func (c *Server) Add(u json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users = append(c.users[:len(c.users):len(c.users)], u)
}

// AddOrganization appends an organization, as its creation does.
func (c *Server) AddOrganization(o json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orgs = append(c.orgs[:len(c.orgs):len(c.orgs)], o)
}

// AddMembership appends a membership, as a user's joining does. Its
// organization and user need not be known to the fake.
func (c *Server) AddMembership(m json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members = append(c.members[:len(c.members):len(c.members)], m)
}

// SetInvitations sets the organization invitations of the instance, in
// creation order.
func (c *Server) SetInvitations(invites []json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invites = invites
}

// AddInvitation appends an organization invitation, as its sending does.
// Clerk never deletes one; a later state of it replaces it in place
// (SetInvitation).
func (c *Server) AddInvitation(inv json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invites = append(c.invites[:len(c.invites):len(c.invites)], inv)
}

// SetInvitation replaces the invitation with inv's id by inv (its
// acceptance or revocation), in its place in the list; an unknown one is
// appended.
func (c *Server) SetInvitation(inv json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := userID(inv)
	out := make([]json.RawMessage, 0, len(c.invites)+1)
	found := false
	for _, it := range c.invites {
		if userID(it) == id {
			it, found = inv, true
		}
		out = append(out, it)
	}
	if !found {
		out = append(out, inv)
	}
	c.invites = out
}

// Requests returns the requests seen so far and forgets them.
func (c *Server) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := c.reqs
	c.reqs = nil
	return reqs
}

// Offsets lists the offsets of the user list's requests among reqs,
// comma-separated.
func Offsets(reqs []Request) string { return OffsetsOf(reqs, "/v1/users") }

// OffsetsOf lists the offsets of the requests of the list at path among
// reqs, comma-separated.
func OffsetsOf(reqs []Request, path string) string {
	var s []string
	for _, r := range reqs {
		if r.Path == path {
			s = append(s, r.Offset)
		}
	}
	return strings.Join(s, ",")
}
