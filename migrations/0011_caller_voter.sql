-- Issue 30: the credential that reported for a caller (its "voter"), so a quorum counts distinct
-- credentials, not caller names. NULL: no named credential reported (no credentials configured,
-- CIRCUITLOG_TOKEN, or a row from before): the caller counts as its own voter, as before.
ALTER TABLE caller_entries ADD COLUMN voter TEXT;
