-- usersync's embedded store, schema 15: what an endpoint keeps while it
-- is away. needs_resync marks an endpoint that, disabled, kept more
-- changes than usersync keeps for it; resync is its resync under way or
-- last (JSON of models.Resync), and resync_started when it started, which
-- each write of its progress is conditional on (a newer resync replaces
-- an older one's progress, never the other way).

ALTER TABLE endpoints ADD COLUMN needs_resync INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN resync TEXT;
ALTER TABLE endpoints ADD COLUMN resync_started INTEGER;
