-- usersync's embedded store: a user's Clerk creation time, and discarded
-- events. This migration stands on schema 5's tables alone (it needs
-- nothing of a migration numbered between them).

-- Clerk's created_at of a user (Unix ms), from the state applied; NULL when
-- the state carried none, and on a tombstone (as organizations'). created_at
-- stays usersync's first write.
ALTER TABLE users ADD COLUMN source_created_at INTEGER;

-- Filled for the users stored before it from the payload of the event
-- that produced their state (last_event_id, through the unique event_id
-- index), as applying it again would: a number, in milliseconds (seconds
-- below 10^12), positive and at most 10^15; anything else, an erased body
-- or a body that is not JSON leaves it NULL.
-- Reads: the active users and their last applied events of a store below
-- schema 7 (written by versions before ca3755c, 2026-11-26, "Users keep
-- Clerk's created_at as sourceCreatedAt").
-- Remove: this UPDATE alone, in the first release after no store below
-- schema 7 is left; the file stays (a store's schema number counts the
-- files).
UPDATE users SET source_created_at = (
	SELECT CASE WHEN typeof(v) IN ('integer', 'real') AND v > 0 AND v <= 1e15
		THEN CASE WHEN v < 1e12 THEN CAST(v AS INTEGER) * 1000 ELSE CAST(v AS INTEGER) END END
	FROM (SELECT json_extract(CAST(raw_body AS TEXT), '$.data.created_at') AS v
		FROM events WHERE event_id = users.last_event_id AND raw_body IS NOT NULL
		AND json_valid(CAST(raw_body AS TEXT))))
WHERE deleted_at IS NULL;

-- A failed event an admin discarded: status 'discarded', processed_at the
-- time it was discarded (retention deletes it as a processed one, through
-- events_processed), and when, why and by whom. The event log by status,
-- the stats and the failures read the status through events_status and
-- events_status_type, as for every status.
ALTER TABLE events ADD COLUMN discarded_at INTEGER;
ALTER TABLE events ADD COLUMN discard_reason TEXT;
ALTER TABLE events ADD COLUMN discarded_by TEXT;
