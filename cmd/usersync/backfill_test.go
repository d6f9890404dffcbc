package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/clerk"
	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

const testClerkKey = "sk_test_backfillSecretKey0123456789"

// baseUpdatedAt is the Clerk time (Unix ms) of the first generated user.
const baseUpdatedAt = int64(1_700_000_000_000)

// clerkUser returns user i as Clerk's API serves it: the data of the
// user.created fixture with its own id, email, name and updated_at,
// indented as a stored payload may be (its bytes must be kept as they are).
func clerkUser(t testing.TB, i int, updatedAt int64) json.RawMessage {
	t.Helper()
	var env struct {
		Data map[string]any `json:"data"`
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "models", "testdata", "user.created.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	d := env.Data
	d["id"] = userID(i)
	d["first_name"], d["last_name"] = "Person", strconv.Itoa(i)
	d["created_at"], d["updated_at"] = baseUpdatedAt-int64(1000-i), updatedAt
	d["primary_email_address_id"] = fmt.Sprintf("idn_backfill%03d", i)
	d["email_addresses"] = []any{map[string]any{
		"id": fmt.Sprintf("idn_backfill%03d", i), "object": "email_address",
		"email_address": fmt.Sprintf("Person%03d@Example.org", i), "linked_to": []any{},
	}}
	d["public_metadata"] = map[string]any{"n": i}
	raw, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func userID(i int) string { return fmt.Sprintf("user_backfill%03d", i) }

// updatedAt is the Clerk time of user i as someUsers makes it.
func updatedAt(i int) int64 { return baseUpdatedAt + int64(i)*1000 }

// someUsers returns n users, in creation order.
func someUsers(t testing.TB, n int) []json.RawMessage {
	t.Helper()
	users := make([]json.RawMessage, n)
	for i := range users {
		users[i] = clerkUser(t, i, updatedAt(i))
	}
	return users
}

// backfillEnv is what a backfill runs against: a fresh database on the
// test engine, a store on it to check the results, and a fake Clerk.
type backfillEnv struct {
	clerk *clerktest.Server
	store repotest.Store
	env   map[string]string
	seams seams // of every command run in e
}

func newBackfillEnv(t *testing.T, users []json.RawMessage) *backfillEnv {
	t.Helper()
	store, env := repotest.NewStoreEnv(t)
	clerk := clerktest.New(t, users)
	env["CLERK_SECRET_KEY"], env["CLERK_API_URL"] = testClerkKey, clerk.URL
	return &backfillEnv{clerk: clerk, store: store, env: env}
}

// command runs usersync command with args in e and returns its output.
func (e *backfillEnv) command(t *testing.T, command string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runSeams(ctx, append([]string{command}, args...), func(k string) string { return e.env[k] }, &out, os.Stderr, e.seams)
	return out.String(), err
}

// mustCommand runs usersync command and fails the test if it fails.
func (e *backfillEnv) mustCommand(t *testing.T, command string, args ...string) string {
	t.Helper()
	out, err := e.command(t, command, args...)
	if err != nil {
		t.Fatalf("%s %v = %v\n%s", command, args, err, out)
	}
	return out
}

func (e *backfillEnv) backfill(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return e.command(t, "backfill", args...)
}

func (e *backfillEnv) mustBackfill(t *testing.T, args ...string) string {
	t.Helper()
	return e.mustCommand(t, "backfill", args...)
}

// user returns the stored user, deleted or not; ok is false when unknown.
func (e *backfillEnv) user(t *testing.T, userID string) (u models.User, ok bool) {
	t.Helper()
	u, err := e.store.Users().Get(context.Background(), userID)
	if errors.Is(err, models.ErrNotFound) {
		return models.User{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

// events counts the events of the log that f selects.
func (e *backfillEnv) events(t *testing.T, f models.EventFilter) int {
	t.Helper()
	n := 0
	f.Limit = 500
	for {
		page, err := e.store.Events().List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Events)
		if page.NextCursor == "" {
			return n
		}
		f.After = page.NextCursor
	}
}

// users counts the users, deleted ones with includeDeleted.
func (e *backfillEnv) users(t *testing.T, includeDeleted bool) int {
	t.Helper()
	n := 0
	f := models.UserFilter{Limit: 500, IncludeDeleted: includeDeleted}
	for {
		page, err := e.store.Users().List(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Users)
		if page.NextCursor == "" {
			return n
		}
		f.After = page.NextCursor
	}
}

// ingest applies a webhook body through the sync service, as the webhook
// endpoint does.
func (e *backfillEnv) ingest(t *testing.T, eventID string, body []byte) sync.Result {
	t.Helper()
	ev, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	svc := sync.New(e.store.Events(), e.store, nil)
	res, err := svc.Ingest(context.Background(), sync.Delivery{EventID: eventID, Signature: "v1,test", Body: body, Event: ev})
	if err != nil {
		t.Fatalf("ingest %s: %v", eventID, err)
	}
	return res
}

// webhook wraps a user object in a Clerk webhook envelope.
func webhook(t testing.TB, typ string, timestamp int64, data any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"object": "event", "type": typ, "timestamp": timestamp, "data": data})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shortRetries makes server-error retries of e's commands quick.
func (e *backfillEnv) shortRetries() {
	r := clerk.DefaultRetry
	r.Backoff = time.Millisecond
	e.seams.clerkRetry = &r
}

func wantLine(t *testing.T, out, line string) {
	t.Helper()
	if !strings.Contains(out, line+"\n") {
		t.Errorf("output lacks %q:\n%s", line, out)
	}
}

func TestBackfill_AppliesEveryUserOfEveryPage(t *testing.T) {
	t.Parallel()
	users := someUsers(t, 5)
	e := newBackfillEnv(t, users)
	out := e.mustBackfill(t, "-limit", "2")

	reqs := e.clerk.Requests()
	if got := clerktest.Offsets(reqs); got != "0,2,4" {
		t.Errorf("offsets read = %s, want 0,2,4", got)
	}
	for _, r := range reqs {
		wantOrder := "+created_at"
		if r.Path == "/v1/billing/subscription_items" {
			wantOrder = "" // Clerk's only order: the newest first
		}
		if r.Auth != "Bearer "+testClerkKey || r.Limit != "2" || r.OrderBy != wantOrder {
			t.Errorf("request at offset %s: Authorization %q, limit %q, order_by %q; want the key as a bearer token, 2, +created_at",
				r.Offset, r.Auth, r.Limit, r.OrderBy)
		}
	}
	for i := range users {
		u, ok := e.user(t, userID(i))
		if !ok {
			t.Errorf("user %s was not applied", userID(i))
			continue
		}
		eventID := fmt.Sprintf("backfill_%s_%d", userID(i), updatedAt(i))
		want := fmt.Sprintf("person%03d@example.org|Person %d|%s|%s|{\"n\":%d}", i, i,
			time.UnixMilli(updatedAt(i)).UTC().Format(time.RFC3339Nano), eventID, i)
		got := fmt.Sprintf("%s|%s|%s|%s|%s", u.Email, u.DisplayName,
			u.SourceUpdatedAt.Format(time.RFC3339Nano), u.LastEventID, u.Metadata)
		if got != want || u.Deleted() {
			t.Errorf("user %s = %s (deleted %v), want %s", userID(i), got, u.Deleted(), want)
		}

		ev, err := e.store.Events().Get(context.Background(), eventID)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != models.TypeUserUpdated || ev.Status != models.StatusProcessed ||
			ev.Outcome != models.OutcomeApplied || ev.SignatureValid != nil || ev.Source != models.SourceClerk {
			t.Errorf("event %s: type %s, status %s, outcome %s, signatureValid %v, source %s; want user.updated, processed, applied, null, clerk",
				eventID, ev.Type, ev.Status, ev.Outcome, ev.SignatureValid, ev.Source)
		}
		if !bytes.Contains(ev.RawBody, users[i]) {
			t.Errorf("event %s does not keep the user's bytes as Clerk sent them:\n%s", eventID, ev.RawBody)
		}
	}
	wantLine(t, out, "backfill: offset 0: 2 users (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: offset 2: 2 users (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: offset 4: 1 user (applied 1, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, offsets 0 to 5: 5 users (applied 5, stale 0, deleted 0, duplicate 0, failed 0)")
	for _, s := range []string{testClerkKey, "@example.org", "Person 1"} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
			t.Errorf("output contains %q:\n%s", s, out)
		}
	}
}

func TestBackfill_WaitsOutA429(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 3))
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Offset == "2" && before == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"errors":[{"code":"too_many_requests"}]}`, http.StatusTooManyRequests)
			return http.StatusTooManyRequests
		}
		return 0
	})
	out := e.mustBackfill(t, "-limit", "2")

	reqs := e.clerk.Requests()
	if got := clerktest.Offsets(reqs); got != "0,2,2" {
		t.Fatalf("offsets read = %s, want 0,2,2 (the throttled page again)", got)
	}
	var list []clerktest.Request // the user list's, among the other lists'
	for _, r := range reqs {
		if r.Path == "/v1/users" {
			list = append(list, r)
		}
	}
	if waited := list[2].At.Sub(list[1].At); waited < time.Second {
		t.Errorf("retried the throttled page after %v, want at least the Retry-After of 1s", waited)
	}
	wantLine(t, out, "backfill: offset 2: rate limited by Clerk, waiting 1s")
	wantLine(t, out, "backfill: done, offsets 0 to 3: 3 users (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")
	if n := e.users(t, true); n != 3 {
		t.Errorf("%d users stored, want 3", n)
	}
}

func TestBackfill_ARerunCompletesAnInterruptedRun(t *testing.T) {
	t.Parallel()
	// Four users: the last page is empty, which ends the run too.
	e := newBackfillEnv(t, someUsers(t, 4))
	e.shortRetries()
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		if r.Offset == "2" {
			http.Error(w, `{"errors":[{"code":"internal_error"}]}`, http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		return 0
	})
	out, err := e.backfill(t, "-limit", "2")
	if err == nil || !strings.Contains(err.Error(), "offset 2") || !strings.Contains(err.Error(), "-offset 2") ||
		!strings.Contains(err.Error(), "500") {
		t.Fatalf("interrupted backfill = %v, want an error naming the status, offset 2 and how to resume\n%s", err, out)
	}
	if got, want := clerktest.Offsets(e.clerk.Requests()), "0"+strings.Repeat(",2", clerk.DefaultRetry.Tries); got != want {
		t.Errorf("offsets read = %s, want %s (a few tries of the failing page)", got, want)
	}
	for i := range 4 {
		if _, ok := e.user(t, userID(i)); ok != (i < 2) {
			t.Errorf("after the interrupted run, user %d stored = %v, want %v", i, ok, i < 2)
		}
	}

	e.clerk.SetAnswer(nil)
	out = e.mustBackfill(t, "-limit", "2")
	if got := clerktest.Offsets(e.clerk.Requests()); got != "0,2,4" {
		t.Errorf("rerun read offsets %s, want 0,2,4", got)
	}
	wantLine(t, out, "backfill: offset 0: 2 users (applied 0, stale 0, deleted 0, duplicate 2, failed 0)")
	wantLine(t, out, "backfill: offset 2: 2 users (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, offsets 0 to 4: 4 users (applied 2, stale 0, deleted 0, duplicate 2, failed 0)")

	// Resuming where it stopped reads only from there.
	out = e.mustBackfill(t, "-limit", "2", "-kinds", "users", "-offset", "2")
	if got := clerktest.Offsets(e.clerk.Requests()); got != "2,4" {
		t.Errorf("run with -offset 2 read offsets %s, want 2,4", got)
	}
	wantLine(t, out, "backfill: done, offsets 2 to 4: 2 users (applied 0, stale 0, deleted 0, duplicate 2, failed 0)")

	for i := range 4 {
		if _, ok := e.user(t, userID(i)); !ok {
			t.Errorf("user %d not stored", i)
		}
		if n := e.events(t, models.EventFilter{UserID: userID(i)}); n != 1 {
			t.Errorf("user %d has %d events, want 1", i, n)
		}
	}
}

func TestBackfill_NeverOverwritesNewerStateOrRevivesDeletedUsers(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 3))
	// User 0 changed after Clerk's list was read; user 1 was deleted, the
	// delete even stamped before the state the backfill reads.
	var newer map[string]any
	if err := json.Unmarshal(clerkUser(t, 0, updatedAt(0)+60_000), &newer); err != nil {
		t.Fatal(err)
	}
	newer["first_name"] = "Renamed"
	e.ingest(t, "msg_newer", webhook(t, models.TypeUserUpdated, updatedAt(0)+60_000, newer))
	e.ingest(t, "msg_deleted", webhook(t, models.TypeUserDeleted, updatedAt(1)-60_000,
		map[string]any{"id": userID(1), "object": "user", "deleted": true}))

	out := e.mustBackfill(t)
	wantLine(t, out, "backfill: done, offsets 0 to 3: 3 users (applied 1, stale 1, deleted 1, duplicate 0, failed 0)")

	if u, _ := e.user(t, userID(0)); u.DisplayName != "Renamed 0" || u.LastEventID != "msg_newer" {
		t.Errorf("user 0 = %q from %s, want the newer state (Renamed 0, msg_newer)", u.DisplayName, u.LastEventID)
	}
	if u, _ := e.user(t, userID(1)); !u.Deleted() || u.Email != "" || u.LastEventID != "msg_deleted" {
		t.Errorf("user 1: deleted %v, email %q, last event %s; want it to stay deleted", u.Deleted(), u.Email, u.LastEventID)
	}
	if u, ok := e.user(t, userID(2)); !ok || u.Email != "person002@example.org" {
		t.Errorf("user 2 = %+v, want the backfilled state", u)
	}
	for _, tc := range []struct {
		user    int
		outcome models.Outcome
	}{{0, models.OutcomeStale}, {1, models.OutcomeDeleted}, {2, models.OutcomeApplied}} {
		id := fmt.Sprintf("backfill_%s_%d", userID(tc.user), updatedAt(tc.user))
		if ev, err := e.store.Events().Get(context.Background(), id); err != nil || ev.Outcome != tc.outcome {
			t.Errorf("event %s: outcome %q (%v), want %s", id, ev.Outcome, err, tc.outcome)
		}
	}
}

func TestBackfill_CountsUsersItCannotApplyAndGoesOn(t *testing.T) {
	t.Parallel()
	users := someUsers(t, 4)
	// User 1 has no updated_at; user 2's public metadata is not an object.
	users[1] = bytes.Replace(users[1], []byte(`"updated_at"`), []byte(`"updated"`), 1)
	var d map[string]any
	if err := json.Unmarshal(users[2], &d); err != nil {
		t.Fatal(err)
	}
	d["public_metadata"] = []any{"not", "an", "object"}
	users[2], _ = json.Marshal(d)
	e := newBackfillEnv(t, users)

	out := e.mustBackfill(t)
	wantLine(t, out, "backfill: done, offsets 0 to 4: 4 users (applied 2, stale 0, deleted 0, duplicate 0, failed 2)")
	for _, id := range []string{userID(1), userID(2)} {
		if !strings.Contains(out, "user "+id+" not applied: ") {
			t.Errorf("output does not say that %s was not applied:\n%s", id, out)
		}
	}
	for i, want := range []bool{true, false, false, true} {
		if _, ok := e.user(t, userID(i)); ok != want {
			t.Errorf("user %d stored = %v, want %v", i, ok, want)
		}
	}
	if n := e.events(t, models.EventFilter{Status: models.StatusFailed}); n != 2 {
		t.Errorf("%d failed events, want 2 (kept for a replay)", n)
	}
}

func TestBackfill_StopsAtOnceWhenClerkRefuses(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"errors":[{"message":"Invalid authentication","long_message":"%s is not a valid key","code":"authentication_invalid"}]}`, strings.TrimPrefix(r.Auth, "Bearer "))
		return http.StatusUnauthorized
	})
	out, err := e.backfill(t)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "authentication_invalid") ||
		!strings.Contains(err.Error(), "offset 0") {
		t.Fatalf("backfill = %v, want the status and Clerk's error, at offset 0", err)
	}
	if strings.Contains(err.Error(), testClerkKey) || strings.Contains(out, testClerkKey) {
		t.Errorf("the secret key is shown:\n%v\n%s", err, out)
	}
	if got := clerktest.Offsets(e.clerk.Requests()); got != "0" {
		t.Errorf("offsets read = %s, want 0 (no retry of a refusal)", got)
	}
}

