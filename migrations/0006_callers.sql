-- Issue 17: caller quorum and isolation. A circuit's quorum policy (JSON of the domain's
-- QuorumPolicy, NULL for none) and what it keeps per named caller (JSON array of the domain's
-- CallerEntry tuples, NULL for none; at most quorum.max_callers entries). Transitions gain the
-- members beyond from/to/reason/at (JSON: callers, rule, until, forcedState; NULL for none).
ALTER TABLE circuits ADD COLUMN quorum_policy TEXT;
ALTER TABLE circuits ADD COLUMN callers TEXT;
ALTER TABLE transitions ADD COLUMN detail TEXT;
