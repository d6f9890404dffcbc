-- usersync's embedded store, schema 9: Clerk Billing. Subscriptions, their
-- items and payment attempts, each the newest state applied (ordered by
-- source_updated_at, then last_event_id, as every kind; Clerk deletes none
-- of them, so there is no tombstone), and each payer's plan, computed
-- from the payer's items (models.PlanOf) in the transaction that writes
-- one of them. Times are Unix milliseconds (UTC), JSON is text, "" is
-- stored as NULL. A payer is a user or an organization: payer_kind
-- ('user' or 'organization') and payer_id (its user_… or org_… id);
-- clerk_payer_id is Clerk's id of the payer (cpayer_…), NULL when the
-- event did not give it. Every index serves a query named in
-- docs/billing.md's query → index table.

CREATE TABLE subscriptions (
	subscription_id   TEXT    NOT NULL PRIMARY KEY, -- csub_…
	payer_kind        TEXT    NOT NULL,
	payer_id          TEXT    NOT NULL,
	clerk_payer_id    TEXT,
	status            TEXT    NOT NULL,             -- Clerk's status of the subscription
	active_at         INTEGER,
	canceled_at       INTEGER,
	ended_at          INTEGER,
	past_due_at       INTEGER,
	latest_payment_id TEXT,                         -- cpa_…: a payment attempt's payment_id
	payment_source_id TEXT,
	source_created_at INTEGER,                      -- Clerk's created_at
	source_updated_at INTEGER NOT NULL,             -- Clerk's updated_at of the state applied
	last_event_id     TEXT    NOT NULL,
	created_at        INTEGER NOT NULL,             -- usersync's first write
	updated_at        INTEGER NOT NULL              -- usersync's last write
) STRICT, WITHOUT ROWID;

CREATE TABLE subscription_items (
	item_id           TEXT    NOT NULL PRIMARY KEY, -- csub_item_…
	subscription_id   TEXT,                         -- NULL when the event did not name it
	payer_kind        TEXT    NOT NULL,
	payer_id          TEXT    NOT NULL,
	clerk_payer_id    TEXT,
	status            TEXT    NOT NULL,             -- active, past_due, canceled, upcoming, ended, abandoned, incomplete
	is_free_trial     INTEGER NOT NULL,
	period_start      INTEGER,
	period_end        INTEGER,                      -- NULL: no end (the default free plan)
	interval          TEXT,
	plan_id           TEXT    NOT NULL,             -- cplan_…
	plan_slug         TEXT    NOT NULL,
	plan_name         TEXT,
	plan_amount       INTEGER,                      -- the currency's smallest unit
	plan_currency     TEXT,
	plan_is_recurring INTEGER NOT NULL,
	seats             INTEGER,                      -- NULL: unlimited
	source_created_at INTEGER,
	source_updated_at INTEGER NOT NULL,
	last_event_id     TEXT    NOT NULL,
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- The items of a payer, the newest Clerk time first: what the plan is
-- computed from (at most models.MaxPayerItems of them), and Billing.Items.
CREATE INDEX subscription_items_payer ON subscription_items (payer_kind, payer_id, source_updated_at, item_id);

CREATE TABLE payment_attempts (
	attempt_id             TEXT    NOT NULL PRIMARY KEY, -- data.id
	payment_id             TEXT    NOT NULL,             -- cpa_…
	payer_kind             TEXT    NOT NULL,
	payer_id               TEXT    NOT NULL,
	clerk_payer_id         TEXT,
	status                 TEXT    NOT NULL,             -- pending, paid, failed
	charge_type            TEXT,
	paid_at                INTEGER,
	failed_at              INTEGER,
	failed_code            TEXT,
	failed_decline_code    TEXT,
	totals                 TEXT,                         -- Clerk's totals, a JSON object; NULL when none
	subscription_item_ids  TEXT    NOT NULL,             -- a JSON array of item ids
	source_created_at      INTEGER,
	source_updated_at      INTEGER NOT NULL,
	last_event_id          TEXT    NOT NULL,
	created_at             INTEGER NOT NULL,
	updated_at             INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Pages of payment attempts, the newest Clerk time first, then the
-- largest attempt id: those of one payment, those of one payer, all.
CREATE INDEX payment_attempts_payment ON payment_attempts (payment_id, source_updated_at, attempt_id);
CREATE INDEX payment_attempts_payer ON payment_attempts (payer_kind, payer_id, source_updated_at, attempt_id);
CREATE INDEX payment_attempts_time ON payment_attempts (source_updated_at, attempt_id);

-- A payer's plan: models.PayerPlan as a JSON object (the keys of
-- repository/sqlite/billing.go's planDoc), one row per payer that has
-- items. updated_at is usersync's time of the last write that changed the
-- plan; a write that leaves it as it was does not touch the row.
CREATE TABLE billing_plans (
	payer_kind TEXT    NOT NULL,
	payer_id   TEXT    NOT NULL,
	plan       TEXT    NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (payer_kind, payer_id)
) STRICT, WITHOUT ROWID;
