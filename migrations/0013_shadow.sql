-- Issue 31: a circuit's shadow policy and its own run-time state (src/domain/shadow.ts), as the
-- JSON text of domain/circuit-record.ts. NULL: no shadow (every circuit before it).
ALTER TABLE circuits ADD COLUMN shadow TEXT;
