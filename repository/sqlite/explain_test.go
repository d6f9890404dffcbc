package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// upsertByKey marks an INSERT … ON CONFLICT of the primary key.
const upsertByKey = "upsert by primary key"

// TestExplain_EveryQueryIsAnIndexSearchWithNoSort asks SQLite for the plan
// of every query whose cost could grow with the tables, and of the event
// log with every combination of filters: each must read through an index
// (SEARCH, or a SCAN of an index in its order bounded by LIMIT), never
// scan a whole table, and never sort in a temporary B-tree.
func TestExplain_EveryQueryIsAnIndexSearchWithNoSort(t *testing.T) {
	s, err := Open(context.Background(), t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	now := time.Now().UnixMilli()
	queries := []struct {
		name, index, sql string
		args             []any
	}{
		{"get user", "PRIMARY KEY", qUserGet, []any{"user_1"}},
		{"email holder", "users_email", qEmailHolder, []any{"a@example.com"}},
		{"a new user's activity from its session events", "events_user", qUserActivity, []any{"user_1"}},
		{"users by email", "users_email", qUsersByEmail, []any{"a@example.com", false, "", 10}},
		{"active users page", "users_active", qUsersActive, []any{"user_5", 10}},
		{"users page with deleted", "PRIMARY KEY", qUsersAll, []any{"user_5", 10}},
		{"change feed page", "users_changes", qUserChanges, []any{now, now, now, "user_1", 10}},
		{"walk of active users", "users_active", qUsersWalk, []any{"user_1", 1000}},
		{"tombstones to erase", "users_erase", qEraseDue, []any{now, 0, "", 100}},
		{"erase a user's events", "events_user", qEraseEvents, []any{now, "user_1"}},
		{"a user's events left to erase", "events_user", qErasePending, []any{"user_1"}},
		{"memberships to erase", "memberships_erase", qMembershipsEraseDue, []any{now, 0, "", 100}},
		{"erase a membership's events", "events_object", qEraseMembershipEvents, []any{now, "orgmem_1"}},
		{"a membership's events left to erase", "events_object", qMembershipErasePending, []any{"orgmem_1"}},
		{"due stored events", "events_status", qDueStored, []any{now, 20}},
		{"due failed events", "events_retry", qDueFailed, []any{now, 20}},
		{"retention", "events_processed", qRetention, []any{now, 20}},
		{"stats", "events_status_type", qStats, nil},
		{"stats: failed events to retry", "events_status_type", qStatsRetrying, nil},
		{"stats: discarded events", "events_status", qStatsDiscarded, nil},
		{"event by id", "", qEventByID, []any{1}},
		{"event by svix-id", "sqlite_autoindex_events_1", qEventByEventID, []any{"msg_1"}},
		{"failed events, newest first", "events_status", qFailed, []any{5001}},
		{"activity: add to a bucket", upsertByKey, qActivityAdd, []any{60000, now, "received", 1}},
		{"activity: prune old buckets", "PRIMARY KEY", qActivityPrune, []any{60000, now}},
		{"activity: a range of buckets", "PRIMARY KEY", qActivityRange, []any{60000, now - 86400000, now}},
		{"reconcile runs, latest first", "reconcile_runs_started", qRunsLast, []any{50}},
		{"reconcile runs: prune", "reconcile_runs_started", qRunsPrune, []any{50}},
		{"get organization", "PRIMARY KEY", qOrgGet, []any{"org_1"}},
		{"active organizations page", "organizations_active", qOrgsActive, []any{"org_5", 10}},
		{"organizations page with deleted", "PRIMARY KEY", qOrgsAll, []any{"org_5", 10}},
		{"walk of active organizations", "organizations_active", qOrgsWalk, []any{"org_1", 1000}},
		{"walk of active memberships", "memberships_pair", qMembershipsWalk, []any{"org_1", "user_1", 1000}},
		{"organizations by slug", "organizations_slug", qOrgsBySlug, []any{"acme", "org_5", 10}},
		{"organization change feed page", "organizations_changes", qOrgChanges, []any{now, now, now, "org_1", 10}},
		{"get invitation", "PRIMARY KEY", qInvitationGet, []any{"orginv_1"}},
		{"an invitation's version", "PRIMARY KEY", qInvitationVersion, []any{"orginv_1"}},
		{"write an invitation", upsertByKey, qInvitationUpsert, []any{"orginv_1", "org_1", nil, nil, nil, "pending", "{}", nil, nil, nil, now, now, "msg_1", nil}},
		{"an organization's invitations", "invitations_org", qOrgInvitations, []any{"org_1", "orginv_5", 10}},
		{"an organization's invitations of a status", "invitations_status", qOrgInvitationsOfStatus, []any{"org_1", "pending", "orginv_5", 10}},
		{"invitation change feed page", "invitations_changes", qInvitationChanges, []any{now, now, now, "orginv_1", 10}},
		{"delete an organization's invitations", "invitations_org", qCascadeInvitations, []any{now, now, "msg_1", now, "org_1"}},
		{"invitations to erase", "invitations_erase", qInvitationsEraseDue, []any{now, 0, "", 100}},
		{"get membership", "PRIMARY KEY", qMembershipGet, []any{"orgmem_1"}},
		{"an organization's memberships", "memberships_org", qOrgMemberships, []any{"org_1", "orgmem_5", false, 10}},
		{"a user's memberships", "memberships_user", qUserMemberships, []any{"user_1", "orgmem_5", true, 10}},
		{"membership change feed page", "memberships_changes", qMembershipChanges, []any{now, now, now, "orgmem_1", 10}},
		{"the active membership of a pair", "memberships_pair", qMembershipHolder, []any{"org_1", "user_1"}},
		{"cascade of an organization's deletion", "memberships_pair", qCascadeOrg, []any{now, now, "msg_1", now, "org_1"}},
		{"cascade of a user's deletion", "memberships_user", qCascadeUser, []any{now, now, "msg_1", now, "user_1"}},
		{"get subscription", "PRIMARY KEY", qSubscriptionGet, []any{"csub_1"}},
		{"a subscription's version", "PRIMARY KEY", qSubscriptionVersion, []any{"csub_1"}},
		{"write a subscription", upsertByKey, qSubscriptionUpsert,
			[]any{"csub_1", "user", "user_1", nil, "active", nil, nil, nil, nil, nil, nil, nil, now, "msg_1", now}},
		{"the plans' change feed page", "billing_plans_changes", qPlanChanges, []any{now, now, now, "user", "user_1", 10}},
		{"an item's version and payer", "PRIMARY KEY", qItemVersion, []any{"csub_item_1"}},
		{"write an item", upsertByKey, qItemUpsert, []any{"csub_item_1", "csub_1", "user", "user_1", nil, "active", false,
			nil, nil, nil, "cplan_1", "pro", nil, nil, nil, true, nil, nil, now, "msg_1", now}},
		{"a payer's items, newest first", "subscription_items_payer", qPayerItems, []any{"user", "user_1", models.MaxPayerItems}},
		{"a payer's plan", "PRIMARY KEY", qPlanGet, []any{"user", "user_1"}},
		{"write a payer's plan", upsertByKey, qPlanUpsert, []any{"user", "user_1", "{}", now}},
		{"delete a payer's plan", "PRIMARY KEY", qPlanDelete, []any{"user", "user_1"}},
		{"a payment attempt's version", "PRIMARY KEY", qAttemptVersion, []any{"pa_1"}},
		{"write a payment attempt", upsertByKey, qAttemptUpsert, []any{"pa_1", "cpa_1", "user", "user_1", nil, "paid", nil,
			nil, nil, nil, nil, nil, "[]", nil, now, "msg_1", now}},
		{"a payment's attempts page", "payment_attempts_payment", qAttemptsByPayment, []any{"cpa_1", "", "", now, "pa_5", 11}},
		{"a payment's attempts page of a payer", "payment_attempts_payment", qAttemptsByPayment,
			[]any{"cpa_1", "user", "user_1", now, "pa_5", 11}},
		{"a payer's attempts page", "payment_attempts_payer", qAttemptsByPayer, []any{"user", "user_1", now, "pa_5", 11}},
		{"payment attempts page", "payment_attempts_time", qAttemptsAll, []any{now, "pa_5", 11}},
		{"a payer's subscriptions page", "subscriptions_payer", qSubscriptionsByPayer, []any{"user", "user_1", "", now, "csub_5", 11}},
		{"a payer's subscriptions page in a status", "subscriptions_payer", qSubscriptionsByPayer,
			[]any{"user", "user_1", "active", now, "csub_5", 11}},
		{"subscriptions page in a status", "subscriptions_status", qSubscriptionsByStatus, []any{"active", now, "csub_5", 11}},
		{"subscriptions page", "subscriptions_time", qSubscriptionsAll, []any{now, "csub_5", 11}},
	}
	for _, st := range []models.EventStatus{"", models.StatusFailed} {
		for _, kind := range []models.Kind{"", models.KindMembership, models.KindSubscriptionItem} {
			for _, et := range []models.EventType{"", models.EventUpdated, models.EventEnded} {
				for _, who := range []struct{ user, object string }{{}, {user: "user_1"}, {object: "orgmem_1"}, {"user_1", "orgmem_1"}} {
					for _, window := range []bool{false, true} {
						f := models.EventFilter{Status: st, Kind: kind, EventType: et, UserID: who.user, ObjectID: who.object,
							Limit: 100, After: fmt.Sprintf("%d_5", now)}
						if window {
							f.Since, f.Until = time.UnixMilli(now-1000), time.UnixMilli(now)
						}
						ranges, err := logRanges(f)
						if err != nil {
							t.Fatal(err)
						}
						for i, r := range ranges {
							queries = append(queries, struct {
								name, index, sql string
								args             []any
							}{fmt.Sprintf("event log %+v, range %d", f, i), r.index, r.sql, r.args})
						}
					}
				}
			}
		}
	}
	for _, q := range queries {
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "; ")
		for _, line := range plan {
			fullScan := strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, " INDEX ") && line != "SCAN CONSTANT ROW"
			if fullScan || strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s: plan %q scans a table or sorts", q.name, text)
			}
		}
		if q.index == upsertByKey {
			// An INSERT finds its conflict through the key it names: SQLite
			// plans no search for it, and there must be none.
			if text != "" {
				t.Errorf("%s: plan %q, want none (a write by primary key)", q.name, text)
			}
			continue
		}
		if q.index != "" && !strings.Contains(text, q.index) {
			t.Errorf("%s: plan %q does not use %s", q.name, text, q.index)
		}
		if q.index == "" && !strings.Contains(text, "INTEGER PRIMARY KEY") {
			t.Errorf("%s: plan %q is not a primary key lookup", q.name, text)
		}
	}
}

// TestWrite_ARefusedWriteIsReadOnlyAndUnavailable: a write the database
// refuses as read-only (here a connection told to be query-only, as a file
// or disk that became read-only under usersync) is models.ErrReadOnly and
// models.ErrUnavailable: a 503 that readiness reports, never a 500.
func TestWrite_ARefusedWriteIsReadOnlyAndUnavailable(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.write(ctx, func(t *wtx) error { _, err := t.exec("PRAGMA query_only = ON"); return err }); err != nil {
		t.Fatal(err)
	}
	_, err = s.Users().Apply(ctx, models.UserChange{UserID: "user_1", EventID: "msg_1", SourceTime: time.Now()}, time.Now())
	if !errors.Is(err, models.ErrReadOnly) || !errors.Is(err, models.ErrUnavailable) {
		t.Errorf("a write refused as read-only = %v, want ErrReadOnly and ErrUnavailable", err)
	}
}
