package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
)

// TestMetrics_TheLastScheduledRunIsGaugedPerObjectFromStartUp checks
// usersync_reconcile_last_run_objects: its 28 series (4 objects, 7 counts)
// are there from start-up and no others, each kind of a run sets its own,
// a kind the run did not read is 0 (its local count left as it was), and
// usersync_reconcile_last_run_users stays the users' counts.
func TestMetrics_TheLastScheduledRunIsGaugedPerObjectFromStartUp(t *testing.T) {
	t.Parallel()
	store := repotest.NewStore(t)
	m := api.NewMetrics(store.Events())
	h := newHarness(t, func(o *harnessOptions) { o.store, o.metrics = store, m })
	series := regexp.MustCompile(`(?m)^usersync_reconcile_last_run_objects\{kind="([a-z]+)",object="([a-z_]+)"\} (\S+)$`)
	scrape := func() map[string]string {
		t.Helper()
		r := h.get("/metrics", "")
		if r.Code != http.StatusOK {
			t.Fatalf("GET /metrics = %s", r)
		}
		got := map[string]string{}
		for _, s := range series.FindAllStringSubmatch(string(r.Body), -1) {
			got[s[2]+" "+s[1]] = s[3]
		}
		if n := strings.Count(string(r.Body), "\nusersync_reconcile_last_run_objects{"); n != len(got) {
			t.Errorf("%d series of usersync_reconcile_last_run_objects, %d of them as expected", n, len(got))
		}
		for _, l := range regexp.MustCompile(`(?m)^usersync_reconcile_last_run_users\{kind="([a-z]+)"\} (\S+)$`).FindAllStringSubmatch(string(r.Body), -1) {
			if got["users "+l[1]] != l[2] {
				t.Errorf("usersync_reconcile_last_run_users{kind=%q} = %s, want the users' %s", l[1], l[2], got["users "+l[1]])
			}
		}
		return got
	}
	got := scrape()
	if len(got) != 35 {
		t.Errorf("at start-up: %d series %v, want 35 (users, organizations, memberships, invitations, subscription_items × 7)", len(got), got)
	}
	for k, v := range got {
		if v != "0" {
			t.Errorf("at start-up: %s = %s, want 0", k, v)
		}
	}

	m.ObserveReconcile(models.ReconcileSummary{
		StartedAt: time.Now(), Success: true,
		Users:         &models.ReconcileCounts{Clerk: 1234, Local: 1236, Applied: 5, Stale: 1, Unchanged: 1228, Deleted: 2},
		Organizations: &models.ReconcileCounts{Clerk: 12, Local: 13, Unchanged: 12, Deleted: 1},
		Memberships:   &models.ReconcileCounts{Clerk: 40, Local: 41, Applied: 1, Unchanged: 39, Deleted: 1, Failed: 2},
		// A reconcile reads no local subscription item (Local -1).
		SubscriptionItems: &models.ReconcileCounts{Clerk: 9, Local: -1, Applied: 3, Stale: 1, Unchanged: 4, Failed: 1},
	})
	got = scrape()
	for k, want := range map[string]string{
		"users clerk": "1234", "users local": "1236", "users deleted": "2", "organizations clerk": "12", "organizations local": "13",
		"organizations deleted": "1", "memberships clerk": "40", "memberships applied": "1", "memberships failed": "2",
		"subscription_items clerk": "9", "subscription_items applied": "3", "subscription_items stale": "1",
		"subscription_items unchanged": "4", "subscription_items failed": "1", "subscription_items local": "0",
		"subscription_items deleted": "0",
	} {
		if got[k] != want {
			t.Errorf("after a run of every kind: %s = %s, want %s", k, got[k], want)
		}
	}

	// Organizations turned off in the Clerk instance: none read.
	m.ObserveReconcile(models.ReconcileSummary{
		StartedAt: time.Now(), Success: true, Users: &models.ReconcileCounts{Clerk: 1234, Local: 1234, Unchanged: 1234},
	})
	got = scrape()
	for k, want := range map[string]string{
		"users clerk": "1234", "users deleted": "0", "organizations clerk": "0", "organizations deleted": "0",
		"memberships clerk": "0", "memberships failed": "0", "memberships local": "41", "subscription_items clerk": "0",
		"subscription_items applied": "0",
	} {
		if got[k] != want {
			t.Errorf("after a run of users only: %s = %s, want %s", k, got[k], want)
		}
	}
}
