import type { AddressInfo } from 'node:net';
import { createApp, type AppDeps } from '../../src/app.js';
import { createObservability, type ObservabilityOptions } from '../../src/observe/observability.js';
import { sqliteReaders } from '../../src/store/sqlite/readers.js';
import { FakeClock, memoryStore, silentLogger } from '../helper.js';
import { listenAsMain } from '../http/served-app.js';

export interface ObservedOptions extends Partial<Omit<ObservabilityOptions, 'readers' | 'clock'>> {
  readonly deps?: Partial<AppDeps>;
}

/** The app with metrics, event stream and dashboard on an in-memory database and a fake clock. */
export function buildObservedApp(options: ObservedOptions = {}) {
  const clock = new FakeClock();
  const { db, store } = memoryStore();
  const observe = createObservability({
    readers: sqliteReaders(db),
    clock: clock.now,
    metricsEnabled: options.metricsEnabled ?? true,
    maxCircuits: options.maxCircuits ?? 10_000,
    maxStreams: options.maxStreams ?? 1_000,
    heartbeatMs: options.heartbeatMs,
    maxStreamBufferBytes: options.maxStreamBufferBytes,
  });
  const built = createApp({
    store,
    clock: clock.now,
    logger: silentLogger,
    circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    observe,
    ...options.deps,
  });
  const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    built.app.request(path, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  /** `GET /metrics` as a map from `name{labels}` to value (comments dropped). */
  const scrape = async (headers: Record<string, string> = {}) =>
    parseMetrics(await (await request('GET', '/metrics', undefined, headers)).text());
  return { ...built, clock, db, store, observe, request, scrape };
}

/** Serve an app on 127.0.0.1 as `src/main.ts` serves it (`listenAsMain`). */
export async function listen(built: Parameters<typeof listenAsMain>[0]) {
  const server = await listenAsMain(built);
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Prometheus text format to `series -> value`; every series, in order. */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}
