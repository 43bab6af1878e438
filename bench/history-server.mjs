// A circuitlog HTTP app on the Redis store for bench/redis-history.mjs (issue 31): createApp +
// the node server of dist/, the store opened with `history: {enabled}` from argv. Until the
// service passes its outcome hooks (issue 31's service part), the store here gives every write
// to `bench-fail` the hook the service will pass for `POST /outcomes {"success":false}`
// (`{type: 'outcome', t: now, outcome: {success: false}}`), so the store does the same work.
//
//   node bench/history-server.mjs <redis url> <on|off>     (PORT from the environment)

import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => import(path.join(root, 'dist', p));
const [{ createApp }, { createNodeServer, serveApp }, { openRedisStore }] = await Promise.all([
  dist('app.js'),
  dist('server/node-server.js'),
  dist('store/redis/open.js'),
]);

const [url, mode] = process.argv.slice(2);
const logger = pino({ level: 'warn' });
const opened = await openRedisStore({ url, logger, history: { enabled: mode === 'on' } });
const failure = { success: false };
const hookFor = (name, hook) =>
  hook ?? (name === 'bench-fail' ? () => ({ type: 'outcome', t: Date.now(), outcome: failure }) : undefined);
const store = Object.create(opened.store);
store.apply = (name, step, hook) => opened.store.apply(name, step, hookFor(name, hook));
store.applyBatch = (items) =>
  opened.store.applyBatch(items.map((i) => ({ ...i, history: hookFor(i.name, i.history) })));

const built = createApp({
  store,
  clock: Date.now,
  logger,
  circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
  policy: { probeLeaseMs: 10_000 },
});
const readiness = { draining: false };
const timeouts = { headers_timeout_ms: 10_000, request_timeout_ms: 60_000, keep_alive_timeout_ms: 5_000 }; // the defaults
const server = createNodeServer(timeouts, logger, readiness);
serveApp(server, { fetch: built.app.fetch, allowedListener: built.allowedListener }, logger);
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => {
  server.close();
  void opened.close().then(() => process.exit(0));
});
