-- Breaker policies (issue 8): half-open success threshold, sliding window, open-time backoff,
-- forced states, and the run-time state they need. Existing circuits keep today's behaviour.
ALTER TABLE circuits ADD COLUMN success_threshold INTEGER NOT NULL DEFAULT 1 CHECK (success_threshold BETWEEN 1 AND 1000);
-- JSON of the domain's WindowPolicy / BackoffPolicy, or NULL for none
ALTER TABLE circuits ADD COLUMN window_policy TEXT;
ALTER TABLE circuits ADD COLUMN backoff_policy TEXT;
ALTER TABLE circuits ADD COLUMN forced_state TEXT CHECK (forced_state IN ('open', 'closed'));
-- successful probes in a row while half-open
ALTER TABLE circuits ADD COLUMN probe_successes INTEGER NOT NULL DEFAULT 0;
-- the open time in force (seconds), set at each opening; NULL while closed
ALTER TABLE circuits ADD COLUMN open_timeout_seconds INTEGER;
ALTER TABLE circuits ADD COLUMN reopen_count INTEGER NOT NULL DEFAULT 0;
-- JSON of the domain's WindowState (the outcomes in the window), or NULL when empty
ALTER TABLE circuits ADD COLUMN window_state TEXT;
