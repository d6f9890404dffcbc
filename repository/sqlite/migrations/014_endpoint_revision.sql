-- usersync's embedded store, schema 14: an endpoint's revision, which
-- every write of it moves on. An admin's change (or the configuration's)
-- is written only over the revision it read, and the sender's record of
-- an endpoint's health changes only its own columns, so no write undoes
-- another. Endpoints of earlier schemas start at revision 1.

ALTER TABLE endpoints ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
