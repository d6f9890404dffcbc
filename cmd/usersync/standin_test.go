package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/usersync/usersync/clerk/clerktest"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
)

// standinDir holds the fixtures of the documented walkthrough ("Try
// reconcile locally", docs/operations.md), which cmd/clerk-standin serves.
const standinDir = "../../testdata/clerk-standin"

// newStandinEnv is a backfill environment whose Clerk is the stand-in
// cmd/clerk-standin serves, on the walkthrough's fixtures, with a 429
// every throttleEvery requests (Retry-After 0, so that tests wait for
// nothing).
func newStandinEnv(t *testing.T, throttleEvery int) *backfillEnv {
	t.Helper()
	users, orgs, members, err := clerktest.LoadFixtures(standinDir)
	if err != nil {
		t.Fatal(err)
	}
	items, err := clerktest.LoadSubscriptionItems(standinDir)
	if err != nil {
		t.Fatal(err)
	}
	c := clerktest.NewServer(users, orgs, members)
	c.SetSubscriptionItems(items)
	c.Throttle(throttleEvery, 0)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1"
	store, env := repotest.NewStoreEnv(t)
	env["CLERK_SECRET_KEY"], env["CLERK_API_URL"] = "sk_test_standin", c.URL
	return &backfillEnv{clerk: c, store: store, env: env}
}

// TestStandin_TheWalkthroughBackfillsAndReconcilesItsFixture runs the
// walkthrough's steps on its fixture: backfill brings in every user,
// organization, membership and subscription item (the free plan's too)
// through the stand-in's pages and 429s; a
// reconcile after a user is deleted in the stand-in deletes it, and its
// memberships, here.
func TestStandin_TheWalkthroughBackfillsAndReconcilesItsFixture(t *testing.T) {
	t.Parallel()
	e := newStandinEnv(t, 4)
	out := e.mustBackfill(t, "-limit", "3")
	if !strings.Contains(out, "rate limited by Clerk") {
		t.Errorf("backfill met no 429 of the stand-in:\n%s", out)
	}
	wantLine(t, out, "backfill: done, offsets 0 to 8: 8 users (applied 8, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, organizations offsets 0 to 2: 2 organizations (applied 2, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, memberships offsets 0 to 4: 4 memberships (applied 4, stale 0, deleted 0, duplicate 0, failed 0)")
	wantLine(t, out, "backfill: done, subscription_items offsets 0 to 3: 3 subscription_items (applied 3, stale 0, deleted 0, duplicate 0, failed 0)")
	for userID, slug := range map[string]string{"user_standin00": "team-plan", "user_standin01": "free-plan"} {
		if p, ok := e.plan(t, userID); !ok || p.Status != models.PlanActive || planSlug(p) != slug {
			t.Errorf("plan of %s = %+v, want active with %s", userID, p.PayerPlan, slug)
		}
	}
	u, ok := e.user(t, "user_standin00")
	if !ok || u.Email != "ada.lovelace@example.org" || u.SourceCreatedAt == nil || u.SourceCreatedAt.UnixMilli() != 1735689600000 {
		t.Errorf("user_standin00 = %+v (sourceCreatedAt %v), want Ada with Clerk's created_at", u, u.SourceCreatedAt)
	}

	out = e.mustReconcile(t, "-dry-run")
	wantLine(t, out, "reconcile: dry run, nothing changed: users in Clerk 8, local users 8, applied 0, stale 0, deleted 0, unchanged 8, failed 0")

	// Deleted in Clerk while webhooks were down.
	e.clerk.Remove("user_standin04")
	out = e.mustReconcile(t)
	wantLine(t, out, "reconcile: done: users in Clerk 7, local users 8, applied 0, stale 0, deleted 1, unchanged 7, failed 0")
	if u, _ := e.user(t, "user_standin04"); !u.Deleted() {
		t.Errorf("user_standin04 is still active after the reconcile")
	}
	m, err := e.store.Memberships().Get(context.Background(), "orgmem_standin03")
	if err != nil || !m.Deleted() {
		t.Errorf("the membership of the deleted user = %+v, %v; want deleted", m, err)
	}
	runs, err := e.store.Runs().Last(context.Background(), 1)
	if err != nil || len(runs) != 1 || !runs[0].Success || runs[0].Users == nil || runs[0].Users.Deleted != 1 {
		t.Errorf("the last run = %+v, %v", runs, err)
	}
}
