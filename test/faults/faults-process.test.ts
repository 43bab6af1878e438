import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerProcess } from '../server-process.js';
import { FaultNode, slowBody, type FaultKind, type FaultOptions } from './fault-node.js';
import {
  circuitState,
  FAULT_SETTINGS,
  get,
  HEALTHY_SETTINGS,
  internalErrors,
  startFaultServer,
  type Seen,
} from './fault-server.js';

const { requestTimeoutMs, retries, failureThreshold } = FAULT_SETTINGS;
const ATTEMPTS = retries + 1;
const SLACK_MS = 1_000; // scheduling on a shared 2-core machine; the bounds are upper limits only
/** The documented worst case for a request that reached nodes: every attempt used its full timeout. */
const ATTEMPTS_BOUND_MS = requestTimeoutMs * ATTEMPTS + SLACK_MS;
/** An open circuit is answered without contacting any node. */
const FAST_MS = 500;
/** undici checks body timeouts on a coarse timer (0.5 s ticks), so a silence is noticed up to ~1 s late. */
const BODY_TIMER_TICKS_MS = 1_000;
const SLOW = { bodyBytes: 20, byteEveryMs: 40 }; // 800 ms in all, each gap far under the 500 ms timeout

/** Faulty upstreams: two nodes of one fault each, so a retry has somewhere to go. */
const FAULTS: Record<string, { kind: FaultKind; nodes: number; options?: FaultOptions }> = {
  refuse: { kind: 'refuse', nodes: 2 },
  reset: { kind: 'reset', nodes: 2, options: { bodyBytes: 1000 } },
  hang: { kind: 'hang', nodes: 2 },
  slow: { kind: 'slow', nodes: 1, options: SLOW },
  stall: { kind: 'stall', nodes: 2, options: { bodyBytes: 1000 } },
  'huge-headers': { kind: 'huge-headers', nodes: 2 },
  garbage: { kind: 'garbage', nodes: 2 },
  storm: { kind: 'storm', nodes: 2 },
};

let server: ServerProcess;
const nodes: Record<string, FaultNode[]> = {};

beforeAll(async () => {
  nodes.healthy = [await new FaultNode('ok-1', 'ok').start()];
  for (const [name, f] of Object.entries(FAULTS)) {
    nodes[name] = await Promise.all(
      Array.from({ length: f.nodes }, (_, i) => new FaultNode(`${name}-${i + 1}`, f.kind, f.options).start()),
    );
  }
  server = await startFaultServer(nodes, FAULT_SETTINGS, { healthy: HEALTHY_SETTINGS });
});

afterAll(async () => {
  await server?.stop('SIGKILL');
  await Promise.all(
    Object.values(nodes)
      .flat()
      .map((n) => n.stop()),
  );
});

/** A GET through `upstream`, with a GET through `healthy` in flight at the same time. */
async function alongsideHealthy(upstream: string): Promise<Seen> {
  const [faulty, healthy] = await Promise.all([
    get(`${server.url}/proxy/${upstream}/x`),
    get(`${server.url}/proxy/healthy/x`),
  ]);
  expect(healthy).toMatchObject({ status: 200, body: 'ok', complete: true });
  return faulty;
}

/** Every node of `upstream` has an open circuit, and a request gets the fast 503. */
async function expectOpenAndShortCircuited(upstream: string): Promise<void> {
  for (const node of nodes[upstream]!)
    expect((await circuitState(server, `${upstream}/${node.id}`)).state).toBe('open');
  const hits = nodes[upstream]!.map((n) => n.hits);
  const seen = await alongsideHealthy(upstream);
  expect(seen.status).toBe(503);
  expect(JSON.parse(seen.body)).toMatchObject({ code: 'NO_NODE_AVAILABLE' });
  expect(Number(seen.headers['retry-after'])).toBeGreaterThan(0);
  expect(seen.ms).toBeLessThan(FAST_MS);
  expect(nodes[upstream]!.map((n) => n.hits)).toEqual(hits);
}

/** Requests that fail before a head reaches the caller: each one fails every node once. */
async function expectProblemUntilOpen(upstream: string, status: number, code: string, boundMs: number): Promise<void> {
  for (let i = 0; i < failureThreshold; i++) {
    const seen = await alongsideHealthy(upstream);
    expect(seen.status).toBe(status);
    expect(seen.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(seen.body)).toMatchObject({ code });
    expect(seen.ms).toBeLessThan(boundMs);
  }
  await expectOpenAndShortCircuited(upstream);
}

