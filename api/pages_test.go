package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
)

// pageRoute is one list or change feed of the API.
type pageRoute struct {
	name string
	path string
	feed bool   // a change feed: updatedSince is set, nextCursor always
	id   string // the field that names an item
	want int    // the items of pageData it serves
}

// The ids of pageData are as long as ids may be (128 bytes), so that its
// walks follow the longest cursors a store answers.
func pageID(prefix string) string { return prefix + strings.Repeat("x", 128-len(prefix)) }

// pageData: pageUsers users, each a member of pageOrg, and pageUser a
// member of pageUsers organizations; every one with pagePad bytes of
// metadata.
const (
	pageUsers = 60
	pagePad   = 2000
)

var (
	pageOrg  = pageID("org_po")
	pageUser = pageID("user_pu")
)

// pageRoutes is every list and change feed of users, organizations and
// memberships, with what each serves of pageData.
var pageRoutes = []pageRoute{
	{name: "users", path: "/v1/users", id: "userId", want: pageUsers + 1},
	{name: "users' feed", path: "/v1/users", feed: true, id: "userId", want: pageUsers + 1},
	{name: "organizations", path: "/v1/organizations", id: "organizationId", want: pageUsers + 1},
	{name: "organizations' feed", path: "/v1/organizations", feed: true, id: "organizationId", want: pageUsers + 1},
	{name: "an organization's memberships", path: "/v1/organizations/" + pageOrg + "/memberships", id: "membershipId", want: pageUsers},
	{name: "a user's memberships", path: "/v1/users/" + pageUser + "/memberships", id: "membershipId", want: pageUsers},
	{name: "memberships' feed", path: "/v1/memberships", feed: true, id: "membershipId", want: 2 * pageUsers},
}

// pageSince is the updatedSince of the feeds in these tests: before any
// of their writes.
var pageSince = time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)

// url is the route with query q (a feed's updatedSince added).
func (r pageRoute) url(q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	if r.feed {
		q.Set("updatedSince", pageSince)
	}
	if len(q) == 0 {
		return r.path
	}
	return r.path + "?" + q.Encode()
}

// holdingReader holds every List of one user (a read of limit 1) until a
// release is sent, telling entered: reads that hold read slots.
type holdingReader struct {
	api.UserReader
	entered chan struct{}
	release chan struct{}
}

func (b *holdingReader) List(ctx context.Context, f models.UserFilter) (models.UserPage, error) {
	if f.Limit == 1 {
		b.entered <- struct{}{}
		<-b.release
	}
	return b.UserReader.List(ctx, f)
}

// holdSlots takes n read slots with reads that hold them until release,
// which the test's end calls too: the server closes only once its
// requests are done.
func holdSlots(t *testing.T, h *harness, held *holdingReader, n int) (release func()) {
	t.Helper()
	codes := make(chan int, n)
	for range n {
		listInBackground(h, "/v1/users?limit=1", testAPIKey, codes)
	}
	for range n {
		<-held.entered
	}
	var once stdsync.Once
	release = func() {
		once.Do(func() {
			for range n {
				held.release <- struct{}{}
			}
			for range n {
				if c := <-codes; c != http.StatusOK {
					t.Errorf("a read that held a slot = %d, want 200", c)
				}
			}
		})
	}
	t.Cleanup(release)
	return release
}

// refusal is the code and message of r's error body; "" when it has none.
func refusal(r response) (code, msg string) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &body)
	return body.Error.Code, body.Error.Message
}

