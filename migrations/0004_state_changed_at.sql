-- When the service applied each circuit's last state change (issue 15): an outcome whose call
-- ended before it is stale. Existing circuits take their last state-changing transition's time
-- (NULL when there is none). Epoch milliseconds.
ALTER TABLE circuits ADD COLUMN state_changed_at INTEGER;
UPDATE circuits SET state_changed_at =
  (SELECT max(t.at) FROM transitions t WHERE t.circuit_id = circuits.id AND t.from_state <> t.to_state);
