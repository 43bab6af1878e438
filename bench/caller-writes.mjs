// What one write costs the SQLite store on a circuit with a full caller table (issue 27 item 9):
// a circuit with max_callers 1,000 and 1,000 callers of 128 characters on a file database, then
// 2,000 writes that each change one known caller (it fails again: it moves to the most recent
// end). Prints µs a write and the WAL bytes a write adds (wal_autocheckpoint off).
//
//   npm run build && node bench/caller-writes.mjs [another checkout, built, to compare]
//
// Not a section of bench/run.mjs: it calls the store in-process, no server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const WRITES = 2_000;
const CALLERS = 1_000;
const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const caller = (i) => String(i).padStart(128, 'c');

async function measure(root) {
  const { newCircuit, recordOutcome } = await import(path.join(root, 'dist/domain/circuit.js'));
  const sqlite = await import(path.join(root, 'dist/store/sqlite/database.js'));
  const { SqliteCircuitStore } = await import(path.join(root, 'dist/store/sqlite/circuit-store.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-caller-writes-'));
  const file = path.join(dir, 'db.sqlite');
  const db = sqlite.openDatabase(file, { exclusive: true }); // as a single server process opens it
  try {
    sqlite.migrate(db, sqlite.readMigrations(path.join(root, 'migrations')));
    db.pragma('wal_autocheckpoint = 0');
    const store = new SqliteCircuitStore(db, true);
    const settings = {
      failureThreshold: 1_000_000,
      timeoutSeconds: 30,
      halfOpenMaxCalls: 1,
      quorum: { minCallers: 2, windowSeconds: 3_600, maxCallers: CALLERS },
    };
    const step = (who) => (c) =>
      recordOutcome(c ?? newCircuit('wide', settings, T0), { success: false, late: 'count_only', caller: who }, T0);
    for (let from = 0; from < CALLERS; from += 100) {
      store.applyBatch(Array.from({ length: 100 }, (_, i) => ({ name: 'wide', step: step(caller(from + i)) })));
    }
    db.pragma('wal_checkpoint(TRUNCATE)');
    const started = performance.now();
    for (let i = 0; i < WRITES; i++) store.apply('wide', step(caller((i * 7) % CALLERS)));
    const us = ((performance.now() - started) * 1000) / WRITES;
    const walKiB = fs.statSync(`${file}-wal`).size / WRITES / 1024;
    console.log(
      `${root}: ${us.toFixed(0)} µs a write, ${walKiB.toFixed(1)} KiB of WAL a write (${WRITES} writes, one caller of ${CALLERS} each)`,
    );
  } finally {
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
for (const root of [here, ...process.argv.slice(2).map((r) => path.resolve(r))]) await measure(root);