// listReads reads the gauge of list reads in state.
func listReads(t *testing.T, h *harness, state string) float64 {
	t.Helper()
	series := `usersync_list_reads{state="` + state + `"}`
	for _, line := range strings.Split(string(h.get("/metrics", "").Body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in the metrics", series)
	return 0
}

// seedPages delivers pageData.
func seedPages(t *testing.T, h *harness) {
	t.Helper()
	pad := map[string]any{"pad": strings.Repeat("p", pagePad)}
	org := func(id string) []byte {
		return editFixture(t, "openapi.organization.created.json", func(_, d map[string]any) {
			d["id"], d["slug"], d["updated_at"], d["public_metadata"] = id, id[:20], t0, pad
		})
	}
	membership := func(id, orgID, userID string) []byte {
		return editFixture(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) {
			d["id"], d["updated_at"], d["public_metadata"] = id, t0, pad
			d["organization"].(map[string]any)["id"] = orgID
			d["public_user_data"].(map[string]any)["user_id"] = userID
		})
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: pageUser, UpdatedAt: t0, Meta: pad}))
	h.mustDeliver(newID(), org(pageOrg))
	for i := range pageUsers {
		user, orgID := pageID(fmt.Sprintf("user_p%02d", i)), pageID(fmt.Sprintf("org_p%02d", i))
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: user, UpdatedAt: t0, Meta: pad}))
		h.mustDeliver(newID(), org(orgID))
		h.mustDeliver(newID(), membership(pageID(fmt.Sprintf("orgmem_o%02d", i)), pageOrg, user))
		h.mustDeliver(newID(), membership(pageID(fmt.Sprintf("orgmem_u%02d", i)), orgID, pageUser))
	}
}

// walk reads every page of r, limit items at most, and returns how many
// times each item was served and the pages' lengths.
func (r pageRoute) walk(t *testing.T, h *harness, limit int) (seen map[string]int, pages []int) {
	t.Helper()
	seen = map[string]int{}
	cursor := ""
	for len(pages) <= r.want {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		resp := h.get(r.url(q), testAPIKey)
		if resp.Code != http.StatusOK {
			t.Fatalf("%s, page %d (cursor of %d characters): %s", r.name, len(pages)+1, len(cursor), resp)
		}
		body := resp.JSON(t)
		data := body["data"].([]any)
		pages = append(pages, len(data))
		for _, item := range data {
			seen[item.(map[string]any)[r.id].(string)]++
		}
		next, _ := body["nextCursor"].(string)
		if next == "" || (r.feed && len(data) == 0) {
			return seen, pages
		}
		cursor = next
	}
	t.Fatalf("%s: the walk does not end", r.name)
	return nil, nil
}

