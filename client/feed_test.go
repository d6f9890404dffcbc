package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/client"
)

// feedUser is the user.created fixture as the user user_2feed<i>, with
// an email of its own.
func feedUser(t *testing.T, i int) []byte {
	t.Helper()
	return edit(t, "user.created.json", func(d map[string]any) {
		d["id"] = fmt.Sprintf("user_2feed%d", i)
		d["email_addresses"].([]any)[0].(map[string]any)["email_address"] = fmt.Sprintf("feed%d@example.com", i)
	})
}

// ids are the user ids of a walk's pages, and whether each is deleted.
func ids(pages []client.Changes[client.User]) []string {
	var out []string
	for _, p := range pages {
		for _, u := range p.Items {
			id := u.UserID
			if u.DeletedAt != nil {
				id += " deleted"
			}
			out = append(out, id)
		}
	}
	return out
}

// TestClient_WalksTheChangeFeedFromASavedCursor: a walk that saved its
// cursor after a page goes on, in another client, from the next change:
// no user is skipped or read twice. Walked again from the cursor it then
// saved, the feed has what changed since: an update, a deletion (as its
// tombstone) and a new user.
func TestClient_WalksTheChangeFeedFromASavedCursor(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for i := range 5 {
		s.deliver(feedUser(t, i))
	}
	s.settled()
	ctx := context.Background()

	feed := client.New(s.url, apiKey, client.Options{}).UserChanges(client.FeedOptions{Limit: 2})
	first, err := feed.Next(ctx)
	if err != nil || len(first.Items) != 2 || first.CaughtUp || feed.Cursor() != first.Cursor || first.Cursor == "" {
		t.Fatalf("the first page: %+v, %v; want two users and where to go on", first, err)
	}
	saved := first.Cursor

	resumed := client.New(s.url, apiKey, client.Options{}).UserChanges(client.FeedOptions{Cursor: saved, Limit: 2})
	pages := collect(t, resumed.Pages(ctx))
	if got, want := ids(pages), []string{"user_2feed2", "user_2feed3", "user_2feed4"}; !slices.Equal(got, want) || len(pages) != 2 || !pages[1].CaughtUp {
		t.Fatalf("from the saved cursor: %q in %d pages, want %q, then caught up", got, len(pages), want)
	}
	saved = resumed.Cursor()

	s.deliver(edit(t, "user.updated.json", func(d map[string]any) { d["id"] = "user_2feed1" }))
	s.deliver(edit(t, "user.deleted.json", func(d map[string]any) { d["id"] = "user_2feed3" }))
	s.deliver(feedUser(t, 5))
	s.settled()
	again := client.New(s.url, apiKey, client.Options{}).UserChanges(client.FeedOptions{Cursor: saved})
	pages = collect(t, again.Pages(ctx))
	if got, want := ids(pages), []string{"user_2feed1", "user_2feed3 deleted", "user_2feed5"}; !slices.Equal(got, want) {
		t.Errorf("the changes since: %q, want %q", got, want)
	}
	if u := pages[0].Items[0]; u.FirstName == nil || *u.FirstName != "Jordan" {
		t.Errorf("the updated user comes as %+v, want its new state whole", u)
	}

	// A walk that stops inside a page leaves the cursor before it.
	stopped := client.New(s.url, apiKey, client.Options{}).UserChanges(client.FeedOptions{Cursor: saved})
	for range stopped.Pages(ctx) {
		break
	}
	if stopped.Cursor() != saved {
		t.Errorf("a walk broken out of moved the cursor")
	}
}

// TestClient_FollowsTheChangeFeedUntilItsContextEnds: caught up, Follow
// polls again and yields what changed meanwhile.
func TestClient_FollowsTheChangeFeedUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.deliver(feedUser(t, 0))
	s.settled()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	feed := client.New(s.url, apiKey, client.Options{}).UserChanges(client.FeedOptions{})
	for ch, err := range feed.Follow(ctx, 10*time.Millisecond) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids([]client.Changes[client.User]{ch})...)
		switch len(got) {
		case 1:
			s.deliver(feedUser(t, 1))
		case 2:
			cancel()
		}
	}
	if want := []string{"user_2feed0", "user_2feed1"}; !slices.Equal(got, want) || ctx.Err() == nil {
		t.Errorf("followed %q, want %q until the context ended", got, want)
	}
}
