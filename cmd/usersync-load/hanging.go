package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"time"
)

// With -hanging-endpoints N, the run also registers N endpoints that
// never answer: one loopback server of this process reads each delivery's
// body and then holds the request until usersync gives up on it or the
// run ends. The app's receiver of -endpoint then measures whether a
// healthy endpoint's deliveries keep arriving soon while the others hang
// (usersync hands its send slots out round-robin within each endpoint's
// share).

const (
	// maxHangingEndpoints bounds Config.HangingEndpoints, well below the
	// 50 endpoints that usersync keeps at most.
	maxHangingEndpoints = 8
	// hangingPath is the path of the hanging server's endpoints, each
	// followed by its number.
	hangingPath = "/hooks/usersync-load-hanging/"
)

// hangingServer is the loopback server of the hanging endpoints, and
// those endpoints as registered with usersync.
type hangingServer struct {
	r    *runner
	srv  *http.Server
	base string // the endpoints' URL but for their number
	// done is closed at the end of the run, which releases every request
	// held.
	done chan struct{}

	requests atomic.Int64 // received, each then held
	held     atomic.Int64 // being held now

	ids     []string // of the endpoints registered
	stopped stdsync.Once
	heldAt  int64 // requests still held when the run ended
	delErr  error
}

// startHanging listens on a loopback port and serves requests that are
// never answered.
func startHanging(r *runner) (*hangingServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hanging endpoints: listen on loopback: %w", err)
	}
	h := &hangingServer{r: r, base: "http://" + ln.Addr().String() + hangingPath, done: make(chan struct{})}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(ln) }() // ends with Close
	return h, nil
}

// ServeHTTP reads a delivery and then holds it, unanswered, until the
// client gives up or the run ends; either way the connection is dropped
// without an answer.
func (h *hangingServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || !strings.HasPrefix(req.URL.Path, hangingPath) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, maxDelivery))
	h.requests.Add(1)
	h.held.Add(1)
	defer h.held.Add(-1)
	select {
	case <-req.Context().Done():
	case <-h.done:
	}
	panic(http.ErrAbortHandler) // no answer, not even the 200 of a handler that returns
}

// register registers n endpoints of the hanging server with usersync for
// every user event.
func (h *hangingServer) register(ctx context.Context, n int) error {
	for i := range n {
		u := h.base + strconv.Itoa(i+1)
		body, _ := json.Marshal(map[string]any{"url": u, "eventTypes": []string{"user.*"}, "description": "usersync-load hanging"})
		code, resp, _, err := h.r.admin(ctx, http.MethodPost, "/v1/endpoints", body)
		if err == nil && code != http.StatusCreated {
			err = fmt.Errorf("POST /v1/endpoints answered %d: %s", code, clip(resp))
		}
		var created struct {
			ID string `json:"id"`
		}
		if err == nil {
			if err = json.Unmarshal(resp, &created); err == nil && created.ID == "" {
				err = fmt.Errorf("POST /v1/endpoints answered no id: %s", clip(resp))
			}
		}
		if err != nil {
			return fmt.Errorf("register hanging endpoint %d of %d: %w", i+1, n, err)
		}
		h.ids = append(h.ids, created.ID)
	}
	return nil
}

// openHanging starts the hanging server and registers n endpoints of it;
// on an error it deletes those registered and stops the server.
func (r *runner) openHanging(ctx context.Context, n int) (*hangingServer, error) {
	h, err := startHanging(r)
	if err != nil {
		return nil, err
	}
	if err := h.register(ctx, n); err != nil {
		_ = h.stop(ctx)
		return nil, err
	}
	return h, nil
}

// stop releases every request held, deletes the endpoints with a short
// time of its own even when ctx has ended, and stops the server; it does
// so once. The requests are released first, so that none of them holds
// the run's exit.
func (h *hangingServer) stop(ctx context.Context) error {
	h.stopped.Do(func() {
		h.heldAt = h.held.Load()
		close(h.done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		var failed []string
		for _, id := range h.ids {
			code, resp, _, err := h.r.admin(ctx, http.MethodDelete, "/v1/endpoints/"+url.PathEscape(id), nil)
			if err == nil && code != http.StatusNoContent && code != http.StatusNotFound {
				err = fmt.Errorf("answered %d: %s", code, clip(resp))
			}
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", id, err))
			}
		}
		if len(failed) > 0 {
			h.delErr = fmt.Errorf("delete hanging endpoints %s", strings.Join(failed, "; "))
		}
		_ = h.srv.Close()
	})
	return h.delErr
}

// Hanging is what the endpoints that never answer received
// (-hanging-endpoints).
type Hanging struct {
	Endpoints   int    // registered
	URL         string // theirs, but for their number
	Requests    int    // received, each held unanswered
	HeldAtEnd   int    // of them, still held when the run ended
	DeleteError string // some could not be deleted
}

// report says what the hanging endpoints received; call it after stop.
func (h *hangingServer) report() *Hanging {
	hg := &Hanging{Endpoints: len(h.ids), URL: h.base + "N", Requests: int(h.requests.Load()), HeldAtEnd: int(h.heldAt)}
	if h.delErr != nil {
		hg.DeleteError = h.delErr.Error()
	}
	return hg
}
