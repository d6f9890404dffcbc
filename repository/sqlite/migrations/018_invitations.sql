-- usersync's embedded store, schema 18: Clerk's organization invitations.
-- Times are Unix milliseconds (UTC), JSON is text, as in schema 1. Every
-- index serves a query named in docs/mongodb-queries.md's table.

CREATE TABLE invitations (
	invitation_id     TEXT    NOT NULL PRIMARY KEY,
	org_id            TEXT    NOT NULL,
	email_address     TEXT,                 -- NULL once erased, and on a tombstone
	role              TEXT,
	role_name         TEXT,
	status            TEXT    NOT NULL,     -- Clerk's: pending, accepted, revoked (expired)
	metadata          TEXT    NOT NULL,     -- Clerk public_metadata, a JSON object
	user_id           TEXT,                 -- the user who accepted it
	expires_at        INTEGER,
	source_created_at INTEGER,              -- Clerk's created_at
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL,
	deleted_at        INTEGER,              -- its organization's deletion; set once, never cleared
	source_updated_at INTEGER NOT NULL,     -- Clerk time of the state applied
	last_event_id     TEXT    NOT NULL,
	-- When its email and its events' bodies are due for erasure (it ended,
	-- or for a pending one its expiry), and when they were erased.
	erase_after       INTEGER,
	erased_at         INTEGER
) STRICT, WITHOUT ROWID;

-- An organization's invitations, in invitation id order: the list with
-- tombstones or with the expired filter; the cascade of its deletion.
CREATE INDEX invitations_org ON invitations (org_id, invitation_id);
-- An organization's invitations of one stored status, in id order.
CREATE INDEX invitations_status ON invitations (org_id, status, invitation_id) WHERE deleted_at IS NULL;
-- The change feed: updated_at, then invitation_id.
CREATE INDEX invitations_changes ON invitations (updated_at, invitation_id);
-- The invitations due for erasure.
CREATE INDEX invitations_erase ON invitations (erase_after) WHERE erase_after IS NOT NULL;
