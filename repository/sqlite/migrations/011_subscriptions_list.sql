-- usersync's embedded store, schema 11: the admin's list of
-- subscriptions (Billing.Subscriptions). Pages of subscriptions, the
-- newest Clerk time first, then the largest subscription id: those of one
-- payer (a status, if given too, is checked on the rows: a payer has a
-- few), those in one status, all. Each index serves a query named in
-- docs/billing.md's query → index table.

CREATE INDEX subscriptions_payer ON subscriptions (payer_kind, payer_id, source_updated_at, subscription_id);
CREATE INDEX subscriptions_status ON subscriptions (status, source_updated_at, subscription_id);
CREATE INDEX subscriptions_time ON subscriptions (source_updated_at, subscription_id);
