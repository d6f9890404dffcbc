-- usersync's embedded store, schema 17: a user's last activity, from
-- Clerk's session events (models.SessionChange). It is not a change of the
-- user: writing it moves neither updated_at nor the change feed. NULL when
-- no session event told of one, and on a tombstone. No index: it is read
-- and written with its user, by the primary key.
ALTER TABLE users ADD COLUMN last_active_at INTEGER;
