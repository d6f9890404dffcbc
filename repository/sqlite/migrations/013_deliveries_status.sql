-- usersync's embedded store, schema 13: an endpoint's deliveries of one
-- status, by key (Outbound.Deliveries with a status: the console's
-- pending, failed or dropped deliveries): one range of this index from
-- the cursor on, whatever share of the endpoint's deliveries has that
-- status. It serves the query named in docs/outbound.md's query → index
-- table.

CREATE INDEX deliveries_status ON deliveries (endpoint_id, status, kind, object_id);
