-- usersync's embedded store: the counts of every kind of object in the
-- summaries of reconcile and backfill runs.

-- What a run did to each kind, a JSON object with a member per kind the
-- run read: {"users": {...}, "organizations": {...}, "memberships":
-- {...}}, each {"clerk", "local" (-1: not read), "applied", "stale",
-- "unchanged", "deleted", "failed", "refused", "toDelete"}. A kind the run
-- did not read (not asked for, or organizations turned off in the Clerk
-- instance) has no member. NULL on the runs recorded before this column:
-- their counts are the users' columns (clerk_users … to_delete), which
-- every run still fills with its users' counts (zeros and local_users -1
-- when it did not read users), and refused, which is the run's.
ALTER TABLE reconcile_runs ADD COLUMN kinds TEXT;
