-- Issue 27 item 9: a circuit's caller table as one row per caller, so a write that changes one
-- caller writes that row (before: the whole table, up to quorum.max_callers entries of about
-- 170 bytes, as one JSON column re-serialised per write). The columns are the domain's
-- CallerEntry tuple in order; `seq` keeps the recency order (least recently seen: lowest).
-- Every existing row's `callers` JSON moves here (a duplicate caller, never written by the
-- domain, keeps its most recent entry, as the domain's lookup would), then the column goes.
CREATE TABLE caller_entries (
  circuit_id       INTEGER NOT NULL REFERENCES circuits (id) ON DELETE CASCADE,
  caller           TEXT    NOT NULL,
  failures         INTEGER NOT NULL,
  failed_at        INTEGER,
  slow_at          INTEGER,
  isolated_until   INTEGER,
  isolated_seconds INTEGER NOT NULL,
  probe_until      INTEGER,
  seq              INTEGER NOT NULL,
  PRIMARY KEY (circuit_id, caller)
);
CREATE INDEX caller_entries_order ON caller_entries (circuit_id, seq);
-- The isolated callers alone, for /metrics' isolated-caller gauge (a partial index: only those rows).
CREATE INDEX caller_entries_isolated ON caller_entries (circuit_id) WHERE isolated_until IS NOT NULL;
INSERT OR REPLACE INTO caller_entries
  (circuit_id, caller, failures, failed_at, slow_at, isolated_until, isolated_seconds, probe_until, seq)
  SELECT c.id, json_extract(e.value, '$[0]'), json_extract(e.value, '$[1]'), json_extract(e.value, '$[2]'),
    json_extract(e.value, '$[3]'), json_extract(e.value, '$[4]'), json_extract(e.value, '$[5]'),
    json_extract(e.value, '$[6]'), e.key + 1
  FROM circuits AS c, json_each(c.callers) AS e
  WHERE c.callers IS NOT NULL
  ORDER BY c.id, e.key;
ALTER TABLE circuits DROP COLUMN callers;
