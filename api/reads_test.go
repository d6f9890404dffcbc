package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	stdsync "sync"
	"syscall"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
)

// getWithin is h.get that fails the test if no answer comes within 30 s.
func getWithin(t *testing.T, h *harness, path, key string) response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return response{Code: resp.StatusCode, Body: buf.Bytes(), Header: resp.Header}
}

// limitReader holds every List until one release is sent, telling entered
// the page size the read asked for (who asked, for the test).
type limitReader struct {
	api.UserReader
	entered chan int
	release chan struct{}
}

func (b *limitReader) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	b.entered <- f.Limit
	<-b.release
	return b.UserReader.List(ctx, f)
}

// listInBackground sends GET path with key and reports its status on codes.
func listInBackground(h *harness, path, key string, codes chan<- int) {
	go func() {
		req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
		if err != nil {
			codes <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
}

func TestReads_AKeyHoldsOnlyItsShareOfContendedSlots(t *testing.T) {
	t.Parallel()
	const slots = 2
	held := &limitReader{entered: make(chan int, 20), release: make(chan struct{})}
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{Reads: slots, ReadWait: time.Minute} // no wait ends in this test
		o.wrapReader = func(r api.UserReader) api.UserReader { held.UserReader = r; return held }
	})
	var once stdsync.Once
	releaseAll := func() { once.Do(func() { close(held.release) }) }
	t.Cleanup(releaseAll) // before the server closes: it waits for its requests
	codes := make(chan int, 20)
	// One key takes both slots while alone, and queues six more reads.
	for range slots {
		listInBackground(h, "/v1/users?limit=5", testAPIKey, codes)
	}
	for range slots {
		if n := <-held.entered; n != 5 {
			t.Fatalf("a read of limit %d entered, want 5", n)
		}
	}
	for range 6 {
		listInBackground(h, "/v1/users?limit=5", testAPIKey, codes)
	}
	waitForMetric(t, h, `usersync_list_reads{state="waiting"}`, 6)
	// Another key asks: the first slot to come free is its own, whatever
	// the order of the waiters, since the first key holds its share.
	listInBackground(h, "/v1/users?limit=7", testAdminKey, codes)
	waitForMetric(t, h, `usersync_list_reads{state="waiting"}`, 7)
	held.release <- struct{}{}
	if n := <-held.entered; n != 7 {
		t.Errorf("the slot given back went to a read of limit %d, want the other key's (7)", n)
	}
	releaseAll()
	for range 9 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("a read = %d, want 200", c)
		}
	}
	waitForMetric(t, h, `usersync_list_reads{state="reading"}`, 0)
}

// unreadGet sends GET path with key on a connection whose receive buffer
// is 4 KiB, and never reads the answer: a slow client.
func unreadGet(t *testing.T, h *harness, path, key string) {
	t.Helper()
	u, _ := url.Parse(h.url)
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, u.Host, key)
}

func TestReads_ASlotIsGivenBackBeforeTheAnswerIsWrittenToASlowClient(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stores 120 users of 60 KB")
	}
	h := newHarness(t, func(o *harnessOptions) {
		// Pages of about 7 MB: more than the kernel buffers between the
		// server and a client that does not read.
		o.limits = api.Limits{Reads: 2, ReadWait: 200 * time.Millisecond, PageBytes: 16 << 20}
	})
	for i := range 120 {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_big%03d", i), UpdatedAt: t0,
			Meta: map[string]any{"pad": strings.Repeat("m", 60_000)}}))
	}
	for range 2 {
		unreadGet(t, h, "/v1/users?limit=200", testAPIKey)
	}
	// Both answers are being written, and hold no slot...
	waitForMetric(t, h, `usersync_list_reads{state="writing"}`, 2)
	waitForMetric(t, h, `usersync_list_reads{state="reading"}`, 0)
	// ...so another key's reads are served.
	for range 3 {
		if r := getWithin(t, h, "/v1/users?limit=1", testAdminKey); r.Code != http.StatusOK {
			t.Errorf("a read of another key while two answers wait for a slow client = %s, want 200", r)
		}
	}
}
