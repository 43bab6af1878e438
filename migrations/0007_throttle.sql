-- Soft throttling (issue 21): the policy's `throttle` (JSON of the domain's ThrottlePolicy,
-- NULL: off) and its counts while closed (JSON of the domain's ThrottleState: per-second
-- requests and accepts, NULL when empty). Existing circuits keep today's behaviour: off.
ALTER TABLE circuits ADD COLUMN throttle_policy TEXT;
ALTER TABLE circuits ADD COLUMN throttle_state TEXT;
