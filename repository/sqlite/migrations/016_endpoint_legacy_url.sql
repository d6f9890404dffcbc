-- usersync's embedded store, schema 16: whether an endpoint's URL was set
-- by a usersync that let any endpoint be on plain http://. Every endpoint
-- of an earlier schema was (1): one on http:// keeps working, with a
-- warning, until its URL changes. usersync writes 0 for an endpoint it
-- creates and for a URL it changes, which a public address then refuses
-- plain http (USERSYNC_ENDPOINTS_ALLOW_HTTP).

ALTER TABLE endpoints ADD COLUMN legacy_url INTEGER NOT NULL DEFAULT 1;
