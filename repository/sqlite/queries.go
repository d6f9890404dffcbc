package sqlite

// The queries whose cost depends on the size of the tables, each with the
// index that serves it (the explain test checks the plan of every one:
// a SEARCH or an ordered SCAN of that index, never a scan of a table or a
// sort in a temporary B-tree). docs/design.md's query → index table lists
// them beside the MongoDB store's.
const (
	// qUserGet: the primary key.
	qUserGet = `SELECT ` + userColumns + ` FROM users WHERE user_id = ?`
	// qEmailHolder: users_email.
	qEmailHolder = `SELECT user_id, source_updated_at, last_event_id FROM users
		WHERE email = ? AND deleted_at IS NULL`
	// qUsersByEmail: users_email.
	qUsersByEmail = `SELECT ` + userColumns + ` FROM users
		WHERE email = ? AND deleted_at IS NULL AND user_id > ? ORDER BY user_id LIMIT ?`
	// qUsersActive: users_active, from the cursor on.
	qUsersActive = `SELECT ` + userColumns + ` FROM users INDEXED BY users_active
		WHERE deleted_at IS NULL AND user_id > ? ORDER BY user_id LIMIT ?`
	// qUsersAll: the primary key, from the cursor on.
	qUsersAll = `SELECT ` + userColumns + ` FROM users WHERE user_id > ? ORDER BY user_id LIMIT ?`
	// qUserChanges: users_changes, from the cursor on.
	qUserChanges = `SELECT ` + userColumns + ` FROM users INDEXED BY users_changes
		WHERE updated_at >= ? AND updated_at <= ? AND (updated_at, user_id) > (?, ?)
		ORDER BY updated_at, user_id LIMIT ?`
	// qUsersWalk: users_active, a batch from the last id on.
	qUsersWalk = `SELECT user_id, created_at FROM users INDEXED BY users_active
		WHERE deleted_at IS NULL AND user_id > ? ORDER BY user_id LIMIT ?`
	// qEraseDue: users_erase.
	qEraseDue = `SELECT user_id, erase_after FROM users INDEXED BY users_erase
		WHERE erase_after <= ? AND (erase_after, user_id) > (?, ?) ORDER BY erase_after, user_id LIMIT ?`
	// qEraseEvents: events_user.
	qEraseEvents = `UPDATE events INDEXED BY events_user SET raw_body = NULL, erased_at = ?
		WHERE user_id = ? AND erased_at IS NULL
		AND (status = 'processed' OR (status = 'failed' AND retry_at IS NULL))`
	// qErasePending: events_user.
	qErasePending = `SELECT count(*) FROM events INDEXED BY events_user WHERE user_id = ? AND erased_at IS NULL`
	// qDueStored: events_status.
	qDueStored = `SELECT ` + eventColumns + bodyColumn + ` FROM events INDEXED BY events_status
		WHERE status = 'stored' AND received_at < ? ORDER BY received_at, id LIMIT ?`
	// qDueFailed: events_retry.
	qDueFailed = `SELECT ` + eventColumns + bodyColumn + ` FROM events INDEXED BY events_retry
		WHERE retry_at <= ? ORDER BY retry_at LIMIT ?`
	// qRetention: events_processed.
	qRetention = `SELECT id, outcome FROM events INDEXED BY events_processed
		WHERE processed_at < ? AND status = 'processed' ORDER BY processed_at LIMIT ?`
	// qStats: events_status (stored, failed), events_retry (failed with a retry).
	qStats = `SELECT
		(SELECT count(*) FROM events INDEXED BY events_status WHERE status = 'stored'),
		(SELECT count(*) FROM events INDEXED BY events_status WHERE status = 'failed'),
		(SELECT count(*) FROM events INDEXED BY events_retry WHERE retry_at IS NOT NULL)`
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
)
