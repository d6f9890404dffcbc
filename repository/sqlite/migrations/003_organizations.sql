-- usersync's embedded store, schema 3: organizations and memberships, and users
-- off-boarded by Directory Sync. Times are Unix milliseconds (UTC), JSON is
-- text, as in schema 1. Every index serves a query named in
-- docs/organizations.md's query → index table.

-- Directory Sync off-boards a user with user.updated {deprovisioned: true}:
-- the user leaves the active list, its memberships stop counting as active.
ALTER TABLE users ADD COLUMN deprovisioned INTEGER NOT NULL DEFAULT 0;

-- The organization or membership an event changes (data.id); NULL for user
-- events, whose user_id is their object. A membership event's user_id is
-- its member's, so that a user's events and their erasure include them.
ALTER TABLE events ADD COLUMN object_id TEXT;

CREATE TABLE organizations (
	org_id                  TEXT    NOT NULL PRIMARY KEY,
	name                    TEXT,                 -- NULL when none, and on a tombstone
	slug                    TEXT,
	image_url               TEXT,
	metadata                TEXT    NOT NULL,     -- Clerk public_metadata, a JSON object
	members_count           INTEGER,              -- Clerk's, at source_updated_at
	max_allowed_memberships INTEGER,
	created_by              TEXT,
	source_created_at       INTEGER,              -- Clerk's created_at
	created_at              INTEGER NOT NULL,
	updated_at              INTEGER NOT NULL,
	deleted_at              INTEGER,              -- set once, never cleared
	source_updated_at       INTEGER NOT NULL,     -- Clerk time of the state applied
	last_event_id           TEXT    NOT NULL
) STRICT, WITHOUT ROWID;

-- The list of active organizations, in id order, with no tombstone read.
CREATE INDEX organizations_active ON organizations (org_id) WHERE deleted_at IS NULL;
-- The slug filter (a tombstone has no slug).
CREATE INDEX organizations_slug ON organizations (slug, org_id) WHERE slug IS NOT NULL;
-- The change feed: updated_at, then org_id.
CREATE INDEX organizations_changes ON organizations (updated_at, org_id);

CREATE TABLE memberships (
	membership_id     TEXT    NOT NULL PRIMARY KEY,
	org_id            TEXT,                 -- NULL only on a tombstone whose deletion did not name it
	user_id           TEXT,                 -- likewise
	role              TEXT,
	role_name         TEXT,
	permissions       TEXT    NOT NULL,     -- a JSON array of strings
	metadata          TEXT    NOT NULL,     -- Clerk public_metadata, a JSON object
	-- public_user_data: shown when usersync does not have the user.
	first_name        TEXT,
	last_name         TEXT,
	image_url         TEXT,
	identifier        TEXT,
	username          TEXT,
	banned            INTEGER NOT NULL DEFAULT 0,
	deprovisioned     INTEGER NOT NULL DEFAULT 0,
	source_created_at INTEGER,              -- Clerk's created_at
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL,
	deleted_at        INTEGER,              -- set once, never cleared
	source_updated_at INTEGER NOT NULL,
	last_event_id     TEXT    NOT NULL
) STRICT, WITHOUT ROWID;

-- At most one active membership per (organization, user): the rule itself,
-- as a partial unique index; also the holder of a pair, and the cascade of
-- an organization's deletion.
CREATE UNIQUE INDEX memberships_pair ON memberships (org_id, user_id) WHERE deleted_at IS NULL;
-- An organization's memberships, in membership id order.
CREATE INDEX memberships_org ON memberships (org_id, membership_id);
-- A user's memberships, in membership id order; the cascade of a user's deletion.
CREATE INDEX memberships_user ON memberships (user_id, membership_id);
-- The change feed: updated_at, then membership_id.
CREATE INDEX memberships_changes ON memberships (updated_at, membership_id);
