import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit, type Transition } from '../../src/domain/circuit.js';
import { circuitFromColumns, RECORD_COLUMNS, type ColumnValue } from '../../src/domain/circuit-record.js';
import { decodeEntry } from '../../src/domain/history.js';
import { policyOf } from '../../src/domain/policy.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 31: history and state never disagree after a kill -9 of a real 2-worker server under
// load. Every outcome carries a unique duration_ms (its id). After each kill the file is read:
// every acknowledged outcome is in its circuit's history, none that was never sent is, and
// replaying the history's outcomes, in write order, through the domain's own state machine from
// a new circuit gives the stored circuit (state, counts, times) and the stored transitions
// (the history's transition entries and the transitions table) exactly: an outcome whose
// effect is missing from the state, or an effect whose outcome is missing from the history,
// would make them differ.

const CIRCUITS = 6;
const CONCURRENCY = 24;
const LOAD_MS = 400; // load runs at least this long before the SIGKILL
const ACKED_BEFORE_KILL = 300; // and until this many outcomes are acknowledged
const ROUNDS = 2;
const BATCH = 5;

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

function postJson(url: string, body: string): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', () => resolve(0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** Outcomes from CONCURRENCY loops (single and batched), each with a unique id as its duration_ms. */
function writeLoad(baseUrl: string, firstId: number) {
  const acked = new Set<number>();
  const sent = new Set<number>();
  const statuses = new Set<number>();
  let onAcked = () => {};
  let stopped = false;
  let nextId = firstId;
  const outcome = () => {
    const id = nextId++;
    sent.add(id);
    // About one in three fails: circuits open (threshold 3) and successes on closed ones change nothing.
    return { id, circuit: `h-${id % CIRCUITS}`, success: (id * 7919) % 3 !== 0, duration_ms: id };
  };
  const loops = Array.from({ length: CONCURRENCY }, async (_, loop) => {
    for (let i = 0; i < 5_000 && !stopped; i++) {
      const batch = loop % 2 === 0;
      const items = Array.from({ length: batch ? BATCH : 1 }, outcome);
      const status = batch
        ? await postJson(`${baseUrl}/outcomes`, JSON.stringify({ outcomes: items.map(({ id: _id, ...o }) => o) }))
        : await postJson(
            `${baseUrl}/circuits/${items[0]!.circuit}/outcomes`,
            JSON.stringify({ success: items[0]!.success, duration_ms: items[0]!.id }),
          );
      statuses.add(status);
      if (status === 200) for (const o of items) acked.add(o.id);
      onAcked();
      if (status === 0) return; // server gone
    }
  });
  return {
    acked,
    sent,
    statuses,
    get nextId() {
      return nextId;
    },
    ackedAtLeast: (n: number) =>
      new Promise<void>((resolve) => {
        onAcked = () => {
          if (acked.size >= n) resolve();
        };
        onAcked();
      }),
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

const key = (t: Transition) => `${t.from}>${t.to}:${t.reason}@${t.at}`;

/** Check one circuit of the file: its history against its row and its transitions. */
function checkCircuit(
  db: Database.Database,
  name: string,
  acked: Set<number>,
  sent: Set<number>,
): { outcomes: number; transitions: number } {
  const row = db
    .prepare<[string], ColumnValue[]>(`SELECT ${RECORD_COLUMNS.join(', ')} FROM circuits WHERE name = ?`)
    .raw()
    .get(name);
  const stored: Circuit | null = row === undefined ? null : circuitFromColumns(row);
  const entries = db
    .prepare<[string], { t: number; e: string }>(
      'SELECT t, e FROM history WHERE circuit_id = (SELECT id FROM circuits WHERE name = ?) ORDER BY seq',
    )
    .all(name)
    .map((r) => decodeEntry(r.t, r.e)!);
  const ids = new Set<number>();
  let replayed: Circuit | null = null;
  const replayedTransitions: string[] = [];
  const recordedTransitions: string[] = [];
  for (const e of entries) {
    if (e.type === 'transition') recordedTransitions.push(key(e.transition));
    if (e.type !== 'outcome') continue;
    ids.add(e.outcome.durationMs!);
    const step = recordOutcome(replayed ?? newCircuit(name, policyOf(stored!), e.t), e.outcome, e.t);
    replayed = step.circuit;
    replayedTransitions.push(...step.transitions.map(key));
  }
  for (const id of acked)
    if (id % CIRCUITS === Number(name.slice(2))) expect(ids.has(id), `${name} keeps acknowledged ${id}`).toBe(true);
  for (const id of ids) expect(sent.has(id), `${name}: ${id} was sent`).toBe(true);
  if (stored === null) {
    expect(entries).toEqual([]);
    return { outcomes: 0, transitions: 0 };
  }
  const tableTransitions = db
    .prepare<[number], Transition>(
      'SELECT from_state AS "from", to_state AS "to", reason, at FROM transitions WHERE circuit_id = ? ORDER BY id',
    )
    .all(stored.id)
    .map(key);
  expect(recordedTransitions, `${name}: history transitions = replay`).toEqual(replayedTransitions);
  expect(tableTransitions, `${name}: transitions table = replay`).toEqual(replayedTransitions);
  const fields = (c: Circuit) => ({
    state: c.state,
    failureCount: c.failureCount,
    openUntil: c.openUntil,
    lastFailureAt: c.lastFailureAt,
    reopenCount: c.reopenCount,
    openTimeoutSeconds: c.openTimeoutSeconds,
    stateChangedAt: c.stateChangedAt ?? null,
    createdAt: c.createdAt,
  });
  expect(fields(replayed!), `${name}: state = replay of its history`).toEqual(fields(stored));
  return { outcomes: ids.size, transitions: replayedTransitions.length };
}

describe('the history after kill -9 (issue 31)', () => {
  it('keeps every acknowledged outcome, and history and state agree, on a 2-worker server', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'db.sqlite');
    const config = path.join(dir, 'c.yaml');
    // A day's open time: no due transition happens during the test (every write here is an outcome).
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 3\n  timeout_seconds: 86400\n');
    const env = { CIRCUITLOG_DB: file, CIRCUITLOG_CONFIG: config, CIRCUITLOG_WORKERS: '2' };
    const acked = new Set<number>();
    const sent = new Set<number>();
    let nextId = 1;
    for (let round = 0; round < ROUNDS; round++) {
      const server = await startServer(env, { detached: true });
      running.push(server);
      const load = writeLoad(server.url, nextId);
      await Promise.all([new Promise((r) => setTimeout(r, LOAD_MS)), load.ackedAtLeast(ACKED_BEFORE_KILL)]);
      await server.killGroup(); // kill -9 primary and workers with outcomes in flight
      running.splice(running.indexOf(server), 1);
      await load.stop();
      nextId = load.nextId;
      for (const id of load.acked) acked.add(id);
      for (const id of load.sent) sent.add(id);
      expect(
        [...load.statuses].filter((s) => s !== 200 && s !== 0),
        'only 200 or a dropped connection',
      ).toEqual([]);
      expect(sent.size, 'some outcomes were in flight at the kill').toBeGreaterThan(acked.size);

      const db = new Database(file, { readonly: true });
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      let kept = 0;
      let transitions = 0;
      for (let k = 0; k < CIRCUITS; k++) {
        const found = checkCircuit(db, `h-${k}`, acked, sent);
        kept += found.outcomes;
        transitions += found.transitions;
      }
      db.close();
      expect(kept).toBeGreaterThanOrEqual(acked.size);
      expect(transitions, 'circuits opened under the load').toBeGreaterThan(0);
    }
  }, 60_000);
});
