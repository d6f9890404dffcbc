package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// feedSettle is the change feed's settle time in these tests: short, so
// that a test waits only a few milliseconds for its changes to be served.
const feedSettle = 2 * time.Millisecond

// settled waits until every change made so far is old enough to be served.
func settled() { time.Sleep(3 * feedSettle) }

// feedPage reads one page of the change feed.
func (h *harness) feedPage(since, cursor string, limit int) (data []map[string]any, next string) {
	h.t.Helper()
	q := url.Values{"updatedSince": {since}, "limit": {fmt.Sprint(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	r := h.get("/v1/users?"+q.Encode(), testAPIKey)
	if r.Code != http.StatusOK {
		h.t.Fatalf("feed page: %s", r)
	}
	body := r.JSON(h.t)
	next, ok := body["nextCursor"].(string)
	if !ok || next == "" {
		h.t.Fatalf("feed page without nextCursor: %s", r)
	}
	for _, u := range body["data"].([]any) {
		data = append(data, u.(map[string]any))
	}
	return data, next
}

func TestUsers_ChangeFeedReturnsEveryChangeOnceWhileUsersChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = feedSettle })
	since := time.Now().UTC().Format(time.RFC3339Nano)
	const users, limit = 12, 4
	at := map[string]int64{} // each user's newest Clerk time
	write := func(i int) {
		id := fmt.Sprintf("user_c%02d", i)
		at[id] += 1000
		h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: id, UpdatedAt: t0 + at[id], Email: id + "@example.com"}))
	}
	for i := range users {
		write(i)
	}
	settled()

	// Walk the feed; after every page, change users already served and
	// users not yet served, and delete one.
	type change struct{ userID, updatedAt string }
	seen := map[change]int{}
	last := map[string]map[string]any{}
	var order []string
	cursor, pages := "", 0
	for {
		data, next := h.feedPage(since, cursor, limit)
		pages++
		for _, u := range data {
			seen[change{u["userId"].(string), u["updatedAt"].(string)}]++
			last[u["userId"].(string)] = u
			order = append(order, u["updatedAt"].(string))
		}
		if pages <= 3 {
			write(pages - 1)     // served already: must come again
			write(users - pages) // not served yet: must come once
			if pages == 2 {
				h.mustDeliver(newID(), deleteBody(t, "user_c05", t0+100_000))
			}
			settled()
		}
		if len(data) < limit && pages > 3 {
			break
		}
		if pages > 20 {
			t.Fatal("the feed does not end")
		}
		cursor = next
	}

	for c, n := range seen {
		if n != 1 {
			t.Errorf("change %v served %d times", c, n)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("changes are not oldest first: %v", order)
	}
	if len(last) != users {
		t.Errorf("the feed served %d users, want %d", len(last), users)
	}
	for id, u := range last {
		cur := h.user(id)
		if u["updatedAt"] != cur["updatedAt"] {
			t.Errorf("%s: last change served has updatedAt %v, the user has %v (a change was skipped)", id, u["updatedAt"], cur["updatedAt"])
		}
	}
	tomb := last["user_c05"]
	keys := make([]string, 0, len(tomb))
	for k := range tomb {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"createdAt", "deletedAt", "updatedAt", "userId"}; !slices.Equal(keys, want) || tomb["deletedAt"] == nil {
		t.Errorf("tombstone in the feed = %v, want only %v", tomb, want)
	}
}

func TestUsers_ChangeFeedCaughtUpKeepsACursorToPollWith(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = feedSettle })
	since := time.Now().UTC().Format(time.RFC3339Nano)
	data, cursor := h.feedPage(since, "", 10)
	if len(data) != 0 {
		t.Fatalf("empty feed served %v", data)
	}
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_poll", UpdatedAt: t0, Email: "poll@example.com"}))
	settled()
	data, cursor = h.feedPage(since, cursor, 10)
	if len(data) != 1 || data[0]["userId"] != "user_poll" || data[0]["email"] != "poll@example.com" {
		t.Fatalf("poll = %v, want user_poll", data)
	}
	again, next := h.feedPage(since, cursor, 10)
	if len(again) != 0 || next != cursor {
		t.Errorf("poll when caught up = %v, %q; want nothing and the same cursor %q", again, next, cursor)
	}
}

func TestUsers_ChangeFeedHoldsBackChangesYoungerThanTheSettleTime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.settle = time.Hour })
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_young", UpdatedAt: t0}))
	if data, _ := h.feedPage(since, "", 10); len(data) != 0 {
		t.Errorf("the feed served a change younger than its settle time: %v", data)
	}
}

func TestUsers_ChangeFeedRejectsBadParameters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, q := range []string{
		"updatedSince=yesterday",
		"updatedSince=2026-01-02",
		"updatedSince=2026-01-02T03:04:05Z&email=a@example.com",
		"updatedSince=2026-01-02T03:04:05Z&includeDeleted=true",
		"updatedSince=2026-01-02T03:04:05Z&cursor=6740c1aa0000000000000000",
		"updatedSince=2026-01-02T03:04:05Z&limit=201",
	} {
		key := testAPIKey
		if r := h.get("/v1/users?"+q, key); r.Code != http.StatusBadRequest || r.JSON(t)["error"].(map[string]any)["code"] != "invalid_request" {
			t.Errorf("GET /v1/users?%s = %s, want 400 invalid_request", q, r)
		}
	}
}
