// Helpers of the fleet proofs of issue 29 (test/e2e/fleet-*.test.ts): real circuitlog
// processes on one store (SQLite: 2 workers on one file; Redis: 2 hosts on one redis-server),
// a real loopback dependency, and Node client instances spread over the hosts.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createClient, type CircuitlogClient } from '../../src/client/index.js';
import type { RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

export type StoreKind = 'sqlite' | 'redis';

export interface Fleet {
  readonly hosts: readonly ServerProcess[];
  readonly urls: readonly string[];
  stop(): Promise<void>;
}

/**
 * circuitlog on `store` with this config file: SQLite, one host of `workers` processes on one
 * file (node:cluster); Redis, `hosts` hosts of `workers` processes each on one database.
 */
export async function startFleet(
  store: StoreKind,
  yaml: string,
  { redis, db = 1, hosts = 2, workers = 1 }: { redis?: RedisServer; db?: number; hosts?: number; workers?: number },
): Promise<Fleet> {
  const dir = tempDir('circuitlog-fleet-');
  const config = path.join(dir, 'c.yaml');
  fs.writeFileSync(config, yaml);
  const env: Record<string, string> = { CIRCUITLOG_CONFIG: config };
  let count = hosts;
  if (store === 'sqlite') {
    env.CIRCUITLOG_DB = path.join(dir, 'db.sqlite');
    env.CIRCUITLOG_WORKERS = String(hosts * workers); // one port, N processes on one file
    count = 1;
  } else {
    env.CIRCUITLOG_STORE = redis!.url(db);
    if (workers > 1) env.CIRCUITLOG_WORKERS = String(workers);
  }
  const started = await Promise.all(
    Array.from({ length: count }, () => startServer(env, { detached: true, timeoutMs: 30_000 })),
  );
  return {
    hosts: started,
    urls: started.map((s) => s.url),
    stop: async () => {
      await Promise.all(started.map((s) => s.killGroup()));
    },
  };
}

/** One request reaching the dependency: when (this process's clock, ms) and from which caller. */
export interface Arrival {
  readonly at: number;
  readonly caller: string;
}

export interface Dependency {
  readonly url: string;
  readonly arrivals: Arrival[];
  /** The next request gets `429 Retry-After: <seconds>`; resolves with its arrival once answered. */
  throttleNext(seconds: number): Promise<Arrival>;
  close(): Promise<void>;
}

/** A loopback dependency answering `200 ok` after `delayMs`, counting every request. */
export async function startDependency(delayMs = 0): Promise<Dependency> {
  const arrivals: Arrival[] = [];
  let pending: { seconds: number; resolve: (a: Arrival) => void } | null = null;
  const server = http.createServer((req, res) => {
    const arrival = { at: Date.now(), caller: String(req.headers['x-caller'] ?? '') };
    if (pending !== null) {
      const { seconds, resolve } = pending;
      pending = null;
      res.writeHead(429, { 'retry-after': String(seconds), 'content-type': 'text/plain' });
      res.end('slow down', () => resolve(arrival));
      return;
    }
    arrivals.push(arrival);
    const answer = () => res.end('ok');
    if (delayMs > 0) setTimeout(answer, delayMs);
    else answer();
  });
  server.keepAliveTimeout = 30_000;
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    arrivals,
    throttleNext: (seconds) => new Promise((resolve) => (pending = { seconds, resolve })),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** `count` clients, caller `c0`.. `c<count-1>`, spread round-robin over `urls`, each with its stream open. */
export async function startClients(urls: readonly string[], count: number): Promise<CircuitlogClient[]> {
  const clients = Array.from({ length: count }, (_, i) =>
    createClient({ url: urls[i % urls.length]!, caller: `c${i}` }),
  );
  await Promise.all(clients.map((c) => c.ready()));
  return clients;
}

/** Counts of `times` in `buckets` slots of `widthMs` from `from`: index k counts [from + k w, from + (k+1) w). */
export function perSecond(times: readonly number[], from: number, buckets: number, widthMs = 1_000): number[] {
  const counts = new Array<number>(buckets).fill(0);
  for (const t of times) {
    const k = Math.floor((t - from) / widthMs);
    if (k >= 0 && k < buckets) counts[k]!++;
  }
  return counts;
}

export const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
