-- Issue 20: the number of circuits, kept by triggers, so `limits.max_circuits` and the
-- metrics read one row instead of counting the table (count(*) walks an index: O(N)).
CREATE TABLE circuit_count (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  n  INTEGER NOT NULL
);
INSERT INTO circuit_count (id, n) SELECT 1, count(*) FROM circuits;
CREATE TRIGGER circuit_count_insert AFTER INSERT ON circuits BEGIN UPDATE circuit_count SET n = n + 1 WHERE id = 1; END;
CREATE TRIGGER circuit_count_delete AFTER DELETE ON circuits BEGIN UPDATE circuit_count SET n = n - 1 WHERE id = 1; END;