func TestBackfill_RequiresTheSecretKey(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	delete(e.env, "CLERK_SECRET_KEY")
	if _, err := e.backfill(t); err == nil || !strings.Contains(err.Error(), "CLERK_SECRET_KEY") {
		t.Errorf("backfill without a key = %v, want an error naming CLERK_SECRET_KEY", err)
	}
	if reqs := e.clerk.Requests(); len(reqs) != 0 {
		t.Errorf("Clerk was asked %d times, want none", len(reqs))
	}
}

func TestBackfill_RefusesBadFlagsAndURLs(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	tests := []struct {
		name string
		args []string
		url  string
		want string
	}{
		{"a limit of 0", []string{"-limit", "0"}, "", "-limit"},
		{"a limit above Clerk's 500", []string{"-limit", "501"}, "", "-limit"},
		{"a negative offset", []string{"-offset", "-1"}, "", "-offset"},
		{"an offset without its one kind", []string{"-offset", "2"}, "", "-kinds"},
		{"an offset in two lists", []string{"-offset", "2", "-kinds", "users,memberships"}, "", "-kinds"},
		{"a kind usersync does not know", []string{"-kinds", "users,sessions"}, "", "sessions"},
		{"a URL that is not http", nil, "ftp://api.clerk.com/v1", "CLERK_API_URL"},
		{"plain http to another host", nil, "http://api.clerk.com/v1", "CLERK_API_URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := *e
			env.env = map[string]string{}
			for k, v := range e.env {
				env.env[k] = v
			}
			if tc.url != "" {
				env.env["CLERK_API_URL"] = tc.url
			}
			if _, err := env.backfill(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("backfill %v = %v, want an error naming %s", tc.args, err, tc.want)
			}
		})
	}
	if reqs := e.clerk.Requests(); len(reqs) != 0 {
		t.Errorf("Clerk was asked %d times, want none", len(reqs))
	}
}

func TestBackfill_RefusesAnEmbeddedStoreInUse(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	if _, ok := e.env["MONGODB_URI"]; ok {
		t.Skip("the embedded store's lock")
	}
	unlock, err := lockDir(e.env["USERSYNC_DATA_DIR"])
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := e.backfill(t); err == nil || !strings.Contains(err.Error(), "in use by another usersync process") {
		t.Errorf("backfill while a server holds the engine = %v, want an error saying it is in use", err)
	}
}
