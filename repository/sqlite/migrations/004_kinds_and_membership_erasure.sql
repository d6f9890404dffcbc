-- usersync's embedded store, schema 4: the event log by kind of object and by
-- object, and the erasure of a deleted membership's member data. Every index
-- serves a query named in docs/organizations.md's query → index table.

-- The kind of object an event changes (models.KindOf): computed from type,
-- never stored in a row; the indexes below hold it.
ALTER TABLE events ADD COLUMN kind TEXT GENERATED ALWAYS AS (
	CASE substr(type, 1, instr(type, '.'))
		WHEN 'user.' THEN 'user'
		WHEN 'organization.' THEN 'organization'
		WHEN 'organizationMembership.' THEN 'membership'
	END) VIRTUAL;

-- The event log by kind and event type, and by status, kind and event type
-- (they replace the indexes by event type): a filter that names neither
-- kind nor event type, or one of them only, reads one range per value it
-- leaves open and merges them (at most 3 × 3 ranges, each a page long).
DROP INDEX events_type;
DROP INDEX events_status_type;
CREATE INDEX events_type ON events (kind, event_type, received_at, id);
CREATE INDEX events_status_type ON events (status, kind, event_type, received_at, id);

-- An organization's or membership's events: the event log filtered by
-- objectId, and the erasure of a deleted membership's events. User events
-- (object_id NULL) are not in it.
CREATE INDEX events_object ON events (object_id, received_at, id) WHERE object_id IS NOT NULL;

-- A membership tombstone carries erase_after (its deletion time) while its
-- events may hold the member's public_user_data, erased_at once they are
-- all erased, as users' tombstones do.
ALTER TABLE memberships ADD COLUMN erase_after INTEGER;
ALTER TABLE memberships ADD COLUMN erased_at INTEGER;
-- Reads: the membership tombstones of a store below schema 4 (written by
-- versions before 9358268, 2026-11-25).
-- Remove: this UPDATE alone, in the first release after no store below
-- schema 4 is left; the file stays (a store's schema number counts the
-- files).
UPDATE memberships SET erase_after = deleted_at WHERE deleted_at IS NOT NULL;
CREATE INDEX memberships_erase ON memberships (erase_after) WHERE erase_after IS NOT NULL;