/** Answers whose head was forwarded and whose body was then cut: one node per request. */
async function expectCutUntilOpen(upstream: string, boundMs: number): Promise<void> {
  for (let i = 0; i < failureThreshold * nodes[upstream]!.length; i++) {
    const seen = await alongsideHealthy(upstream);
    expect(seen.status).toBe(200);
    expect(seen.headers['content-length']).toBe('1000');
    expect(seen.complete).toBe(false);
    expect(seen.body.length).toBeLessThan(1000);
    expect(seen.ms).toBeLessThan(boundMs);
  }
  await expectOpenAndShortCircuited(upstream);
}

/** Proxy log lines for bodies cut on the node's side. */
function bodyFailures(upstream: string): number {
  return server.logs.filter((l) => l.event === 'upstream_failed' && l.kind === 'body' && l.upstream === upstream)
    .length;
}

/** GET, read the head and the first body byte, then drop the connection. */
function leaveAfterFirstByte(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.once('data', () => {
        req.destroy();
        resolve();
      });
    });
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
  });
}

/** Poll `done` every 20 ms for at most `deadlineMs`. */
async function waitFor(done: () => boolean, deadlineMs: number): Promise<void> {
  for (const started = Date.now(); !done(); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() - started > deadlineMs) throw new Error(`not within ${deadlineMs} ms`);
  }
}

describe('proxy faults in the real process', () => {
  it('answers 502 upstream-unreachable at once when every node refuses, and opens them', async () => {
    await expectProblemUntilOpen('refuse', 502, 'UPSTREAM_UNREACHABLE', SLACK_MS);
  });

  it('answers 504 upstream-timeout after one timeout per attempt when nodes hang before the head', async () => {
    await expectProblemUntilOpen('hang', 504, 'UPSTREAM_TIMEOUT', ATTEMPTS_BOUND_MS);
    expect(nodes.hang!.map((n) => n.hits)).toEqual([failureThreshold, failureThreshold]);
  });

  it('answers 502 upstream-unreachable when the head is over the header size limit', async () => {
    await expectProblemUntilOpen('huge-headers', 502, 'UPSTREAM_UNREACHABLE', ATTEMPTS_BOUND_MS);
  });

  it('answers 502 upstream-unreachable when the node does not speak HTTP', async () => {
    await expectProblemUntilOpen('garbage', 502, 'UPSTREAM_UNREACHABLE', ATTEMPTS_BOUND_MS);
  });

  it('passes a 503 storm through as sent, then opens the nodes', async () => {
    for (let i = 0; i < failureThreshold; i++) {
      const seen = await alongsideHealthy('storm');
      expect(seen).toMatchObject({ status: 503, body: 'storm', complete: true });
      expect(seen.headers['x-node']).toMatch(/^storm-\d$/);
      expect(seen.ms).toBeLessThan(ATTEMPTS_BOUND_MS);
    }
    await expectOpenAndShortCircuited('storm');
  });

  it('cuts the answer when the node resets mid-body, and counts the reset as a node failure', async () => {
    await expectCutUntilOpen('reset', SLACK_MS);
    expect(bodyFailures('reset')).toBe(failureThreshold * 2);
  });

  it('cuts the answer after request_timeout_ms of silence inside the body, and counts it as a node failure', async () => {
    await expectCutUntilOpen('stall', requestTimeoutMs + BODY_TIMER_TICKS_MS + SLACK_MS);
    expect(bodyFailures('stall')).toBe(failureThreshold * 2);
  });

  it('passes a slow but steady body intact even when it takes longer than request_timeout_ms', async () => {
    const seen = await alongsideHealthy('slow');
    expect(seen).toMatchObject({ status: 200, body: slowBody(SLOW.bodyBytes), complete: true });
    expect(seen.ms).toBeGreaterThan(requestTimeoutMs); // the timeout bounds each gap, not the whole body
    expect(seen.ms).toBeLessThan(SLOW.bodyBytes * SLOW.byteEveryMs + SLACK_MS);
    expect(await circuitState(server, 'slow/slow-1')).toEqual({ state: 'closed', failureCount: 0 });
  });

  it('does not count a caller leaving mid-body against the node', async () => {
    await leaveAfterFirstByte(`${server.url}/proxy/slow/x`);
    await waitFor(() => nodes.slow![0]!.openSockets === 0, 2_000); // the proxy let go of the node too
    expect(await circuitState(server, 'slow/slow-1')).toEqual({ state: 'closed', failureCount: 0 });
    expect(bodyFailures('slow')).toBe(0);
  });

  it('kept serving and never failed on its own account', async () => {
    expect(server.child.exitCode).toBeNull();
    expect(await get(`${server.url}/proxy/healthy/x`)).toMatchObject({ status: 200, body: 'ok' });
    expect(internalErrors(server)).toEqual([]);
  });
});
