-- Issue 30: the audit log, one row per change a person or service made (docs/operations.md#the-audit-log).
-- Kept `audit.retention_days` by the housekeeping job (trimmed by `at`), never by the
-- transitions' retention. AUTOINCREMENT: an id is never reused once trimmed, so a cursor
-- (`GET /audit?before=<id>`) always means the same place. `before`/`after` are JSON text
-- (at most 4 KiB each, domain/audit-entry.ts). Pages are newest first by id: each filter
-- has an index ending in id, so a filtered page is one index range, and `at` for the trim.
CREATE TABLE audit (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  at         INTEGER NOT NULL,
  who        TEXT    NOT NULL,
  action     TEXT    NOT NULL,
  circuit    TEXT,
  before     TEXT,
  after      TEXT,
  request_id TEXT,
  remote     TEXT
);
CREATE INDEX audit_at ON audit (at);
CREATE INDEX audit_circuit ON audit (circuit, id);
CREATE INDEX audit_who ON audit (who, id);
CREATE INDEX audit_action ON audit (action, id);
