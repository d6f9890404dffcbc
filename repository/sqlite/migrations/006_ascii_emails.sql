-- usersync's embedded store, schema 6: every active user's email
-- recomputed from its last applied payload by models.NormalizeEmail's rule
-- (ASCII letters lowercased, every other character as it is). Earlier
-- versions folded case the Unicode way, so an address written with a
-- look-alike letter (the Kelvin sign for K) was stored as another user's
-- address and could take it from that user. Users whose email comes out
-- the same are left as they are; the others give up their email, then
-- each email recomputed goes to the newest state claiming it, as a
-- webhook's claim would (models.TakesEmailFrom), taking it from an older
-- holder. A user whose last payload was erased or cannot be read keeps
-- its email. The operator runs reconcile after the upgrade: Clerk's
-- current state settles whatever a look-alike changed before it.
--
-- Reads: the active users and their last applied events of a store below
-- schema 6 (written by versions before c0b5adc, 2026-11-26, "Upgrade:
-- every active user's email is recomputed from its last applied
-- payload").
-- Remove: every statement below, in the first release after no store
-- below schema 6 is left; the file stays, with these lines (a store's
-- schema number counts the files).

-- The recomputed email of every active user whose last applied event
-- still has its body (events by event_id: its unique index).
CREATE TEMP TABLE email_recomputed AS
SELECT u.user_id AS user_id, u.source_updated_at AS source, u.last_event_id AS event_id,
	(SELECT nullif(lower(trim(a.value ->> '$.email_address', ' ' || char(9, 10, 11, 12, 13))), '')
		FROM json_each(CAST(e.raw_body AS TEXT), '$.data.email_addresses') AS a
		WHERE a.value ->> '$.id' = CAST(e.raw_body AS TEXT) ->> '$.data.primary_email_address_id'
		ORDER BY a.key LIMIT 1) AS email
FROM users AS u JOIN events AS e ON e.event_id = u.last_event_id
WHERE u.deleted_at IS NULL AND e.raw_body IS NOT NULL AND json_valid(CAST(e.raw_body AS TEXT));

-- Those whose email stays as it is are left alone.
DELETE FROM email_recomputed
WHERE email IS (SELECT users.email FROM users WHERE users.user_id = email_recomputed.user_id);
CREATE INDEX temp.email_recomputed_email ON email_recomputed (email);

-- The others give up the email they hold.
UPDATE users SET email = NULL, updated_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
WHERE user_id IN (SELECT user_id FROM email_recomputed) AND email IS NOT NULL;

-- Each recomputed email goes to the newest state claiming it, unless an
-- active user with a newer state holds it (users_email).
CREATE TEMP TABLE email_claims AS
SELECT c.user_id AS user_id, c.email AS email FROM email_recomputed AS c
WHERE c.email IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM email_recomputed AS o
		WHERE o.email = c.email AND (o.source, o.event_id) > (c.source, c.event_id))
	AND NOT EXISTS (SELECT 1 FROM users AS h
		WHERE h.email = c.email AND h.deleted_at IS NULL
		AND (h.source_updated_at, h.last_event_id) > (c.source, c.event_id));

UPDATE users SET email = NULL, updated_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
WHERE deleted_at IS NULL AND email IN (SELECT email FROM email_claims);
UPDATE users SET email = (SELECT email FROM email_claims WHERE email_claims.user_id = users.user_id),
	updated_at = CAST(unixepoch('subsec') * 1000 AS INTEGER)
WHERE user_id IN (SELECT user_id FROM email_claims);

DROP TABLE email_claims;
DROP TABLE email_recomputed;
