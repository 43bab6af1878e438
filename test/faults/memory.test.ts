import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../server-process.js';
import { FaultNode, type FaultKind } from './fault-node.js';
import {
  FAULT_SETTINGS,
  get,
  HEALTHY_SETTINGS,
  internalErrors,
  resetCircuit,
  rssBytes,
  startFaultServer,
  type Seen,
} from './fault-server.js';

const KINDS: FaultKind[] = ['refuse', 'reset', 'hang', 'slow', 'stall', 'huge-headers', 'garbage', 'storm'];
const PER_KIND = 10; // requests per fault kind per burst, all at once
const BURSTS = 5; // 5 x 8 x 10 = 400 faulty requests, plus as many healthy ones
const MAX_CONCURRENT = PER_KIND + 2; // a leaked bulkhead slot would soon answer 503 bulkhead-full
const RSS_GROWTH_BOUND = 50 * 1024 * 1024; // 50 MiB

/** What each fault kind answers, as the docs promise; a head-then-cut answer is a 200 with part of its body. */
const EXPECTED: Partial<Record<FaultKind, (seen: Seen) => boolean>> = {
  refuse: (s) => s.status === 502,
  reset: (s) => s.status === 200 && !s.complete,
  hang: (s) => s.status === 504,
  slow: (s) => s.status === 200 && s.complete,
  stall: (s) => s.status === 200 && !s.complete,
  'huge-headers': (s) => s.status === 502,
  garbage: (s) => s.status === 502,
  storm: (s) => s.status === 503 && s.body === 'storm',
  ok: (s) => s.status === 200 && s.body === 'ok',
};

let server: ServerProcess;
const nodes: Record<string, FaultNode> = {};

beforeAll(async () => {
  for (const kind of [...KINDS, 'ok' as const])
    nodes[kind] = await new FaultNode(`${kind}-1`, kind, kind === 'slow' ? { byteEveryMs: 10 } : {}).start();
  // A threshold over one burst's failures: every request of a burst reaches its node. A 1 s
  // timeout: 90 requests at once on a loaded machine must not turn a fast fault into a 504.
  const settings = {
    ...FAULT_SETTINGS,
    requestTimeoutMs: 1_000,
    failureThreshold: PER_KIND * 2,
    maxConcurrent: MAX_CONCURRENT,
  };
  server = await startFaultServer(
    Object.fromEntries(Object.entries(nodes).map(([kind, node]) => [kind, [node]])),
    settings,
    { ok: HEALTHY_SETTINGS },
  );
});

afterAll(async () => {
  await server?.stop('SIGKILL');
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});

/** PER_KIND requests to every fault upstream and to `ok`, all in flight together; the kinds that missed their answer. */
async function burst(): Promise<string[]> {
  const kinds = [...KINDS, 'ok' as const];
  const seen = await Promise.all(
    kinds.flatMap((kind) =>
      Array.from({ length: PER_KIND }, () => get(`${server.url}/proxy/${kind}/x`).then((s) => ({ kind, s }))),
    ),
  );
  await Promise.all(KINDS.map((kind) => resetCircuit(server, `${kind}/${kind}-1`))); // the next burst reaches the nodes again
  return seen
    .filter(({ kind, s }) => !EXPECTED[kind]!(s))
    .map(({ kind, s }) => `${kind}: ${s.status} ${s.body.slice(0, 80)}`);
}

describe('proxy memory under faults', () => {
  it('stays within 50 MiB of RSS over 400 faulty requests, every one answered as documented', async () => {
    for (let i = 0; i < 2; i++) expect(await burst()).toEqual([]); // warm-up: JIT, pools, buffers, heap sizing
    const before = rssBytes(server.child.pid!);
    const hitsBefore = Object.fromEntries(KINDS.map((k) => [k, nodes[k]!.hits]));
    for (let i = 0; i < BURSTS; i++) expect(await burst()).toEqual([]);
    const after = rssBytes(server.child.pid!);
    const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
    console.info(
      `server RSS before ${mib(before)} MiB, after ${BURSTS * KINDS.length * PER_KIND} faulty requests ${mib(after)} MiB (${mib(after - before)} MiB)`,
    );
    for (const kind of KINDS.filter((k) => k !== 'refuse'))
      expect(nodes[kind]!.hits - hitsBefore[kind]!).toBe(BURSTS * PER_KIND);
    expect(after - before).toBeLessThan(RSS_GROWTH_BOUND);
    expect(server.child.exitCode).toBeNull();
    expect(internalErrors(server)).toEqual([]);
  });
});
