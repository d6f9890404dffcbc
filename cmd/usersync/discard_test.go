package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// TestDiscard_TheCommandDiscardsOneFailedEventWithItsReason: `usersync
// discard <eventId> -reason ...` keeps the event as discarded, with the
// reason and the command line's user; a later replay leaves it, a second
// discard and one of a processed event fail, naming why.
func TestDiscard_TheCommandDiscardsOneFailedEventWithItsReason(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getenv, store := replayEnv(t)
	refused := sync.New(store.Events(), refusing(store), nil)
	if res, err := deliver(t, refused, "msg_poison", userJSON("user_poison", 2000, "p@example.com")); err == nil || res.Status != models.StatusFailed {
		t.Fatalf("delivery = %+v, %v; want failed", res, err)
	}
	svc := sync.New(store.Events(), store, nil)
	if _, err := deliver(t, svc, "msg_fine", userJSON("user_fine", 2000, "f@example.com")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"discard", "-reason", "x"}, "name the event"},
		{[]string{"discard", "msg_poison"}, "-reason is required"},
		{[]string{"discard", "msg_poison", "-reason", strings.Repeat("x", models.MaxDiscardReason+1)}, "longer than 1000 bytes"},
		{[]string{"discard", "msg_unknown", "-reason", "x"}, `no event has the id or svix-id "msg_unknown"`},
		{[]string{"discard", "msg_fine", "-reason", "x"}, "only a failed event can be discarded"},
	} {
		var out bytes.Buffer
		if err := run(ctx, tc.args, getenv, &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("usersync %v = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}

	var out bytes.Buffer
	if err := run(ctx, []string{"discard", "msg_poison", "-reason", "  user removed by hand  "}, getenv, &out); err != nil {
		t.Fatalf("usersync discard: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "msg_poison user.updated") || !strings.Contains(out.String(), "by command line (") ||
		!strings.HasSuffix(out.String(), ": user removed by hand\n") {
		t.Errorf("usersync discard printed %q", out.String())
	}
	ev, err := store.Events().Get(ctx, "msg_poison")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != models.StatusDiscarded || ev.Discarded == nil || ev.Discarded.Reason != "user removed by hand" ||
		!strings.HasPrefix(ev.Discarded.By, "command line (") {
		t.Errorf("the event = %+v (discarded %+v), want discarded with the reason, by the command line", ev, ev.Discarded)
	}
	if err := run(ctx, []string{"discard", "msg_poison", "-reason", "again"}, getenv, &out); err == nil || !strings.Contains(err.Error(), "discarded already") {
		t.Errorf("a second discard = %v, want it refused", err)
	}
	out.Reset()
	if err := run(ctx, []string{"replay", "-status", "failed"}, getenv, &out); err != nil {
		t.Fatal(err)
	}
	if u, err := store.Users().Get(ctx, "user_poison"); err == nil {
		t.Errorf("replay applied the discarded event: %+v", u)
	}
}
