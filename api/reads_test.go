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

// blockingReader holds every List and Changes until release is closed,
// telling entered first: a slow store, or a slow client.
type blockingReader struct {
	api.UserReader
	entered chan struct{}
	release chan struct{}
}

func (b *blockingReader) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.UserReader.List(ctx, f)
}

func (b *blockingReader) Changes(ctx context.Context, f models.ChangeFilter) (models.UserPage, error) {
	b.entered <- struct{}{}
	<-b.release
	return b.UserReader.Changes(ctx, f)
}

func TestReads_ListReadsBeyondTheBoundAreA503WithRetryAfter(t *testing.T) {
	blocked := &blockingReader{entered: make(chan struct{}, 10), release: make(chan struct{})}
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{Reads: 2, ReadWait: 50 * time.Millisecond}
		o.wrapReader = func(r api.UserReader) api.UserReader { blocked.UserReader = r; return blocked }
	})
	codes := make(chan int, 2)
	for _, path := range []string{"/v1/users", "/v1/users?updatedSince=2020-01-01T00:00:00Z"} {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, h.url+path, nil)
			req.Header.Set("Authorization", "Bearer "+testAPIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				codes <- 0
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	for range 2 {
		<-blocked.entered
	}
	for _, path := range []string{"/v1/users", "/v1/users?updatedSince=2020-01-01T00:00:00Z", "/v1/events"} {
		r := getWithin(t, h, path, testAdminKey) // a server that queued it would hold it for ever
		if code, _ := errorOf(t, r); r.Code != http.StatusServiceUnavailable || code != "overloaded" || r.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s while 2 of 2 reads are held = %s, want 503 overloaded with Retry-After", path, r)
		}
	}
	// One user is not a list: it is served.
	if r := h.get("/v1/users/user_none", testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("GET one user while the reads are held = %s, want its 404", r)
	}
	close(blocked.release)
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("a held read = %d, want 200", c)
		}
	}
	if r := h.get("/v1/events", testAdminKey); r.Code != http.StatusOK {
		t.Errorf("GET /v1/events once the reads are done = %s, want 200", r)
	}
}

func TestReads_APageIsReadInChunksAndEndsAtItsBytes(t *testing.T) {
	const total = 70 // more than one chunk of 50
	h := newHarness(t, func(o *harnessOptions) {
		o.limits = api.Limits{PageBytes: 200 << 10}
		o.settle = feedSettle
	})
	since := time.Now().UTC().Add(-time.Second).Format(time.RFC3339Nano)
	for i := range total {
		u := clerkUser{ID: fmt.Sprintf("user_c%02d", i), UpdatedAt: t0}
		if i%10 == 0 {
			u.Meta = map[string]any{"pad": strings.Repeat("m", 60_000)} // 7 of these fill a page's 200 KiB
		}
		h.mustDeliver(newID(), userBody(t, "user.created", u))
	}
	settled()
	walk := func(feed bool) (seen map[string]int, pages []int) {
		seen = map[string]int{}
		cursor := ""
		for len(pages) <= total {
			q := url.Values{"limit": {"200"}}
			if feed {
				q.Set("updatedSince", since)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			r := h.get("/v1/users?"+q.Encode(), testAPIKey)
			if r.Code != http.StatusOK {
				t.Fatalf("page %d: %s", len(pages)+1, r)
			}
			body := r.JSON(t)
			data := body["data"].([]any)
			pages = append(pages, len(data))
			for _, u := range data {
				seen[u.(map[string]any)["userId"].(string)]++
			}
			next, _ := body["nextCursor"].(string)
			if next == "" || (feed && len(data) == 0) {
				return seen, pages
			}
			cursor = next
		}
		t.Fatal("the walk does not end")
		return nil, nil
	}
	for _, feed := range []bool{false, true} {
		seen, pages := walk(feed)
		if len(seen) != total {
			t.Errorf("feed %v: walked %d users in pages of %v, want %d", feed, len(seen), pages, total)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("feed %v: %s served %d times", feed, id, n)
			}
		}
		if len(pages) < 2 || pages[0] >= total {
			t.Errorf("feed %v: pages of %v users, want the first cut by its bytes", feed, pages)
		}
	}
}

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
