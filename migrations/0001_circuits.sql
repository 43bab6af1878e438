-- Breaker state, one row per named circuit. Times are epoch milliseconds (UTC).
CREATE TABLE circuits (
  id                  INTEGER PRIMARY KEY AUTOINCREMENT,
  name                TEXT    NOT NULL UNIQUE,
  state               TEXT    NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
  failure_count       INTEGER NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
  failure_threshold   INTEGER NOT NULL CHECK (failure_threshold > 0),
  timeout_seconds     INTEGER NOT NULL CHECK (timeout_seconds > 0),
  half_open_max_calls INTEGER NOT NULL DEFAULT 1 CHECK (half_open_max_calls > 0),
  -- JSON array of probe-lease expiry times handed out while half-open
  probe_leases        TEXT    NOT NULL DEFAULT '[]',
  open_until          INTEGER,
  half_open_at        INTEGER,
  last_failure_at     INTEGER,
  created_at          INTEGER NOT NULL,
  updated_at          INTEGER NOT NULL
);

CREATE INDEX circuits_state ON circuits (state, id);

-- The log in circuitlog: one row per state change, written in the same transaction.
CREATE TABLE transitions (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  circuit_id  INTEGER NOT NULL REFERENCES circuits (id) ON DELETE CASCADE,
  from_state  TEXT    NOT NULL,
  to_state    TEXT    NOT NULL,
  reason      TEXT    NOT NULL,
  at          INTEGER NOT NULL
);

CREATE INDEX transitions_circuit ON transitions (circuit_id, id);
