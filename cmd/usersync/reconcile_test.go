package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
)

func (e *backfillEnv) reconcile(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return e.command(t, "reconcile", args...)
}

func (e *backfillEnv) mustReconcile(t *testing.T, args ...string) string {
	t.Helper()
	return e.mustCommand(t, "reconcile", args...)
}

// created writes user i as a webhook user.created would, so that it is a
// local user first written now.
func (e *backfillEnv) created(t *testing.T, i int) {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(clerkUser(t, i, updatedAt(i)), &d); err != nil {
		t.Fatal(err)
	}
	e.ingest(t, fmt.Sprintf("msg_created_%d", i), webhook(t, models.TypeUserCreated, updatedAt(i), d))
}

// active reports whether user i is stored and not deleted.
func (e *backfillEnv) active(t *testing.T, i int) bool {
	t.Helper()
	u, ok := e.user(t, userID(i))
	return ok && !u.Deleted()
}

// userRequests lists the single-user requests among reqs.
func userRequests(reqs []clerktest.Request) []string {
	var ids []string
	for _, r := range reqs {
		if id, ok := strings.CutPrefix(r.Path, "/v1/users/"); ok && !strings.Contains(id, "/") {
			ids = append(ids, id)
		}
	}
	return ids
}

var summaryLine = regexp.MustCompile(`(?m)^reconcile: (done|dry run, nothing changed|refused.*|stopped.*): (users in Clerk .*)$`)

// summary returns the counts of the run's summary line.
func runSummary(t *testing.T, out string) string {
	t.Helper()
	m := summaryLine.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("want one summary line, got %d:\n%s", len(m), out)
	}
	return m[0][2]
}

func TestReconcile_DeletesAUserDeletedInClerkDuringAWebhookOutage(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 3))
	for i := range 3 {
		e.created(t, i)
	}
	// Webhooks were down while user 1 was deleted in Clerk.
	e.clerk.Remove(userID(1))
	// And a webhook delete of another user, for comparison.
	e.created(t, 7)
	e.ingest(t, "msg_deleted_7", webhook(t, models.TypeUserDeleted, updatedAt(7),
		map[string]any{"id": userID(7), "object": "user", "deleted": true}))

	before := time.Now().UTC().Truncate(time.Millisecond)
	out := e.mustReconcile(t)
	after := time.Now()

	if got, want := runSummary(t, out), "users in Clerk 2, local users 3, applied 0, stale 0, deleted 1, unchanged 2, failed 0"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	wantLine(t, out, "reconcile: user "+userID(1)+": absent from Clerk: deleted")
	if got := userRequests(e.clerk.Requests()); strings.Join(got, ",") != userID(1) {
		t.Errorf("users read one by one = %v, want just %s (the re-check before deleting)", got, userID(1))
	}

	u, _ := e.user(t, userID(1))
	webhookDeleted, _ := e.user(t, userID(7))
	if !u.Deleted() || u.Email != "" || u.DisplayName != userID(1) || string(u.Metadata) != string(webhookDeleted.Metadata) {
		t.Errorf("user 1 = %+v, want a tombstone like a webhook delete's (%+v)", u, webhookDeleted)
	}
	if u.DeletedAt.Before(before) || u.DeletedAt.After(after) || !u.SourceUpdatedAt.Equal(*u.DeletedAt) {
		t.Errorf("user 1 deleted at %v (source %v), want the start of the listing, between %v and %v",
			u.DeletedAt, u.SourceUpdatedAt, before, after)
	}
	eventID := fmt.Sprintf("reconcile_delete_%s_%d", userID(1), u.DeletedAt.UnixMilli())
	if u.LastEventID != eventID {
		t.Errorf("user 1's last event = %s, want %s", u.LastEventID, eventID)
	}
	ev, err := e.store.Events().Get(context.Background(), eventID)
	if err != nil {
		t.Fatalf("the delete's event: %v", err)
	}
	if ev.Type != models.TypeUserDeleted || ev.EventType != models.EventDeleted || ev.Status != models.StatusProcessed ||
		ev.Outcome != models.OutcomeApplied || ev.SignatureValid != nil || ev.UserID != userID(1) {
		t.Errorf("event %s: %s/%s %s %s, signatureValid %v, user %s; want user.deleted, processed, applied, null, %s",
			eventID, ev.Type, ev.EventType, ev.Status, ev.Outcome, ev.SignatureValid, ev.UserID, userID(1))
	}
	for _, i := range []int{0, 2} {
		if !e.active(t, i) {
			t.Errorf("user %d was deleted; Clerk has it", i)
		}
	}

	// A second run finds nothing to do.
	out = e.mustReconcile(t)
	if got, want := runSummary(t, out), "users in Clerk 2, local users 2, applied 0, stale 0, deleted 0, unchanged 2, failed 0"; got != want {
		t.Errorf("second run: summary = %q, want %q", got, want)
	}
}

