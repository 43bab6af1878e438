-- Issue 32: the highest outcome number applied per source (src/domain/outcome-source.ts), as the
-- JSON text of domain/circuit-record.ts, so an outcome a relay sends again counts once. NULL: none.
ALTER TABLE circuits ADD COLUMN outcome_sources TEXT;
