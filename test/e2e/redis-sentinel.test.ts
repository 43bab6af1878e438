import fs from 'node:fs';
import path from 'node:path';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { afterEach, describe, expect, it } from 'vitest';
import { openStream } from '../observe/sse-client.js';
import { eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import {
  cli,
  DOWN_AFTER_MS,
  FAILOVER_TIMEOUT_MS,
  masterInfo,
  startSentinel,
  type Sentinel,
} from '../redis/sentinel.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const keys = new RedisKeys('circuitlog:');

const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
const sentinels: Sentinel[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(sentinels.splice(0).map((s) => s.stop()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

const MASTER = 'm';
const LOAD_WORKERS = 4;
const LOAD_BEFORE_KILL_MS = 2_000;
const LOAD_LIMIT_MS = 15_000; // the load stops by then, failover or not
const BLACKOUT_BOUND_MS = DOWN_AFTER_MS + FAILOVER_TIMEOUT_MS + 2_000;

/** 1 primary, 2 replicas in sync (linked), 3 sentinels that each see both replicas and the other two sentinels. */
async function sentinelSet(): Promise<{ primary: RedisServer; sentinels: Sentinel[] }> {
  const primary = await startRedis();
  redises.push(primary);
  await cli(primary.port, 'CONFIG', 'SET', 'repl-diskless-sync-delay', '0'); // the replicas' full sync at once, not after 5 s
  const replicas = await Promise.all([
    startRedis({ replicaOf: primary.port }),
    startRedis({ replicaOf: primary.port }),
  ]);
  redises.push(...replicas);
  // The replica Sentinel promotes serves the other one's sync: at once too, not after the default 5 s
  // (with replicas_ack 1 every write waits on that sync).
  await Promise.all(replicas.map((r) => cli(r.port, 'CONFIG', 'SET', 'repl-diskless-sync-delay', '0')));
  // Both replicas hold the data: a replica still in its first sync, if promoted, has nothing.
  const synced = await eventually(async () => {
    const links = await Promise.all(replicas.map((r) => cli(r.port, 'INFO', 'replication')));
    return links.every((info) => info.includes('master_link_status:up'));
  }, 15_000);
  expect(synced).toBe(true);
  const watching = await Promise.all([1, 2, 3].map(() => startSentinel(MASTER, primary.port)));
  sentinels.push(...watching);
  const settled = await eventually(async () => {
    const infos = await Promise.all(watching.map((s) => masterInfo(s.port, MASTER)));
    return infos.every((i) => i.get('num-slaves') === '2' && i.get('num-other-sentinels') === '2');
  }, 15_000);
  expect(settled).toBe(true);
  return { primary, sentinels: watching };
}

/**
 * A write as a client makes it: a 503 (here: WAIT not confirmed within 500 ms on a loaded
 * machine, while the other replica resyncs to the new primary) is retried after a moment, for 5 s.
 */
async function retried503(url: string, method: string, body?: unknown): Promise<Awaited<ReturnType<typeof request>>> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const answer = await request(url, method, 5_000, body);
    if (answer.status !== 503 || Date.now() > deadline) return answer;
    process.stdout.write(`retrying a 503: ${answer.json?.detail}\n`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Failover {
  readonly hosts: ServerProcess[];
  readonly blackoutMs: number;
  readonly acknowledged: number;
  readonly unanswered: number;
  /** `failure_count` of the loaded circuit on the primary Sentinel promoted. */
  readonly stored: number;
  readonly stream: Awaited<ReturnType<typeof openStream>>;
}

/**
 * Two hosts on `redis+sentinel://` with `store.redis` as given, a bounded load of failure
 * outcomes through both; `kill -9` of the primary 2 s in; the load goes on until a second
 * after each host has had an outcome acknowledged by the new primary (at most 15 s in all).
 */
async function failover(storeRedis: string): Promise<Failover> {
  const { primary, sentinels: watching } = await sentinelSet();
  const config = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(config, `circuit_defaults:\n  failure_threshold: 1000000\nstore:\n  redis: ${storeRedis}\n`);
  const store = `redis+sentinel://${watching.map((s) => `127.0.0.1:${s.port}`).join(',')}/${MASTER}/0`;
  const hosts = await Promise.all(
    [0, 1].map(() => startServer({ CIRCUITLOG_STORE: store, CIRCUITLOG_CONFIG: config }, { detached: true })),
  );
  running.push(...hosts);
  const stream = await openStream(`${hosts[1]!.url}/events/stream?circuit=sse-1`);

  const answers: { startedMs: number; endedMs: number; ok: boolean }[] = [];
  let killedAtMs = Infinity;
  let stopAtMs = Date.now() + LOAD_LIMIT_MS;
  const resumedHosts = new Set<number>();
  const worker = async (w: number) => {
    for (let i = 0; Date.now() < stopAtMs; i++) {
      const startedMs = Date.now();
      const host = (w + i) % 2;
      const answer = await request(`${hosts[host]!.url}/circuits/load/failure`, 'POST', 5_000).catch(() => null);
      const ok = answer?.status === 200;
      answers.push({ startedMs, endedMs: Date.now(), ok });
      if (ok && startedMs > killedAtMs) resumedHosts.add(host);
      // Once each host has written to the new primary, a second more of load, then stop.
      if (resumedHosts.size === hosts.length) stopAtMs = Math.min(stopAtMs, Date.now() + 1_000);
      if (!ok) await new Promise((r) => setTimeout(r, 20));
    }
  };
  const load = Promise.all(Array.from({ length: LOAD_WORKERS }, (_, w) => worker(w)));
  await new Promise((r) => setTimeout(r, LOAD_BEFORE_KILL_MS));
  killedAtMs = Date.now();
  await primary.stop('SIGKILL');
  await load;

  // Started after the kill and acknowledged: the service answered again, without a restart.
  const resumed = answers.filter((a) => a.ok && a.startedMs > killedAtMs).sort((a, b) => a.endedMs - b.endedMs)[0];
  expect(resumed).toBeDefined();
  const acknowledged = answers.filter((a) => a.ok).length;
  const [newHost, newPort] = (await cli(watching[0]!.port, 'SENTINEL', 'get-master-addr-by-name', MASTER)).split('\n');
  expect(newHost).toBe('127.0.0.1');
  expect(Number(newPort)).not.toBe(primary.port);
  const stored = JSON.parse(await cli(Number(newPort), 'HGET', keys.circuit('load'), 'c')).failureCount as number;
  // The set is whole again before the checks that follow: Sentinel has pointed the other replica
  // at the new primary and its sync is done (else a write with replicas_ack 1 waits on it).
  const replicaOnline = await eventually(
    async () => /^slave\d+:.*state=online/m.test(await cli(Number(newPort), 'INFO', 'replication')),
    // An event, bounded: Sentinel re-points the replica and it syncs. On a busy machine a Sentinel
    // whose timers ran late enters TILT mode and acts on nothing for 30 s, so the bound is past that.
    60_000,
  );
  expect(replicaOnline).toBe(true);
  return {
    hosts,
    blackoutMs: resumed!.endedMs - killedAtMs,
    acknowledged,
    unanswered: answers.length - acknowledged,
    stored,
    stream,
  };
}

describe('redis+sentinel://: circuitlog follows a Sentinel failover without a restart', () => {
  it('with replicas_ack 1 loses no acknowledged outcome when the primary is killed, answers again within down-after + failover + 2 s, and SSE goes on', async () => {
    const { hosts, blackoutMs, acknowledged, unanswered, stored, stream } = await failover(
      '{ replicas_ack: 1, replicas_ack_timeout_ms: 500 }',
    );
    process.stdout.write(
      `sentinel failover (replicas_ack 1): blackout ${blackoutMs} ms (bound ${BLACKOUT_BOUND_MS} ms); acknowledged ${acknowledged}, unanswered ${unanswered}, failure_count on the new primary ${stored}\n`,
    );
    expect(stored).toBeGreaterThanOrEqual(acknowledged); // 0 acknowledged outcomes lost
    expect(stored).toBeLessThanOrEqual(acknowledged + unanswered); // and nothing counted that was not sent (a 503 may or may not have been applied)
    expect(blackoutMs).toBeLessThan(BLACKOUT_BOUND_MS);

    // Both hosts read and write on the new primary, and the SSE stream opened before the kill goes on.
    for (const host of hosts) expect((await request(`${host.url}/circuits/load/allowed`)).status).toBe(200);
    const patched = await retried503(`${hosts[0]!.url}/circuits/sse-1`, 'PATCH', { failure_threshold: 1 });
    expect([200, 201]).toContain(patched.status); // created with its policy (200: a 503 before it had applied it)
    expect((await retried503(`${hosts[0]!.url}/circuits/sse-1/failure`, 'POST')).status).toBe(200);
    try {
      const event = await stream.next(3_000);
      expect(event).toMatchObject({ event: 'transition', data: { circuit: 'sse-1', from: 'closed', to: 'open' } });
    } finally {
      stream.close();
    }
  }, 120_000);

  it('with replicas_ack 0 resumes the same way, and reports how many acknowledged outcomes the failover lost (the trade docs/many-hosts.md describes)', async () => {
    const { blackoutMs, acknowledged, unanswered, stored, stream } = await failover('{ replicas_ack: 0 }');
    stream.close();
    const lost = Math.max(0, acknowledged - stored);
    process.stdout.write(
      `sentinel failover (replicas_ack 0): blackout ${blackoutMs} ms; acknowledged ${acknowledged}, unanswered ${unanswered}, failure_count on the new primary ${stored}: ${lost} acknowledged outcomes lost\n`,
    );
    expect(stored).toBeLessThanOrEqual(acknowledged + unanswered);
    expect(blackoutMs).toBeLessThan(BLACKOUT_BOUND_MS);
  }, 120_000);
});
