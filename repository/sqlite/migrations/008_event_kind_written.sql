-- usersync's embedded store, schema 8: an event's kind is written with the
-- event, from the kinds table (models.KindOf), instead of being computed
-- here from its type by a second statement of that table: a new kind
-- needs no change of the event log. Rows written before get the kind the
-- generated column gave them.
DROP INDEX events_type;
DROP INDEX events_status_type;
ALTER TABLE events DROP COLUMN kind;
ALTER TABLE events ADD COLUMN kind TEXT;
-- Reads: the events of a store below schema 8 (written by versions before
-- 9d4d5e2, 2026-11-27, "A test-only kind, added by its row").
-- Remove: this UPDATE alone, in the first release after no store below
-- schema 8 is left; the file stays (a store's schema number counts the
-- files).
UPDATE events SET kind = CASE substr(type, 1, instr(type, '.'))
		WHEN 'user.' THEN 'user'
		WHEN 'organization.' THEN 'organization'
		WHEN 'organizationMembership.' THEN 'membership'
	END;
CREATE INDEX events_type ON events (kind, event_type, received_at, id);
CREATE INDEX events_status_type ON events (status, kind, event_type, received_at, id);