// TestPages_EveryListAndFeedIsReadTheSameWay: users, organizations, an
// organization's memberships, a user's memberships and each kind's change
// feed are read by one reader: each waits for a read slot and is refused
// when none comes, ends its page at the page's bytes, takes one cursor
// bound, and refuses includeDeleted to an API key the same way.
func TestPages_EveryListAndFeedIsReadTheSameWay(t *testing.T) {
	t.Parallel()
	t.Run("a read waits for a slot while the slots are taken", func(t *testing.T) {
		held := &holdingReader{entered: make(chan struct{}, 4), release: make(chan struct{})}
		h := newHarness(t, func(o *harnessOptions) {
			o.limits = api.Limits{Reads: 2, ReadWait: time.Minute} // no wait ends in this test
			o.wrapReader = func(r api.UserReader) api.UserReader { held.UserReader = r; return held }
		})
		for _, r := range pageRoutes {
			release := holdSlots(t, h, held, 2)
			codes := make(chan int, 1)
			listInBackground(h, r.url(nil), testAdminKey, codes)
			for deadline := time.Now().Add(30 * time.Second); listReads(t, h, "waiting") != 1; time.Sleep(10 * time.Millisecond) {
				select {
				case c := <-codes:
					release()
					t.Fatalf("%s: answered %d while every read slot was taken, want it to wait for one", r.name, c)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: not waiting for a read slot after 30 s", r.name)
				}
			}
			release()
			if c := <-codes; c != http.StatusOK {
				t.Errorf("%s: %d once a slot came free, want 200", r.name, c)
			}
		}
	})

	t.Run("a read that gets no slot in time is a 503 with Retry-After", func(t *testing.T) {
		held := &holdingReader{entered: make(chan struct{}, 4), release: make(chan struct{})}
		h := newHarness(t, func(o *harnessOptions) {
			o.limits = api.Limits{Reads: 2, ReadWait: 50 * time.Millisecond}
			o.wrapReader = func(r api.UserReader) api.UserReader { held.UserReader = r; return held }
		})
		release := holdSlots(t, h, held, 2)
		paths := []string{"/v1/events"} // the event log shares the slots
		for _, r := range pageRoutes {
			paths = append(paths, r.url(nil))
		}
		for _, path := range paths {
			resp := getWithin(t, h, path, testAdminKey) // a server that queued it would hold it for ever
			if code, _ := refusal(resp); resp.Code != http.StatusServiceUnavailable || code != "overloaded" || resp.Header.Get("Retry-After") == "" {
				t.Errorf("GET %s while 2 of 2 read slots are held = %s, want 503 overloaded with Retry-After", path, resp)
			}
		}
		// One item by id is not a list: it is served.
		for _, path := range []string{"/v1/users/user_none", "/v1/organizations/org_none"} {
			if resp := h.get(path, testAPIKey); resp.Code != http.StatusNotFound {
				t.Errorf("GET %s while the read slots are held = %s, want its 404", path, resp)
			}
		}
		release()
		for _, path := range paths {
			if resp := h.get(path, testAdminKey); resp.Code != http.StatusOK {
				t.Errorf("GET %s once the slots are free = %s, want 200", path, resp)
			}
		}
	})

	h := newHarness(t, func(o *harnessOptions) {
		// 50 items of pagePad bytes are more; 50 without it, less.
		o.limits = api.Limits{PageBytes: 64 << 10}
		o.settle = feedSettle
	})
	seedPages(t, h)
	settled()

	t.Run("a page ends at the page's bytes", func(t *testing.T) {
		for _, r := range pageRoutes {
			seen, pages := r.walk(t, h, 200)
			if len(seen) != r.want {
				t.Errorf("%s: walked %d items in pages of %v, want %d", r.name, len(seen), pages, r.want)
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("%s: %s served %d times", r.name, id, n)
				}
			}
			if pages[0] >= r.want {
				t.Errorf("%s: pages of %v items, want the first cut by its bytes", r.name, pages)
			}
		}
	})

	t.Run("one cursor bound", func(t *testing.T) {
		for _, r := range pageRoutes {
			long := h.get(r.url(url.Values{"cursor": {strings.Repeat("a", 1025)}}), testAPIKey)
			if code, msg := refusal(long); long.Code != http.StatusBadRequest || code != "invalid_request" || msg != "cursor must be at most 1024" {
				t.Errorf("%s with a cursor of 1025 characters = %s, want 400 saying it is at most 1024", r.name, long)
			}
			// At the bound, a cursor is read: a page, or not one this API returned.
			at := h.get(r.url(url.Values{"cursor": {strings.Repeat("a", 1024)}}), testAPIKey)
			if at.Code == http.StatusOK {
				continue
			}
			if _, msg := refusal(at); at.Code != http.StatusBadRequest || msg != "cursor is not one this API returned" {
				t.Errorf("%s with a cursor of 1024 characters = %s, want it read", r.name, at)
			}
		}
	})

	t.Run("includeDeleted needs an admin key", func(t *testing.T) {
		for _, r := range pageRoutes {
			path := r.url(url.Values{"includeDeleted": {"true"}})
			byAPI, byAdmin := h.get(path, testAPIKey), h.get(path, testAdminKey)
			if r.feed {
				// The feed always has the deleted items: includeDeleted is
				// no question to ask it, whatever the key.
				for _, resp := range []response{byAPI, byAdmin} {
					if code, msg := refusal(resp); resp.Code != http.StatusBadRequest || code != "invalid_request" || !strings.Contains(msg, "includeDeleted") {
						t.Errorf("%s with includeDeleted = %s, want 400 naming includeDeleted", r.name, resp)
					}
				}
				continue
			}
			if code, msg := refusal(byAPI); byAPI.Code != http.StatusForbidden || code != "forbidden" || msg != "includeDeleted needs an admin key" {
				t.Errorf("%s with includeDeleted and an API key = %s, want 403 saying it needs an admin key", r.name, byAPI)
			}
			if byAdmin.Code != http.StatusOK {
				t.Errorf("%s with includeDeleted and an admin key = %s, want 200", r.name, byAdmin)
			}
		}
	})
}