func TestReconcile_NeverDeletesAUserWrittenAfterTheListingBegan(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 2))
	e.created(t, 0)
	e.created(t, 1)
	// While the list is read, user 5 signs up and its webhook arrives; the
	// list read already does not have it (and Clerk is asked nothing).
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Path == "/v1/users" && r.Offset == "0" && before == 0 {
			e.created(t, 5)
		}
		if strings.HasPrefix(r.Path, "/v1/users/") {
			http.Error(w, `{"errors":[{"code":"resource_not_found"}]}`, http.StatusNotFound)
			return http.StatusNotFound
		}
		return 0
	})
	out := e.mustReconcile(t)
	if !e.active(t, 5) {
		t.Fatalf("user 5, first written after the listing began, was deleted:\n%s", out)
	}
	if got := runSummary(t, out); !strings.Contains(got, "local users 2,") || !strings.Contains(got, "deleted 0,") {
		t.Errorf("summary = %q, want 2 local users (user 5 is newer than the listing) and none deleted", got)
	}
	if got := userRequests(e.clerk.Requests()); len(got) != 0 {
		t.Errorf("users read one by one = %v, want none", got)
	}
}

func TestReconcile_AListingThatFailsMidwayDeletesNothing(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 4))
	e.shortRetries()
	for i := range 5 {
		e.created(t, i) // user 4 is not in Clerk
	}
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		switch {
		case r.Offset == "0" && before == 0:
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"errors":[{"code":"too_many_requests"}]}`, http.StatusTooManyRequests)
			return http.StatusTooManyRequests
		case r.Offset == "2":
			http.Error(w, `{"errors":[{"code":"internal_error"}]}`, http.StatusInternalServerError)
			return http.StatusInternalServerError
		}
		return 0
	})
	out, err := e.reconcile(t, "-limit", "2")
	if err == nil || !strings.Contains(err.Error(), "offset 2") || !strings.Contains(err.Error(), "500") ||
		!strings.Contains(err.Error(), "nothing was deleted") {
		t.Fatalf("reconcile = %v, want an error naming offset 2, the 500, and that nothing was deleted\n%s", err, out)
	}
	wantLine(t, out, "reconcile: offset 0: rate limited by Clerk, waiting 0s")
	if !e.active(t, 4) {
		t.Errorf("user 4 was deleted after an incomplete listing")
	}
	if got := userRequests(e.clerk.Requests()); len(got) != 0 {
		t.Errorf("users read one by one = %v, want none", got)
	}
	if n := e.events(t, models.EventFilter{EventType: models.EventDeleted}); n != 0 {
		t.Errorf("%d delete events stored, want none", n)
	}
}

func TestReconcile_RefusesMoreDeletionsThanMaxDeletes(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	for i := range 5 {
		e.created(t, i)
	}
	out, err := e.reconcile(t, "-max-deletes", "3")
	if err == nil || !strings.Contains(err.Error(), "refused to delete 4 users") || !strings.Contains(err.Error(), "-max-deletes 4") {
		t.Fatalf("reconcile = %v, want a refusal of 4 deletions that says how to allow them\n%s", err, out)
	}
	for i := 1; i < 5; i++ {
		wantLine(t, out, "reconcile: user "+userID(i)+": absent from Clerk: would delete")
		if !e.active(t, i) {
			t.Errorf("user %d was deleted by a refused run", i)
		}
	}
	if got := runSummary(t, out); !strings.Contains(got, "deleted 0,") {
		t.Errorf("summary = %q, want deleted 0", got)
	}
	if n := e.events(t, models.EventFilter{EventType: models.EventDeleted}); n != 0 {
		t.Errorf("%d delete events stored, want none", n)
	}

	// The default limit is 10; with the limit raised they go.
	out = e.mustReconcile(t, "-max-deletes", "4")
	if got := runSummary(t, out); !strings.Contains(got, "deleted 4,") {
		t.Errorf("summary = %q, want deleted 4", got)
	}
}

func TestReconcile_DryRunWritesNothingAndSaysWhatWouldChange(t *testing.T) {
	t.Parallel()
	users := someUsers(t, 3)
	users[1] = clerkUser(t, 1, updatedAt(1)+60_000) // changed while webhooks were down
	e := newBackfillEnv(t, users)
	e.created(t, 0)
	e.created(t, 1)
	e.created(t, 3) // deleted in Clerk meanwhile
	// user 2 signed up meanwhile
	counts := func() string {
		return fmt.Sprintf("users %d, active %d, events %d",
			e.users(t, true),
			e.users(t, false),
			e.events(t, models.EventFilter{}))
	}
	was := counts()
	out := e.mustReconcile(t, "-dry-run")
	if now := counts(); now != was {
		t.Errorf("a dry run changed the database: %s, was %s", now, was)
	}
	if got, want := runSummary(t, out), "users in Clerk 3, local users 3, applied 2, stale 0, deleted 1, unchanged 1, failed 0"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	wantLine(t, out, "reconcile: offset 1: user "+userID(1)+": would update")
	wantLine(t, out, "reconcile: offset 2: user "+userID(2)+": would create")
	wantLine(t, out, "reconcile: user "+userID(3)+": absent from Clerk: would delete")
	if !strings.Contains(out, "reconcile: dry run, nothing changed: users in Clerk") {
		t.Errorf("the summary does not say that nothing changed:\n%s", out)
	}

	// The real run does what the dry run said.
	out = e.mustReconcile(t)
	if got, want := runSummary(t, out), "users in Clerk 3, local users 3, applied 2, stale 0, deleted 1, unchanged 1, failed 0"; got != want {
		t.Errorf("real run: summary = %q, want %q", got, want)
	}
}

func TestReconcile_UpdatesStaleStatesAndNeverOverwritesNewerOnes(t *testing.T) {
	t.Parallel()
	users := someUsers(t, 2)
	users[0] = clerkUser(t, 0, updatedAt(0)+60_000) // newer in Clerk than here
	e := newBackfillEnv(t, users)
	e.created(t, 0)
	// User 1 changed after Clerk's list was read: the webhook's state is newer.
	var newer map[string]any
	if err := json.Unmarshal(clerkUser(t, 1, updatedAt(1)+60_000), &newer); err != nil {
		t.Fatal(err)
	}
	newer["first_name"] = "Renamed"
	e.ingest(t, "msg_newer", webhook(t, models.TypeUserUpdated, updatedAt(1)+60_000, newer))

	out := e.mustReconcile(t)
	if got, want := runSummary(t, out), "users in Clerk 2, local users 2, applied 1, stale 1, deleted 0, unchanged 0, failed 0"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	if u, _ := e.user(t, userID(0)); !u.SourceUpdatedAt.Equal(time.UnixMilli(updatedAt(0) + 60_000)) {
		t.Errorf("user 0 at %v, want Clerk's newer state", u.SourceUpdatedAt)
	}
	if u, _ := e.user(t, userID(1)); u.DisplayName != "Renamed 1" || u.LastEventID != "msg_newer" {
		t.Errorf("user 1 = %q from %s, want the webhook's newer state", u.DisplayName, u.LastEventID)
	}
}

func TestReconcile_ADeleteFollowedByALateUpdateKeepsTheUserDeleted(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	e.created(t, 0)
	e.created(t, 1)
	e.clerk.Remove(userID(1))
	e.mustReconcile(t)

	// A user.updated stamped after the listing arrives late.
	var d map[string]any
	late := time.Now().Add(time.Minute).UnixMilli()
	if err := json.Unmarshal(clerkUser(t, 1, late), &d); err != nil {
		t.Fatal(err)
	}
	res := e.ingest(t, "msg_late", webhook(t, models.TypeUserUpdated, late, d))
	if res.Outcome != models.OutcomeDeleted {
		t.Errorf("late update: outcome %s, want %s", res.Outcome, models.OutcomeDeleted)
	}
	if e.active(t, 1) {
		t.Errorf("user 1 came back after its reconcile delete")
	}
}

func TestReconcile_AUserHiddenByAShiftingListIsNotDeleted(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 4))
	for i := range 4 {
		e.created(t, i)
	}
	// User 0 is deleted in Clerk between the first and the second page:
	// everyone moves up one place, and user 2 is on no page read.
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, before int) int {
		if r.Path == "/v1/users" && r.Offset == "2" && before == 0 {
			e.clerk.Remove(userID(0))
		}
		return 0
	})
	out := e.mustReconcile(t, "-limit", "2")
	wantLine(t, out, "reconcile: user "+userID(2)+": missing from the list, but Clerk has it: kept")
	for i := range 4 {
		if !e.active(t, i) {
			t.Errorf("user %d was deleted:\n%s", i, out)
		}
	}
	// The next run sees user 0's deletion.
	out = e.mustReconcile(t, "-limit", "2")
	if got := runSummary(t, out); !strings.Contains(got, "users in Clerk 3, local users 4,") || !strings.Contains(got, "deleted 1,") {
		t.Errorf("second run: summary = %q, want 3 users in Clerk, 4 local, 1 deleted", got)
	}
	if e.active(t, 0) {
		t.Errorf("user 0, deleted in Clerk, is still active")
	}
}

func TestReconcile_RequiresTheSecretKey(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	delete(e.env, "CLERK_SECRET_KEY")
	if _, err := e.reconcile(t); err == nil || !strings.Contains(err.Error(), "CLERK_SECRET_KEY") {
		t.Errorf("reconcile without a key = %v, want an error naming CLERK_SECRET_KEY", err)
	}
}

func TestServe_ReconcilesOnAScheduleAndSyncsOneUser(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 3))
	e.created(t, 0)
	e.created(t, 9) // deleted in Clerk while webhooks were down
	// And an organization with it, and a membership of one that stays.
	e.clerkHas(t, []int{0}, []membership{{0, 0, 0}})
	e.orgCreated(t, 9)
	e.memberCreated(t, membership{1, 0, 2})
	env := map[string]string{
		"USERSYNC_ADDR":               "127.0.0.1:0",
		"CLERK_WEBHOOK_SECRET":        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_API_KEYS":           "usk_serve_api_0123456789",
		"USERSYNC_RECONCILE_INTERVAL": "1h",
	}
	for k, v := range e.env {
		env[k] = v
	}
	base, out, stop := start(t, env)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), `"msg":"reconcile done"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no reconcile run logged:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.active(t, 9) || !e.active(t, 2) {
		t.Errorf("after the scheduled run: user 9 active %v, user 2 active %v; want false, true", e.active(t, 9), e.active(t, 2))
	}
	if e.orgActive(t, 9) || !e.orgActive(t, 0) || e.memberActive(t, 1) || !e.memberActive(t, 0) {
		t.Errorf("after the scheduled run: organizations 9 and 0 active %v, %v, memberships 1 and 0 %v, %v; want false, true, false, true",
			e.orgActive(t, 9), e.orgActive(t, 0), e.memberActive(t, 1), e.memberActive(t, 0))
	}
	if !strings.Contains(out.String(), `"organizations":{"clerk":1,"local":2,"applied":0,"stale":0,"deleted":1,`) {
		t.Errorf("the run's log line lacks the organizations' counts:\n%s", out)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	_, metrics := send(t, req)
	for _, want := range []string{
		"usersync_reconcile_last_run_success 1",
		`usersync_reconcile_last_run_users{kind="clerk"} 3`,
		`usersync_reconcile_last_run_users{kind="deleted"} 1`,
		`usersync_reconcile_last_run_objects{kind="clerk",object="users"} 3`,
		`usersync_reconcile_last_run_objects{kind="clerk",object="organizations"} 1`,
		`usersync_reconcile_last_run_objects{kind="local",object="organizations"} 2`,
		`usersync_reconcile_last_run_objects{kind="deleted",object="organizations"} 1`,
		`usersync_reconcile_last_run_objects{kind="deleted",object="memberships"} 1`,
		`usersync_reconcile_runs_total{result="success"} 1`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The console's summary of the run has every kind's counts.
	runs, err := e.store.Runs().Last(context.Background(), 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("recorded runs = %+v, %v; want the scheduled one", runs, err)
	}
	if r := runs[0]; r.Trigger != "schedule" || r.Users == nil || r.Users.Clerk != 3 || r.Organizations == nil ||
		r.Organizations.Deleted != 1 || r.Memberships == nil || r.Memberships.Deleted != 1 {
		t.Errorf("recorded run = %+v (users %+v, organizations %+v, memberships %+v); want by schedule, 3 users in Clerk, 1 organization and 1 membership deleted",
			r, r.Users, r.Organizations, r.Memberships)
	}

	if strings.Contains(metrics, "usersync_reconcile_last_run_duration_seconds 0\n") ||
		!strings.Contains(metrics, "usersync_reconcile_last_run_duration_seconds ") {
		t.Errorf("metrics lack the last run's duration")
	}
	// A user that signed up after the run: fetched on demand.
	e.clerk.Add(clerkUser(t, 5, updatedAt(5)))
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/users/"+userID(5)+"/sync", nil)
	req.Header.Set("Authorization", "Bearer usk_serve_api_0123456789")
	if code, body := send(t, req); code != http.StatusOK || !strings.Contains(body, `"userId":"`+userID(5)+`"`) {
		t.Errorf("POST sync = %d %s, want the user", code, body)
	}
	// And an organization.
	e.clerk.AddOrganization(rawJSON(t, clerkOrgData(5, orgUpdatedAt(5))))
	req, _ = http.NewRequest(http.MethodPost, base+"/v1/organizations/"+orgID(5)+"/sync", nil)
	req.Header.Set("Authorization", "Bearer usk_serve_api_0123456789")
	if code, body := send(t, req); code != http.StatusOK || !strings.Contains(body, `"organizationId":"`+orgID(5)+`"`) {
		t.Errorf("POST organization sync = %d %s, want the organization", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServe_AReconcileIntervalNeedsTheSecretKey(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, nil)
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_API_KEYS": "usk_serve_api_0123456789", "USERSYNC_RECONCILE_INTERVAL": "1h",
		"MONGODB_URI": e.env["MONGODB_URI"], "MONGODB_DATABASE": e.env["MONGODB_DATABASE"],
	}
	err := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CLERK_SECRET_KEY") {
		t.Errorf("serve with an interval and no key = %v, want an error naming CLERK_SECRET_KEY", err)
	}
}

func TestServe_AScheduledRunRefusedByTheLimitDeletesNothingAndSaysSo(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, nil) // a Clerk with no users: a wrong key, say
	for i := range defaultMaxDeletes + 1 {
		e.created(t, i)
	}
	base, out := serveUntilReconcileFails(t, e)
	if !strings.Contains(out.String(), "11 users are absent from Clerk, more than 10: nothing deleted") {
		t.Errorf("the log does not say why:\n%s", out)
	}
	for i := range defaultMaxDeletes + 1 {
		if !e.active(t, i) {
			t.Errorf("user %d was deleted by a refused run", i)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if _, metrics := send(t, req); !strings.Contains(metrics, "usersync_reconcile_last_run_success 0\n") ||
		!strings.Contains(metrics, `usersync_reconcile_runs_total{result="failure"} 1`+"\n") {
		t.Errorf("metrics do not show the failed run")
	}
}

// A scheduled run that could not check users absent from Clerk's list
// (Clerk's answer about them failed) did not do its job: it is a failure,
// in the log, the metrics and the console's runs, not a success.
func TestServe_AScheduledRunThatCouldNotCheckUsersReportsAPartialRun(t *testing.T) {
	t.Parallel()
	e := newBackfillEnv(t, someUsers(t, 1))
	for _, i := range []int{0, 5, 6} {
		e.created(t, i)
	}
	e.clerk.SetAnswer(func(w http.ResponseWriter, r clerktest.Request, _ int) int {
		if r.Path == "/v1/users/"+userID(5) || r.Path == "/v1/users/"+userID(6) {
			http.Error(w, `{"errors":[{"code":"bad_request"}]}`, http.StatusBadRequest)
			return 1
		}
		return 0
	})
	base, out := serveUntilReconcileFails(t, e)
	if !strings.Contains(out.String(), "partial: 2 users could not be applied or checked") {
		t.Errorf("the log does not say the run is partial:\n%s", out)
	}
	if !e.active(t, 5) || !e.active(t, 6) {
		t.Errorf("users Clerk's answer failed for were deleted")
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if _, metrics := send(t, req); !strings.Contains(metrics, "usersync_reconcile_last_run_success 0\n") ||
		!strings.Contains(metrics, `usersync_reconcile_runs_total{result="failure"} 1`+"\n") {
		t.Errorf("metrics do not show the partial run as failed")
	}
	runs, err := e.store.Runs().Last(context.Background(), 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("recorded runs = %+v, %v", runs, err)
	}
	if r := runs[0]; r.Success || !strings.Contains(r.Error, "partial") || r.Users == nil || r.Users.Failed != 2 {
		t.Errorf("recorded run = %+v (users %+v); want failed, partial, 2 users failed", r, r.Users)
	}
}

// serveUntilReconcileFails serves with e's Clerk and a scheduled
// reconcile, and waits until the first run is logged as failed; it
// returns the service's base URL and its log.
func serveUntilReconcileFails(t *testing.T, e *backfillEnv) (string, *syncBuffer) {
	t.Helper()
	env := map[string]string{
		"USERSYNC_ADDR": "127.0.0.1:0", "CLERK_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"USERSYNC_API_KEYS": "usk_serve_api_0123456789", "USERSYNC_RECONCILE_INTERVAL": "1h",
	}
	for k, v := range e.env {
		env[k] = v
	}
	base, out, _ := start(t, env)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), `"msg":"reconcile failed"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no failed reconcile logged:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return base, out
}
