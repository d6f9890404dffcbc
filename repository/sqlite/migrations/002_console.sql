-- Schema 2: what the operator's console reads besides the event log.

-- Counts of events received and of processing outcomes per bucket of time
-- (a minute or an hour) and kind, added to as events arrive: the charts
-- read a range of buckets, never the events. Old buckets are deleted as
-- new ones are written (models.ActivityMinuteRetention,
-- models.ActivityHourRetention), so the table stays small.
CREATE TABLE activity (
	size  INTEGER NOT NULL,  -- the bucket's length: 60000 (a minute) or 3600000 (an hour)
	start INTEGER NOT NULL,  -- the bucket's start, a multiple of its size
	kind  TEXT    NOT NULL,  -- models.ActivityKinds
	n     INTEGER NOT NULL,
	PRIMARY KEY (size, start, kind)
) STRICT, WITHOUT ROWID;

-- The summaries of the last reconcile and backfill runs (at most
-- models.KeptReconcileRuns: each insert deletes the older ones).
CREATE TABLE reconcile_runs (
	id           INTEGER NOT NULL PRIMARY KEY,
	kind         TEXT    NOT NULL,
	triggered_by TEXT    NOT NULL,  -- schedule or command
	started_at   INTEGER NOT NULL,
	duration_ms  INTEGER NOT NULL,
	success      INTEGER NOT NULL,
	error        TEXT,
	clerk_users  INTEGER NOT NULL,
	local_users  INTEGER NOT NULL,  -- -1: not read
	applied      INTEGER NOT NULL,
	stale        INTEGER NOT NULL,
	unchanged    INTEGER NOT NULL,
	deleted      INTEGER NOT NULL,
	failed       INTEGER NOT NULL,
	refused      INTEGER NOT NULL,
	to_delete    INTEGER NOT NULL
) STRICT;

-- The runs, latest start first, and the prune of all but the last ones.
CREATE INDEX reconcile_runs_started ON reconcile_runs (started_at, id);
