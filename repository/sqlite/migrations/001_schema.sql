-- usersync's embedded store, schema 1. Times are Unix milliseconds (UTC);
-- JSON (metadata, bodies) is kept as text, exactly as received. Every index
-- serves a query named in docs/design.md's query → index table; none is
-- kept for a query that does not exist.

CREATE TABLE users (
	user_id           TEXT    NOT NULL PRIMARY KEY,
	email             TEXT,                 -- lowercased; NULL when none, and on a tombstone
	display_name      TEXT    NOT NULL,
	metadata          TEXT    NOT NULL,     -- Clerk public_metadata, a JSON object
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL,
	deleted_at        INTEGER,              -- set once, never cleared
	source_updated_at INTEGER NOT NULL,     -- Clerk time of the state applied
	last_event_id     TEXT    NOT NULL,
	first_name        TEXT,
	last_name         TEXT,
	username          TEXT,
	image_url         TEXT,
	phone_number      TEXT,
	external_id       TEXT,
	last_sign_in_at   INTEGER,
	banned            INTEGER NOT NULL DEFAULT 0,
	locked            INTEGER NOT NULL DEFAULT 0,
	erase_after       INTEGER,              -- a tombstone whose events may hold personal data
	erased_at         INTEGER               -- a tombstone whose events were all erased
) STRICT, WITHOUT ROWID;

-- Email unique among active users: the rule itself, as a partial index.
CREATE UNIQUE INDEX users_email ON users (email) WHERE deleted_at IS NULL AND email IS NOT NULL;
-- The application's list of active users, in user id order, with no tombstone read.
CREATE INDEX users_active ON users (user_id) WHERE deleted_at IS NULL;
-- The change feed: updated_at, then user_id.
CREATE INDEX users_changes ON users (updated_at, user_id);
-- Erasure: the tombstones still to erase.
CREATE INDEX users_erase ON users (erase_after) WHERE erase_after IS NOT NULL;

CREATE TABLE events (
	id               INTEGER NOT NULL PRIMARY KEY,
	event_id         TEXT    UNIQUE,           -- svix-id, the same on every retry
	type             TEXT    NOT NULL,
	event_type       TEXT    NOT NULL,
	user_id          TEXT,
	raw_body         BLOB,                     -- the exact bytes received; NULL once erased
	source           TEXT    NOT NULL,
	signature        TEXT    NOT NULL,
	signature_valid  INTEGER,                  -- NULL: not checked
	source_timestamp INTEGER,
	received_at      INTEGER NOT NULL,
	processed_at     INTEGER,
	status           TEXT    NOT NULL,
	outcome          TEXT,
	attempts         INTEGER NOT NULL DEFAULT 0,
	error            TEXT,
	retry_at         INTEGER,                  -- failed, with attempts left
	claimed_until    INTEGER,
	erased_at        INTEGER
) STRICT;

-- The event log, newest first, unfiltered and by each filter.
CREATE INDEX events_log ON events (received_at, id);
CREATE INDEX events_status ON events (status, received_at, id);
CREATE INDEX events_type ON events (event_type, received_at, id);
CREATE INDEX events_user ON events (user_id, received_at, id);
CREATE INDEX events_status_type ON events (status, event_type, received_at, id);
-- The sweep: failed events whose retry time has come.
CREATE INDEX events_retry ON events (retry_at) WHERE retry_at IS NOT NULL;
-- Retention: processed events, oldest first.
CREATE INDEX events_processed ON events (processed_at) WHERE processed_at IS NOT NULL;

-- Counters moved in the transaction of the write they count (outcomes of
-- processed events), so that stats never count events.
CREATE TABLE counters (
	name TEXT    NOT NULL PRIMARY KEY,
	n    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE leases (
	name       TEXT    NOT NULL PRIMARY KEY,
	owner      TEXT    NOT NULL,
	expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
