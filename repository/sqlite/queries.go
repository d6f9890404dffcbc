package sqlite

// The queries whose cost depends on the size of the tables, each with the
// index that serves it (the explain test checks the plan of every one:
// a SEARCH or an ordered SCAN of that index, never a scan of a table or a
// sort in a temporary B-tree). docs/design.md's query → index table lists
// them beside the MongoDB store's.
const (
	// qUserGet: the primary key.
	qUserGet = `SELECT ` + userColumns + ` FROM users WHERE user_id = ?`
	// qUserActivity: events_user, the user's events: the newest activity
	// of its stored session events, which a user's creation reads back.
	qUserActivity = `SELECT MAX(source_timestamp) FROM events INDEXED BY events_user
		WHERE user_id = ? AND kind = 'user' AND event_type = 'session'`
	// qEmailHolder: users_email.
	qEmailHolder = `SELECT user_id, source_updated_at, last_event_id FROM users
		WHERE email = ? AND deleted_at IS NULL`
	// qUsersByEmail: users_email.
	qUsersByEmail = `SELECT ` + userColumns + ` FROM users
		WHERE email = ? AND deleted_at IS NULL AND (? OR deprovisioned = 0) AND user_id > ? ORDER BY user_id LIMIT ?`
	// qUsersActive: users_active, from the cursor on; a deprovisioned user
	// is passed over.
	qUsersActive = `SELECT ` + userColumns + ` FROM users INDEXED BY users_active
		WHERE deleted_at IS NULL AND deprovisioned = 0 AND user_id > ? ORDER BY user_id LIMIT ?`
	// qUsersAll: the primary key, from the cursor on.
	qUsersAll = `SELECT ` + userColumns + ` FROM users WHERE user_id > ? ORDER BY user_id LIMIT ?`
	// qUserChanges: users_changes, from the cursor on.
	qUserChanges = `SELECT ` + userColumns + ` FROM users INDEXED BY users_changes
		WHERE updated_at >= ? AND updated_at <= ? AND (updated_at, user_id) > (?, ?)
		ORDER BY updated_at, user_id LIMIT ?`
	// qUsersWalk: users_active, a batch from the last id on.
	qUsersWalk = `SELECT user_id, created_at, user_id FROM users INDEXED BY users_active
		WHERE deleted_at IS NULL AND user_id > ? ORDER BY user_id LIMIT ?`
	// qEraseDue: users_erase.
	qEraseDue = `SELECT user_id, erase_after FROM users INDEXED BY users_erase
		WHERE erase_after <= ? AND (erase_after, user_id) > (?, ?) ORDER BY erase_after, user_id LIMIT ?`
	// qEraseEvents: events_user.
	qEraseEvents = `UPDATE events INDEXED BY events_user SET raw_body = NULL, erased_at = ?
		WHERE user_id = ? AND erased_at IS NULL
		AND (status IN ('processed', 'discarded') OR (status = 'failed' AND retry_at IS NULL))`
	// qErasePending: events_user.
	qErasePending = `SELECT count(*) FROM events INDEXED BY events_user WHERE user_id = ? AND erased_at IS NULL`
	// qMembershipsEraseDue: memberships_erase.
	qMembershipsEraseDue = `SELECT membership_id, erase_after FROM memberships INDEXED BY memberships_erase
		WHERE erase_after <= ? AND (erase_after, membership_id) > (?, ?) ORDER BY erase_after, membership_id LIMIT ?`
	// qEraseMembershipEvents: events_object.
	qEraseMembershipEvents = `UPDATE events INDEXED BY events_object SET raw_body = NULL, erased_at = ?
		WHERE object_id = ? AND erased_at IS NULL
		AND (status IN ('processed', 'discarded') OR (status = 'failed' AND retry_at IS NULL))`
	// qMembershipErasePending: events_object.
	qMembershipErasePending = `SELECT count(*) FROM events INDEXED BY events_object WHERE object_id = ? AND erased_at IS NULL`
	// qDueStored: events_status.
	qDueStored = `SELECT ` + eventColumns + bodyColumn + ` FROM events INDEXED BY events_status
		WHERE status = 'stored' AND received_at < ? ORDER BY received_at, id LIMIT ?`
	// qDueFailed: events_retry.
	qDueFailed = `SELECT ` + eventColumns + bodyColumn + ` FROM events INDEXED BY events_retry
		WHERE retry_at <= ? ORDER BY retry_at LIMIT ?`
	// qRetention: events_processed.
	qRetention = `SELECT id, outcome FROM events INDEXED BY events_processed
		WHERE processed_at < ? AND status IN ('processed', 'discarded') ORDER BY processed_at LIMIT ?`
	// qStats: events_status_type, whose leading (status, kind) the counts
	// are grouped by: the stored and failed events are counted in the index;
	// qStatsRetrying reads the rows of the failed ones.
	qStats = `SELECT status, kind, count(*) FROM events INDEXED BY events_status_type
		WHERE status IN ('stored', 'failed') GROUP BY status, kind`
	qStatsRetrying = `SELECT status, kind, count(*) FROM events INDEXED BY events_status_type
		WHERE status = 'failed' AND retry_at IS NOT NULL GROUP BY status, kind`
	// qStatsDiscarded: events_status, one range.
	qStatsDiscarded = `SELECT count(*) FROM events INDEXED BY events_status WHERE status = 'discarded'`
	// qEventByID, qEventByEventID: the primary key, the unique event_id index.
	qEventByID      = `SELECT ` + eventColumns + bodyColumn + ` FROM events WHERE id = ?`
	qEventByEventID = `SELECT ` + eventColumns + bodyColumn + ` FROM events WHERE event_id = ?`

	// qFailed: events_status, the failed ones newest first.
	qFailed = `SELECT id, event_id, received_at, error, retry_at FROM events INDEXED BY events_status
		WHERE status = 'failed' ORDER BY received_at DESC, id DESC LIMIT ?`

	// qActivityAdd, qActivityPrune, qActivityRange: the primary key of
	// activity (size, start, kind); a chart reads one range of it.
	qActivityAdd = `INSERT INTO activity (size, start, kind, n) VALUES (?, ?, ?, ?)
		ON CONFLICT (size, start, kind) DO UPDATE SET n = n + excluded.n`
	qActivityPrune = `DELETE FROM activity WHERE size = ? AND start < ?`
	qActivityRange = `SELECT start, kind, n FROM activity WHERE size = ? AND start >= ? AND start < ? ORDER BY start, kind`

	// qRunsLast: reconcile_runs_started, backwards.
	qRunsLast = `SELECT ` + runColumns + ` FROM reconcile_runs INDEXED BY reconcile_runs_started
		ORDER BY started_at DESC, id DESC LIMIT ?`
	// qRunsPrune: reconcile_runs_started past the runs kept, then the
	// primary key.
	qRunsPrune = `DELETE FROM reconcile_runs WHERE id IN (SELECT id FROM reconcile_runs INDEXED BY reconcile_runs_started
		ORDER BY started_at DESC, id DESC LIMIT -1 OFFSET ?)`

	// qOrgGet: the primary key.
	qOrgGet = `SELECT ` + orgColumns + ` FROM organizations WHERE org_id = ?`
	// qOrgsActive: organizations_active, from the cursor on.
	qOrgsActive = `SELECT ` + orgColumns + ` FROM organizations INDEXED BY organizations_active
		WHERE deleted_at IS NULL AND org_id > ? ORDER BY org_id LIMIT ?`
	// qOrgsWalk: organizations_active, a batch from the last id on.
	qOrgsWalk = `SELECT org_id, created_at, org_id FROM organizations INDEXED BY organizations_active
		WHERE deleted_at IS NULL AND org_id > ? ORDER BY org_id LIMIT ?`
	// qOrgsAll: the primary key, from the cursor on.
	qOrgsAll = `SELECT ` + orgColumns + ` FROM organizations WHERE org_id > ? ORDER BY org_id LIMIT ?`
	// qOrgsBySlug: organizations_slug, from the cursor on (a tombstone has
	// no slug).
	qOrgsBySlug = `SELECT ` + orgColumns + ` FROM organizations INDEXED BY organizations_slug
		WHERE slug = ? AND org_id > ? ORDER BY org_id LIMIT ?`
	// qOrgChanges: organizations_changes, from the cursor on.
	qOrgChanges = `SELECT ` + orgColumns + ` FROM organizations INDEXED BY organizations_changes
		WHERE updated_at >= ? AND updated_at <= ? AND (updated_at, org_id) > (?, ?)
		ORDER BY updated_at, org_id LIMIT ?`
	// qMembershipGet: the primary key, and the primary keys of users and
	// organizations for the member and the organization.
	qMembershipGet = `SELECT ` + membershipColumns + ` FROM memberships m` + memberJoin + `
		WHERE m.membership_id = ?`
	// qOrgMemberships: memberships_org, from the cursor on.
	qOrgMemberships = `SELECT ` + membershipColumns + ` FROM memberships m INDEXED BY memberships_org` + memberJoin + `
		WHERE m.org_id = ? AND m.membership_id > ? AND (? OR m.deleted_at IS NULL)
		ORDER BY m.membership_id LIMIT ?`
	// qUserMemberships: memberships_user, from the cursor on.
	qUserMemberships = `SELECT ` + membershipColumns + ` FROM memberships m INDEXED BY memberships_user` + memberJoin + `
		WHERE m.user_id = ? AND m.membership_id > ? AND (? OR m.deleted_at IS NULL)
		ORDER BY m.membership_id LIMIT ?`
	// qMembershipChanges: memberships_changes, from the cursor on.
	qMembershipChanges = `SELECT ` + membershipColumns + ` FROM memberships m INDEXED BY memberships_changes` + memberJoin + `
		WHERE m.updated_at >= ? AND m.updated_at <= ? AND (m.updated_at, m.membership_id) > (?, ?)
		ORDER BY m.updated_at, m.membership_id LIMIT ?`
	// qMembershipsWalk: memberships_pair (active memberships only; a pair
	// is one of them), a batch from the last pair on.
	qMembershipsWalk = `SELECT membership_id, created_at, org_id, user_id FROM memberships INDEXED BY memberships_pair
		WHERE deleted_at IS NULL AND (org_id, user_id) > (?, ?) ORDER BY org_id, user_id LIMIT ?`
	// qMembershipHolder: memberships_pair.
	qMembershipHolder = `SELECT membership_id, source_updated_at, last_event_id FROM memberships INDEXED BY memberships_pair
		WHERE org_id = ? AND user_id = ? AND deleted_at IS NULL`
	// qCascadeOrg: memberships_pair (the active memberships of an organization).
	qCascadeOrg = `UPDATE memberships INDEXED BY memberships_pair SET ` + membershipTombstone + `
		WHERE org_id = ?5 AND deleted_at IS NULL`
	// qCascadeUser: memberships_user.
	qCascadeUser = `UPDATE memberships INDEXED BY memberships_user SET ` + membershipTombstone + `
		WHERE user_id = ?5 AND deleted_at IS NULL`

	// qInvitationGet, qInvitationVersion: the primary key.
	qInvitationGet     = `SELECT ` + invitationColumns + ` FROM invitations WHERE invitation_id = ?`
	qInvitationVersion = `SELECT source_updated_at, last_event_id, deleted_at FROM invitations WHERE invitation_id = ?`
	// qInvitationUpsert: by primary key (created_at stays the first
	// write's); a newer state clears erased_at: it holds an email again.
	qInvitationUpsert = `INSERT INTO invitations (invitation_id, org_id, email_address, role, role_name, status, metadata,
		user_id, expires_at, source_created_at, created_at, updated_at, source_updated_at, last_event_id, erase_after)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11, ?12, ?13, ?14)
		ON CONFLICT (invitation_id) DO UPDATE SET org_id = excluded.org_id, email_address = excluded.email_address,
		role = excluded.role, role_name = excluded.role_name, status = excluded.status, metadata = excluded.metadata,
		user_id = excluded.user_id, expires_at = excluded.expires_at, source_created_at = excluded.source_created_at,
		updated_at = excluded.updated_at, source_updated_at = excluded.source_updated_at,
		last_event_id = excluded.last_event_id, erase_after = excluded.erase_after, erased_at = NULL`
	// qOrgInvitations: invitations_org, from the cursor on.
	qOrgInvitations = `SELECT ` + invitationColumns + ` FROM invitations INDEXED BY invitations_org
		WHERE org_id = ? AND invitation_id > ? ORDER BY invitation_id LIMIT ?`
	// qOrgInvitationsOfStatus: invitations_status, from the cursor on.
	qOrgInvitationsOfStatus = `SELECT ` + invitationColumns + ` FROM invitations INDEXED BY invitations_status
		WHERE org_id = ? AND status = ? AND deleted_at IS NULL AND invitation_id > ? ORDER BY invitation_id LIMIT ?`
	// qInvitationChanges: invitations_changes, from the cursor on.
	qInvitationChanges = `SELECT ` + invitationColumns + ` FROM invitations INDEXED BY invitations_changes
		WHERE updated_at >= ? AND updated_at <= ? AND (updated_at, invitation_id) > (?, ?)
		ORDER BY updated_at, invitation_id LIMIT ?`
	// qCascadeInvitations: invitations_org (an organization's invitations).
	qCascadeInvitations = `UPDATE invitations INDEXED BY invitations_org SET ` + invitationTombstone + `
		WHERE org_id = ?5 AND deleted_at IS NULL`
	// qInvitationsEraseDue: invitations_erase.
	qInvitationsEraseDue = `SELECT invitation_id, erase_after FROM invitations INDEXED BY invitations_erase
		WHERE erase_after <= ? AND (erase_after, invitation_id) > (?, ?) ORDER BY erase_after, invitation_id LIMIT ?`

	// qSubscriptionGet, qSubscriptionVersion: the primary key.
	qSubscriptionGet     = `SELECT ` + subscriptionColumns + ` FROM subscriptions WHERE subscription_id = ?`
	qSubscriptionVersion = `SELECT source_updated_at, last_event_id FROM subscriptions WHERE subscription_id = ?`
	// qSubscriptionUpsert: by primary key (created_at stays the first write's).
	qSubscriptionUpsert = `INSERT INTO subscriptions (subscription_id, payer_kind, payer_id, clerk_payer_id, status,
		active_at, canceled_at, ended_at, past_due_at, latest_payment_id, payment_source_id, source_created_at,
		source_updated_at, last_event_id, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15)
		ON CONFLICT (subscription_id) DO UPDATE SET payer_kind = excluded.payer_kind, payer_id = excluded.payer_id,
		clerk_payer_id = excluded.clerk_payer_id, status = excluded.status, active_at = excluded.active_at,
		canceled_at = excluded.canceled_at, ended_at = excluded.ended_at, past_due_at = excluded.past_due_at,
		latest_payment_id = excluded.latest_payment_id, payment_source_id = excluded.payment_source_id,
		source_created_at = excluded.source_created_at, source_updated_at = excluded.source_updated_at,
		last_event_id = excluded.last_event_id, updated_at = excluded.updated_at`
	// qItemVersion: the primary key; the payer, to recompute the plan of
	// the one an item leaves.
	qItemVersion = `SELECT source_updated_at, last_event_id, payer_kind, payer_id FROM subscription_items WHERE item_id = ?`
	// qItemUpsert: by primary key (created_at stays the first write's).
	qItemUpsert = `INSERT INTO subscription_items (item_id, subscription_id, payer_kind, payer_id, clerk_payer_id, status,
		is_free_trial, period_start, period_end, interval, plan_id, plan_slug, plan_name, plan_amount, plan_currency,
		plan_is_recurring, seats, source_created_at, source_updated_at, last_event_id, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?21)
		ON CONFLICT (item_id) DO UPDATE SET subscription_id = excluded.subscription_id, payer_kind = excluded.payer_kind,
		payer_id = excluded.payer_id, clerk_payer_id = excluded.clerk_payer_id, status = excluded.status,
		is_free_trial = excluded.is_free_trial, period_start = excluded.period_start, period_end = excluded.period_end,
		interval = excluded.interval, plan_id = excluded.plan_id, plan_slug = excluded.plan_slug,
		plan_name = excluded.plan_name, plan_amount = excluded.plan_amount, plan_currency = excluded.plan_currency,
		plan_is_recurring = excluded.plan_is_recurring, seats = excluded.seats,
		source_created_at = excluded.source_created_at, source_updated_at = excluded.source_updated_at,
		last_event_id = excluded.last_event_id, updated_at = excluded.updated_at`
	// qPayerItems: subscription_items_payer, backwards: a payer's items, the
	// newest Clerk time first, at most models.MaxPayerItems.
	qPayerItems = `SELECT ` + itemColumns + ` FROM subscription_items INDEXED BY subscription_items_payer
		WHERE payer_kind = ? AND payer_id = ? ORDER BY source_updated_at DESC, item_id DESC LIMIT ?`
	// qPlanGet, qPlanUpsert, qPlanDelete: the primary key of billing_plans.
	qPlanGet    = `SELECT plan, updated_at FROM billing_plans WHERE payer_kind = ? AND payer_id = ?`
	qPlanUpsert = `INSERT INTO billing_plans (payer_kind, payer_id, plan, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (payer_kind, payer_id) DO UPDATE SET plan = excluded.plan, updated_at = excluded.updated_at`
	qPlanDelete = `DELETE FROM billing_plans WHERE payer_kind = ? AND payer_id = ?`
	// qPlanChanges: billing_plans_changes, from the cursor on.
	qPlanChanges = `SELECT payer_kind, payer_id, plan, updated_at FROM billing_plans INDEXED BY billing_plans_changes
		WHERE updated_at >= ? AND updated_at <= ? AND (updated_at, payer_kind, payer_id) > (?, ?, ?)
		ORDER BY updated_at, payer_kind, payer_id LIMIT ?`
	// qAttemptVersion: the primary key.
	qAttemptVersion = `SELECT source_updated_at, last_event_id FROM payment_attempts WHERE attempt_id = ?`
	// qAttemptUpsert: by primary key (created_at stays the first write's).
	qAttemptUpsert = `INSERT INTO payment_attempts (attempt_id, payment_id, payer_kind, payer_id, clerk_payer_id, status,
		charge_type, paid_at, failed_at, failed_code, failed_decline_code, totals, subscription_item_ids,
		source_created_at, source_updated_at, last_event_id, created_at, updated_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?17)
		ON CONFLICT (attempt_id) DO UPDATE SET payment_id = excluded.payment_id, payer_kind = excluded.payer_kind,
		payer_id = excluded.payer_id, clerk_payer_id = excluded.clerk_payer_id, status = excluded.status,
		charge_type = excluded.charge_type, paid_at = excluded.paid_at, failed_at = excluded.failed_at,
		failed_code = excluded.failed_code, failed_decline_code = excluded.failed_decline_code, totals = excluded.totals,
		subscription_item_ids = excluded.subscription_item_ids, source_created_at = excluded.source_created_at,
		source_updated_at = excluded.source_updated_at, last_event_id = excluded.last_event_id, updated_at = excluded.updated_at`
	// qAttemptsByPayment: payment_attempts_payment, backwards from the
	// cursor; a payer, when given too ('' when not), is checked on the rows.
	qAttemptsByPayment = `SELECT ` + attemptColumns + ` FROM payment_attempts INDEXED BY payment_attempts_payment
		WHERE payment_id = ?1 AND (?2 = '' OR (payer_kind = ?2 AND payer_id = ?3)) AND (source_updated_at, attempt_id) < (?4, ?5)
		ORDER BY source_updated_at DESC, attempt_id DESC LIMIT ?6`
	// qAttemptsByPayer: payment_attempts_payer, backwards from the cursor.
	qAttemptsByPayer = `SELECT ` + attemptColumns + ` FROM payment_attempts INDEXED BY payment_attempts_payer
		WHERE payer_kind = ? AND payer_id = ? AND (source_updated_at, attempt_id) < (?, ?)
		ORDER BY source_updated_at DESC, attempt_id DESC LIMIT ?`
	// qAttemptsAll: payment_attempts_time, backwards from the cursor.
	qAttemptsAll = `SELECT ` + attemptColumns + ` FROM payment_attempts INDEXED BY payment_attempts_time
		WHERE (source_updated_at, attempt_id) < (?, ?) ORDER BY source_updated_at DESC, attempt_id DESC LIMIT ?`
	// qSubscriptionsByPayer: subscriptions_payer, backwards from the
	// cursor; a status, when given too ('' when not), is checked on the
	// rows.
	qSubscriptionsByPayer = `SELECT ` + subscriptionColumns + ` FROM subscriptions INDEXED BY subscriptions_payer
		WHERE payer_kind = ?1 AND payer_id = ?2 AND (?3 = '' OR status = ?3) AND (source_updated_at, subscription_id) < (?4, ?5)
		ORDER BY source_updated_at DESC, subscription_id DESC LIMIT ?6`
	// qSubscriptionsByStatus: subscriptions_status, backwards from the cursor.
	qSubscriptionsByStatus = `SELECT ` + subscriptionColumns + ` FROM subscriptions INDEXED BY subscriptions_status
		WHERE status = ? AND (source_updated_at, subscription_id) < (?, ?)
		ORDER BY source_updated_at DESC, subscription_id DESC LIMIT ?`
	// qSubscriptionsAll: subscriptions_time, backwards from the cursor.
	qSubscriptionsAll = `SELECT ` + subscriptionColumns + ` FROM subscriptions INDEXED BY subscriptions_time
		WHERE (source_updated_at, subscription_id) < (?, ?) ORDER BY source_updated_at DESC, subscription_id DESC LIMIT ?`
)
