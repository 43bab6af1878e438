import type { Logger } from 'pino';
import type { ListQuery } from '../circuit-store.js';
import { connectRedis, RedisStartError } from './connect.js';
import { RedisLeaseStore } from './redis-lease-store.js';
import { RedisCircuitStore } from './redis-store.js';
import { TransitionFeed } from './transition-feed.js';
import { CircuitMirror } from './circuit-mirror.js';
import { RedisCommands } from './redis-commands.js';
import { listCircuits } from './redis-listing.js';
import { SentinelMaster } from './sentinel-master.js';
import { isSentinelUrl, parseSentinelUrl } from './sentinel-url.js';

export interface OpenRedisOptions {
  readonly url: string;
  readonly logger: Logger;
  /** Give up at start after this long (default 8 s: the process must stop within 10 s). */
  readonly startTimeoutMs?: number;
  /** Per-command timeout; past it a write answers 503 STORAGE_UNAVAILABLE (default 1 s). */
  readonly timeoutMs?: number;
  readonly prefix?: string;
  /** Queue commands while disconnected instead of failing them at once (tests). */
  readonly queueOffline?: boolean;
  /** Replicas that must confirm each write (`WAIT`), and how long they get (`store.redis` in the config). */
  readonly replicasAck?: number;
  readonly replicasAckTimeoutMs?: number;
}

export interface OpenedRedis {
  readonly store: RedisCircuitStore;
  readonly leases: RedisLeaseStore;
  /** Every host's transitions as they happen, for `/events/stream` (started). */
  readonly feed: TransitionFeed;
  /**
   * The mirror of the circuits for the state gauges (the first `headLimit` whole), made on the
   * first call; it loads in the background and start-up does not wait for it.
   */
  mirror(headLimit?: number): Promise<CircuitMirror>;
  close(): Promise<void>;
}

/**
 * The start failure as one line after `CIRCUITLOG_STORE: ` (`shownUrl` has no password): what
 * Redis said when it said why (credentials, database, DNS, TLS), else that it cannot be reached.
 */
export function describeStartFailure(shownUrl: string, error: unknown): string {
  if (error instanceof RedisStartError) return `Redis at ${shownUrl}: ${error.message}`;
  return `cannot reach Redis at ${shownUrl}: ${(error as Error).message}`;
}

/**
 * Connect the two connections the store needs (commands, and the `changes` subscription)
 * and resolve once the subscription is live, so the cache works from the first request.
 */
export async function openRedisStore(options: OpenRedisOptions): Promise<OpenedRedis> {
  const startTimeoutMs = options.startTimeoutMs ?? 8_000; // 8 s
  // A server that accepts the connection but never answers would hang the handshake: bound it all.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${startTimeoutMs} ms`)), startTimeoutMs);
  });
  const opening = open(options, startTimeoutMs);
  try {
    return await Promise.race([opening, deadline]);
  } catch (error) {
    void opening.then((opened) => opened.close(), () => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/** A `redis+sentinel://` URL: the primary Sentinel names, behind a loopback port (`sentinel-master.ts`). */
async function followSentinel(raw: string, logger: Logger): Promise<{ url: string; sentinel: SentinelMaster }> {
  const parsed = parseSentinelUrl(raw);
  if ('problem' in parsed) throw new RedisStartError(`the URL ${parsed.problem}`, null);
  const sentinel = await SentinelMaster.start(parsed, logger);
  const auth = parsed.username !== '' || parsed.password !== '' ? `${encodeURIComponent(parsed.username)}:${encodeURIComponent(parsed.password)}@` : '';
  return { url: `${parsed.tls ? 'rediss' : 'redis'}://${auth}127.0.0.1:${sentinel.port}/${parsed.db}`, sentinel };
}

async function open(options: OpenRedisOptions, startTimeoutMs: number): Promise<OpenedRedis> {
  const followed = isSentinelUrl(options.url) ? await followSentinel(options.url, options.logger) : null;
  try {
    return await openAt(followed?.url ?? options.url, options, startTimeoutMs, followed?.sentinel);
  } catch (error) {
    followed?.sentinel.stop();
    throw error;
  }
}

async function openAt(url: string, options: OpenRedisOptions, startTimeoutMs: number, sentinel?: SentinelMaster): Promise<OpenedRedis> {
  const common = {
    url,
    tlsHost: sentinel === undefined ? undefined : () => sentinel.host,
    startTimeoutMs,
    failFastOffline: !options.queueOffline,
    logger: options.logger,
  };
  const client = await connectRedis({ ...common, name: 'circuitlog' });
  const connections = [client];
  const more = async (name: string) => {
    const c = await connectRedis({ ...common, name }).catch((error: unknown) => {
      for (const open of connections) open.destroy();
      throw error;
    });
    connections.push(c);
    return c;
  };
  const subscriber = await more('circuitlog-changes');
  const reader = await more('circuitlog-transitions'); // XREAD BLOCK holds its connection
  const db = Number(new URL(url).pathname.slice(1) || 0);
  const { prefix, timeoutMs, logger, replicasAck, replicasAckTimeoutMs } = options;
  const store = new RedisCircuitStore(client, subscriber, { db, prefix, timeoutMs, logger, replicasAck, replicasAckTimeoutMs });
  await store.ready();
  await store.epoch.sync(); // adopt the store's epoch, or write one into an empty store
  const feed = new TransitionFeed(reader, { prefix: options.prefix, logger: options.logger });
  await feed.start();
  store.seqSeen = () => feed.maxId(); // after a reset, transition numbers go on above what this host served
  store.epoch.watch();
  let mirror: CircuitMirror | undefined;
  return {
    store,
    leases: new RedisLeaseStore(store, options.prefix),
    feed,
    mirror: async (headLimit?: number) => {
      if (mirror === undefined) {
        // Its own connection: a page of 1,000 reads never queues ahead of a request's command
        // (at a million circuits that held start-up's own commands back by seconds).
        const own = await connectRedis({ ...common, name: 'circuitlog-mirror' }).catch(() => null);
        if (own !== null) connections.push(own);
        const bulk = own === null ? store.redis : new RedisCommands(own, timeoutMs ?? 1_000, logger);
        const source = { list: (query: ListQuery) => listCircuits(bulk, store.keys, query, store.malformed), onChange: store.onChange.bind(store), onRebuild: store.onRebuild.bind(store) };
        mirror = new CircuitMirror(source, options.logger, headLimit);
        void mirror.start(); // never rejects: a failed load is logged and retried
      }
      return mirror;
    },
    close: async () => {
      store.epoch.stop();
      feed.stop();
      mirror?.stop();
      sentinel?.stop();
      for (const c of connections) {
        try {
          c.destroy();
        } catch {
          // already closed
        }
      }
    },
  };
}
