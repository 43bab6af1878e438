-- Issue 31: the outcome history (src/domain/history.ts, docs/operations.md#history). One row per
-- entry (an outcome, a manual action, a transition) in the order the writes applied them:
-- `seq` counts per circuit (max + 1 inside the write transaction, which holds the write lock,
-- so several workers number one circuit's entries without gaps or clashes), `t` is the step's
-- time (epoch ms), `e` the entry's short text (`encodeEntry`). WITHOUT ROWID: the row lives in
-- the primary key's b-tree, no second copy of the key. Deleted with its circuit (ON DELETE
-- CASCADE); bounded by `history.max_outcomes` and `history.max_age_hours` (trimmed in the write path).
CREATE TABLE history (
  circuit_id INTEGER NOT NULL,
  seq        INTEGER NOT NULL,
  t          INTEGER NOT NULL,
  e          TEXT    NOT NULL,
  PRIMARY KEY (circuit_id, seq)
) WITHOUT ROWID;
-- The policy field `history` (issue 31): NULL on (the default), the JSON text `false` when off.
ALTER TABLE circuits ADD COLUMN history_policy TEXT;
-- A circuit's history goes with it (a DELETE, idle deletion), by this trigger rather than a
-- foreign key: a foreign key would look its circuit up on every entry's insert.
CREATE TRIGGER circuits_history_delete AFTER DELETE ON circuits
BEGIN
  DELETE FROM history WHERE circuit_id = old.id;
END;
