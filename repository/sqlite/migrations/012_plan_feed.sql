-- usersync's embedded store, schema 12: the plans' change feed
-- (Billing.PlanChanges). The payers' plans whose updated_at (usersync's
-- time of the last write that changed the plan) is within a range, oldest
-- first, then the payer: one range of this index from the cursor on. It
-- serves the query named in docs/billing.md's query → index table.

CREATE INDEX billing_plans_changes ON billing_plans (updated_at, payer_kind, payer_id);
