package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestStandin_ServesTheFixturesInOffsetPagesAndA429EveryNthRequest runs
// the program on the walkthrough's fixtures.
func TestStandin_ServesTheFixturesInOffsetPagesAndA429EveryNthRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-fixtures", "../../testdata/clerk-standin", "-throttle-every", "3", "-retry-after", "0"},
			io.Discard, func(u string) { urls <- u })
	}()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatalf("the stand-in stopped: %v", err)
	}
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var ids []string
	for i, path := range []string{"/users?limit=5&offset=0", "/users?limit=5&offset=5", "/users?limit=5&offset=5"} {
		code, body := get(path)
		if i == 2 {
			if code != http.StatusTooManyRequests {
				t.Errorf("request 3 = %d, want 429", code)
			}
			continue
		}
		var page []struct {
			ID string `json:"id"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		for _, u := range page {
			ids = append(ids, u.ID)
		}
	}
	if len(ids) != 8 || ids[0] != "user_standin00" || ids[7] != "user_standin07" {
		t.Errorf("the users' pages = %v, want the 8 of the fixtures in order", ids)
	}
	if code, body := get("/organization_memberships?limit=10&offset=0"); code != http.StatusOK || !json.Valid(body) {
		t.Errorf("memberships = %d %s", code, body)
	}
	// Past the 429 of every 3rd request: two in a row are never both 429.
	getPast429 := func(path string) (int, []byte) {
		t.Helper()
		if code, body := get(path); code != http.StatusTooManyRequests {
			return code, body
		}
		return get(path)
	}
	// The free plan's item only with include_free=true, as Clerk lists them.
	for _, tc := range []struct {
		query string
		want  int
	}{{"", 2}, {"&include_free=true", 3}} {
		var page struct {
			Data []json.RawMessage `json:"data"`
		}
		code, body := getPast429("/billing/subscription_items?limit=10&offset=0" + tc.query)
		if code != http.StatusOK || json.Unmarshal(body, &page) != nil || len(page.Data) != tc.want {
			t.Errorf("subscription items%s = %d %s, want %d items", tc.query, code, body, tc.want)
		}
	}
	// Every invitation, of every status, in creation order.
	var invs struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
	}
	code, body := getPast429("/organization_invitations?limit=10&offset=0")
	if code != http.StatusOK || json.Unmarshal(body, &invs) != nil || len(invs.Data) != 3 || invs.Data[0].ID != "orginv_standin00" {
		t.Errorf("invitations = %d %s, want the 3 of the fixtures in order", code, body)
	}
	if code, _ := getPast429("/users/user_standin03"); code != http.StatusOK {
		t.Errorf("one user = %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the stand-in stopped with %v", err)
	}
}
