-- usersync's embedded store, schema 10: outbound webhooks. The endpoints;
-- the outbox, one row per change that applied while an endpoint was
-- enabled, written in the transaction of the change; each endpoint's
-- delivery of each object (the newest change waiting for it, and a
-- fingerprint of the last state it received); the attempts, for the
-- console. Ids, versions and names only: a delivery's body is rendered
-- from the object's row when it is sent. Times are Unix milliseconds
-- (UTC); JSON is text. Every index serves a query named in
-- docs/outbound.md's query → index table.

CREATE TABLE endpoints (
	id              TEXT    NOT NULL PRIMARY KEY, -- ep_… (cfg_… from configuration)
	url             TEXT    NOT NULL,
	description     TEXT    NOT NULL,
	event_types     TEXT    NOT NULL,             -- JSON array; [] for every type
	enabled         INTEGER NOT NULL,
	disabled        TEXT    NOT NULL,             -- why usersync disabled it; '' for none
	secret          TEXT    NOT NULL,
	previous_secret TEXT    NOT NULL,
	previous_until  INTEGER,
	from_config     INTEGER NOT NULL,
	failing_since   INTEGER,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE outbox (
	id          INTEGER NOT NULL PRIMARY KEY,   -- the order of the changes
	kind        TEXT    NOT NULL,
	object_id   TEXT    NOT NULL,
	user_id     TEXT    NOT NULL,
	source_time INTEGER NOT NULL,
	event_id    TEXT    NOT NULL,
	deleted     INTEGER NOT NULL,
	change      TEXT    NOT NULL,               -- created, updated or deleted
	origin      TEXT    NOT NULL,
	at          INTEGER NOT NULL
) STRICT;

CREATE TABLE deliveries (
	endpoint_id   TEXT    NOT NULL,
	kind          TEXT    NOT NULL,
	object_id     TEXT    NOT NULL,
	user_id       TEXT    NOT NULL,
	message_id    TEXT    NOT NULL,
	source_time   INTEGER NOT NULL,
	event_id      TEXT    NOT NULL,
	deleted       INTEGER NOT NULL,
	change        TEXT    NOT NULL,
	origin        TEXT    NOT NULL,
	status        TEXT    NOT NULL,             -- pending, delivered, failed, dropped
	attempts      INTEGER NOT NULL,
	next_at       INTEGER NOT NULL,
	since         INTEGER NOT NULL,
	fields        TEXT,                         -- JSON object: field → hash; NULL: nothing received
	sent          TEXT,                         -- the data last received, of a plan only (no personal data)
	last_status   INTEGER NOT NULL,
	last_error    TEXT    NOT NULL,
	last_at       INTEGER,
	delivered_at  INTEGER,
	delivered_msg TEXT    NOT NULL,
	PRIMARY KEY (endpoint_id, kind, object_id)
) STRICT, WITHOUT ROWID;

-- Due: an endpoint's pending deliveries, soonest first; Backlog per
-- endpoint, the oldest first.
CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_at) WHERE status = 'pending';
CREATE INDEX deliveries_backlog ON deliveries (endpoint_id, since) WHERE status = 'pending';
-- Requeue: an endpoint's deliveries last attempted in a window.
CREATE INDEX deliveries_last ON deliveries (endpoint_id, last_at) WHERE last_at IS NOT NULL;
-- Erasure: a user's deliveries (of the user, and of its memberships).
CREATE INDEX deliveries_user ON deliveries (user_id) WHERE user_id <> '';

CREATE TABLE delivery_attempts (
	id          INTEGER NOT NULL PRIMARY KEY,   -- newest last
	endpoint_id TEXT    NOT NULL,
	message_id  TEXT    NOT NULL,
	type        TEXT    NOT NULL,
	object_id   TEXT    NOT NULL,
	at          INTEGER NOT NULL,
	status      INTEGER NOT NULL,
	latency_ms  INTEGER NOT NULL,
	error       TEXT    NOT NULL,
	delivered   INTEGER NOT NULL
) STRICT;

-- Attempts of one endpoint, newest first (and its failures). The oldest
-- are deleted by the primary key, the order they were recorded in.
CREATE INDEX delivery_attempts_endpoint ON delivery_attempts (endpoint_id, id);
CREATE INDEX delivery_attempts_failed ON delivery_attempts (endpoint_id, id) WHERE delivered = 0;
CREATE INDEX delivery_attempts_all_failed ON delivery_attempts (id) WHERE delivered = 0;
