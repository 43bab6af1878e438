-- Issue 29: outcome kinds, the dependency's Retry-After (cool-downs) and the shared slow start.
-- The policy's kind rules (JSON of the domain's KindPolicy: count_as, min_deadline_ms,
-- max_retry_after_seconds, throttle_scope; NULL: the defaults) and its ramp (JSON of RampPolicy;
-- NULL: off); the run-time cool-downs (the circuit's end, the callers' [[caller, until]]) with
-- the soonest end of any (`cool_due_at`: the due-transition timer ends them there), and the
-- ramp's end. Existing circuits keep today's behaviour: every column NULL.
ALTER TABLE circuits ADD COLUMN kind_policy TEXT;
ALTER TABLE circuits ADD COLUMN ramp_policy TEXT;
ALTER TABLE circuits ADD COLUMN cool_until INTEGER;
ALTER TABLE circuits ADD COLUMN cool_callers TEXT;
ALTER TABLE circuits ADD COLUMN cool_due_at INTEGER;
ALTER TABLE circuits ADD COLUMN ramp_until INTEGER;
-- Only the circuits cooling down: the due-transition round finds them without a scan.
CREATE INDEX circuits_cool_due ON circuits (cool_due_at) WHERE cool_due_at IS NOT NULL;
