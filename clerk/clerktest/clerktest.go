// Package clerktest is a fake of Clerk's Backend API for tests: the paged
// user list (GET /v1/users, limit and offset, as Clerk pages it) and single
// users (GET /v1/users/{id}), on a loopback httptest server.
package clerktest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"
)

// Request is what the fake saw of one request.
type Request struct {
	Path                         string // /v1/users or /v1/users/{id}
	Auth, Limit, Offset, OrderBy string
	At                           time.Time
	// Done is closed when the client gives up the request.
	Done <-chan struct{}
}

// Answer may answer a request instead of the fake: it gets the request and
// how many requests with the same path and offset came before it, and
// returns 0 to let the fake answer.
type Answer func(w http.ResponseWriter, r Request, before int) int

// Server is a fake Clerk. Its users are kept in creation order.
type Server struct {
	URL string // CLERK_API_URL

	mu     stdsync.Mutex
	users  []json.RawMessage
	reqs   []Request
	answer Answer
}

// New serves users until the test ends.
func New(t testing.TB, users []json.RawMessage) *Server {
	t.Helper()
	c := &Server{users: users}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1"
	return c
}

func userID(raw json.RawMessage) string {
	var u struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &u)
	return u.ID
}

func (c *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v1/users") {
		http.Error(w, `{"errors":[{"code":"resource_not_found"}]}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	req := Request{
		Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Limit: q.Get("limit"), Offset: q.Get("offset"),
		OrderBy: q.Get("order_by"), At: time.Now(), Done: r.Context().Done(),
	}
	c.mu.Lock()
	before := 0
	for _, seen := range c.reqs {
		if seen.Path == req.Path && seen.Offset == req.Offset {
			before++
		}
	}
	c.reqs = append(c.reqs, req)
	answer := c.answer
	c.mu.Unlock()

	if answer != nil && answer(w, req, before) != 0 {
		return
	}
	c.mu.Lock()
	users := c.users // as the answer may have changed them
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/users/"); ok {
		for _, u := range users {
			if userID(u) == id {
				_, _ = w.Write(u)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errors":[{"message":"not found","code":"resource_not_found"}]}`))
		return
	}
	if r.URL.Path != "/v1/users" {
		http.Error(w, `{"errors":[{"code":"resource_not_found"}]}`, http.StatusNotFound)
		return
	}
	limit, err1 := strconv.Atoi(req.Limit)
	offset, err2 := strconv.Atoi(req.Offset)
	if err1 != nil || err2 != nil || limit < 1 || limit > 500 || offset < 0 {
		http.Error(w, `{"errors":[{"code":"form_param_value_invalid"}]}`, http.StatusUnprocessableEntity)
		return
	}
	page := users[min(offset, len(users)):min(offset+limit, len(users))]
	var b bytes.Buffer
	b.WriteString("[\n  ")
	for i, u := range page {
		if i > 0 {
			b.WriteString(",\n  ")
		}
		b.Write(u)
	}
	b.WriteString("\n]\n")
	_, _ = w.Write(b.Bytes())
}

// SetAnswer sets the hook that may answer requests instead of the fake.
func (c *Server) SetAnswer(f Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answer = f
}

// Remove deletes the user with id, as a deletion in Clerk's dashboard
// does: the users after it move up one place in the list.
func (c *Server) Remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, u := range c.users {
		if userID(u) == id {
			c.users = append(c.users[:i:i], c.users[i+1:]...)
			return
		}
	}
}

// Add appends a user, as a sign-up does.
func (c *Server) Add(u json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users = append(c.users[:len(c.users):len(c.users)], u)
}

// Requests returns the requests seen so far and forgets them.
func (c *Server) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := c.reqs
	c.reqs = nil
	return reqs
}

// Offsets lists the offsets of the list requests among reqs, comma-separated.
func Offsets(reqs []Request) string {
	var s []string
	for _, r := range reqs {
		if r.Path == "/v1/users" {
			s = append(s, r.Offset)
		}
	}
	return strings.Join(s, ",")
}
