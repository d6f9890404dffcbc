package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// replayEnv points usersync at a fresh database on the test engine and
// returns the environment and a store on that database.
func replayEnv(t *testing.T) (func(string) string, repotest.Store) {
	t.Helper()
	store, env := repotest.NewStoreEnv(t)
	return func(k string) string { return env[k] }, store
}

func deliver(t *testing.T, svc *sync.Service, id string, body string) (sync.Result, error) {
	t.Helper()
	ev, err := models.DecodeEvent([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return svc.Ingest(context.Background(), sync.Delivery{EventID: id, Signature: "v1,x", Body: []byte(body), Event: ev})
}

func userJSON(id string, updatedAt int, email string) string {
	return fmt.Sprintf(`{"type":"user.updated","timestamp":%d,"data":{"id":%q,"updated_at":%d,"primary_email_address_id":"idn_1","email_addresses":[{"id":"idn_1","email_address":%q}]}}`,
		updatedAt, id, updatedAt, email)
}

func TestReplay_ReprocessesFailedEventsInBulk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	getenv, store := replayEnv(t)
	svc := sync.New(store.Events(), store, nil)
	if _, err := deliver(t, svc, "msg_holder", userJSON("user_holder", 1000, "taken@example.com")); err != nil {
		t.Fatal(err)
	}
	// The users store refuses these three at first, as a database that
	// cannot write for a while would.
	refused := sync.New(store.Events(), refusing(store), nil)
	for i := range 3 {
		res, err := deliver(t, refused, fmt.Sprintf("msg_blocked_%d", i), userJSON(fmt.Sprintf("user_b%d", i), 2000+i, "taken@example.com"))
		if err == nil || res.Status != models.StatusFailed {
			t.Fatalf("blocked delivery %d = %+v, %v; want failed", i, res, err)
		}
	}

	var out bytes.Buffer
	if err := run(ctx, []string{"replay", "-status", "failed", "-dry-run"}, getenv, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "dry run: 3 failed events would be replayed") || !strings.Contains(out.String(), "msg_blocked_0") {
		t.Errorf("dry run printed:\n%s", out.String())
	}
	if st, _ := store.Events().Stats(ctx); st.ByStatus[models.StatusFailed] != 3 {
		t.Fatalf("a dry run changed events: %+v", st)
	}

	// A replay applies them in Clerk's order: each newer state takes the
	// email from the older holder.
	out.Reset()
	if err := run(ctx, []string{"replay", "-status", "failed", "-since", "1h"}, getenv, &out); err != nil {
		t.Fatal(err)
	}
	if want := "replay: 3 events: processed 3 (applied 3, stale 0, deleted 0), failed 0, skipped 0"; !strings.Contains(out.String(), want) {
		t.Errorf("replay printed:\n%s\nwant %q", out.String(), want)
	}
	if u, err := store.Users().Get(ctx, "user_b2"); err != nil || u.Email != "taken@example.com" {
		t.Errorf("user_b2 = %+v, %v", u, err)
	}

	out.Reset()
	if err := run(ctx, []string{"replay", "-status", "failed", "-since", time.Now().Add(time.Hour).Format(time.RFC3339)}, getenv, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "replay: 0 events") {
		t.Errorf("replay since the future printed:\n%s", out.String())
	}
}

func TestReplay_RefusesProcessedEvents(t *testing.T) {
	t.Parallel()
	getenv, _ := replayEnv(t)
	err := run(context.Background(), []string{"replay", "-status", "processed"}, getenv, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "processed ones are final") {
		t.Errorf("replay -status processed = %v, want a refusal", err)
	}
}

// refusing is s's deliveries, which cannot apply anything yet.
func refusing(s repository.Store) sync.Store {
	return repotest.Hook(s, func(context.Context, models.Change) error {
		return fmt.Errorf("test: %w", models.ErrRetryLater)
	})
}

func TestReplayTally_CountsEveryKindsDeletionAsDeleted(t *testing.T) {
	t.Parallel()
	var tally replayTally
	tally.add(sync.Replayed{Result: sync.Result{Status: models.StatusProcessed, Outcome: models.OutcomeApplied}})
	if got, want := tally.line(), "processed 1 (applied 1, stale 0, deleted 0)"; !strings.Contains(got, want) {
		t.Errorf("line = %q, want %q", got, want)
	}
	tally.add(sync.Replayed{Result: sync.Result{Status: models.StatusProcessed, Outcome: models.OutcomeDeleted}})
	if got, want := tally.line(), "processed 2 (applied 1, stale 0, deleted 1)"; !strings.Contains(got, want) {
		t.Errorf("line = %q, want %q", got, want)
	}
}
