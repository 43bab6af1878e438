// What the audit log costs on SQLite (issue 30): 200,000 entries on a file database, then one
// append in its own transaction (as a route writes it), and pages of GET /audit as the store
// answers them: newest, behind a deep cursor, and filtered by who, circuit and time.
//
//   npm run build && node bench/audit-pages.mjs
//
// Not a section of bench/run.mjs: it calls the store in-process, no server.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const ENTRIES = 200_000;
const APPENDS = 500;
const RUNS = 20;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { openDatabase, migrate, readMigrations, defaultMigrationsDir } = await import(
  path.join(root, 'dist/store/sqlite/database.js')
);
const { SqliteAuditTable } = await import(path.join(root, 'dist/store/sqlite/audit-table.js'));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-audit-bench-'));
const db = openDatabase(path.join(dir, 'db.sqlite'));
migrate(db, readMigrations(defaultMigrationsDir()));
const table = new SqliteAuditTable(db);
const entry = (n, at) => ({
  at,
  who: n % 100 === 0 ? 'bob' : 'alice',
  action: 'policy_changed',
  circuit: `c${n % 500}`,
  before: { failure_threshold: 5 },
  after: { failure_threshold: 6 },
  requestId: 'bench',
  remote: '127.0.0.1',
});
db.transaction(() => {
  for (let n = 0; n < ENTRIES; n++) table.append(entry(n, 1e12 + n));
})();

let started = performance.now();
for (let i = 0; i < APPENDS; i++) table.append(entry(i, 2e12 + i));
console.log(
  `append (its own transaction, synchronous NORMAL): ${(((performance.now() - started) / APPENDS) * 1000).toFixed(0)} µs`,
);

const page = (label, query) => {
  started = performance.now();
  let n = 0;
  for (let i = 0; i < RUNS; i++) n = table.page(query).entries.length;
  console.log(`${label}: ${((performance.now() - started) / RUNS).toFixed(2)} ms (${n} entries)`);
};
page('page of 1,000, newest', { limit: 1000 });
page('page of 1,000 behind a cursor halfway', { limit: 1000, before: String(ENTRIES / 2) });
page('page of 100, who (1 entry in 100)', { limit: 100, who: 'bob' });
page('page of 100, circuit (1 in 500)', { limit: 100, circuit: 'c7' });
page('page of 100, since/until (1,000 ms of entries)', { limit: 100, since: 1e12 + 1000, until: 1e12 + 2000 });
db.close();
fs.rmSync(dir, { recursive: true, force: true });
