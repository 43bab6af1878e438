import type { Logger } from 'pino';
import type { Subscriber } from './change-subscription.js';
import type { ShardChannels } from './shard-watch.js';
import { connectCluster } from './cluster-connect.js';
import { isClusterUrl, parseClusterUrl } from './cluster-url.js';
import { connectRedis } from './connect.js';
import { RedisStartError } from './start-errors.js';
import { migrateLegacyKeys } from './legacy-keys.js';
import { claimSchema } from './schema-key.js';
import { connectionLink, type CommandLink } from './redis-commands.js';
import { shardOf } from './shards.js';
import { RedisLeaseStore } from './redis-lease-store.js';
import { RedisCircuitStore } from './redis-store.js';
import type { HistoryOptions } from './redis-store-options.js';
import { TransitionFeed } from './transition-feed.js';
import { TransitionHints } from './transition-hint.js';
import { CircuitMirror } from './circuit-mirror.js';
import { SentinelMaster } from './sentinel-master.js';
import { isSentinelUrl, parseSentinelUrl } from './sentinel-url.js';
import { readTls, type TlsSocket } from './tls-options.js';
import { parseTlsOptions } from './tls-url.js';

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
  readonly history?: HistoryOptions; // config `history` (issue 31)
}

export interface OpenedRedis {
  readonly store: RedisCircuitStore;
  readonly leases: RedisLeaseStore;
  /** Every host's transitions as they happen, for `/events/stream` (started). */
  readonly feed: TransitionFeed;
  /** The store's schema version (`schema-key.ts`), checked and recorded at start. */
  readonly schemaVersion: number;
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
 * Connect what the store needs (commands, and the `changes` subscription: two connections to
 * one Redis, or the Cluster client and one subscription connection) and resolve once the
 * subscription is live, so the cache works from the first request.
 */
export async function openRedisStore(options: OpenRedisOptions): Promise<OpenedRedis> {
  const startTimeoutMs = options.startTimeoutMs ?? 8_000; // 8 s
  // A server that accepts the connection but never answers would hang the handshake: bound it all.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${startTimeoutMs} ms`)), startTimeoutMs);
  });
  const opening = open(options, startTimeoutMs);
  let opened: OpenedRedis;
  try {
    opened = await Promise.race([opening, deadline]);
  } catch (error) {
    void opening.then(
      (late) => late.close(),
      () => {},
    );
    throw error;
  } finally {
    clearTimeout(timer);
  }
  // Past the deadline, which bounds reaching Redis: moving a large store of the layout before
  // shards is a one-off upgrade that takes as long as it takes (logged), and is resumed if cut off.
  try {
    await moveLegacyKeys(opened.store, options.logger);
  } catch (error) {
    await opened.close();
    throw error;
  }
  return opened;
}

async function moveLegacyKeys(store: RedisCircuitStore, logger: Logger): Promise<void> {
  const started = Date.now();
  const moved = await migrateLegacyKeys(store);
  if (moved > 0)
    logger.info(
      { event: 'redis_layout_migrated', circuits: moved, ms: Date.now() - started },
      `moved ${moved} circuits of the layout before shards into the shards`,
    );
}

/** A `redis+sentinel://` URL: the primary Sentinel names, behind a loopback port (`sentinel-master.ts`). */
async function followSentinel(
  raw: string,
  logger: Logger,
): Promise<{ url: string; sentinel: SentinelMaster; tls: TlsSocket | undefined }> {
  const parsed = parseSentinelUrl(raw);
  if ('problem' in parsed) throw new RedisStartError(`the URL ${parsed.problem}`, null);
  const tls = parsed.tls ? readTls(parsed.tlsPaths) : undefined;
  const sentinel = await SentinelMaster.start(parsed, logger, tls);
  const auth =
    parsed.username !== '' || parsed.password !== ''
      ? `${encodeURIComponent(parsed.username)}:${encodeURIComponent(parsed.password)}@`
      : '';
  return { url: `${parsed.tls ? 'rediss' : 'redis'}://${auth}127.0.0.1:${sentinel.port}/${parsed.db}`, sentinel, tls };
}

/** A plain `rediss://` URL's tls_* options, read (undefined for `redis://`). */
function plainTls(raw: string): TlsSocket | undefined {
  const url = new URL(raw);
  if (url.protocol !== 'rediss:') return undefined;
  const paths = parseTlsOptions(url.searchParams, true);
  if ('problem' in paths) throw new RedisStartError(`the URL ${paths.problem}`, null);
  return readTls(paths);
}

/** The links the store works through: commands, and the `changes` subscription. */
interface Links {
  readonly link: CommandLink;
  readonly subscriber: Subscriber | ShardChannels;
  readonly db: number;
  close(): void;
}

async function open(options: OpenRedisOptions, startTimeoutMs: number): Promise<OpenedRedis> {
  if (isClusterUrl(options.url)) {
    const parsed = parseClusterUrl(options.url);
    if ('problem' in parsed) throw new RedisStartError(`the URL ${parsed.problem}`, null);
    const tls = parsed.tls ? readTls(parsed.tlsPaths) : undefined;
    const cluster = await connectCluster(parsed, options.logger, !options.queueOffline, tls);
    return openOn({ link: cluster.link, subscriber: cluster.subscriber, db: 0, close: () => cluster.close() }, options);
  }
  const followed = isSentinelUrl(options.url) ? await followSentinel(options.url, options.logger) : null;
  try {
    const tls = followed === null ? plainTls(options.url) : followed.tls;
    const links = await connectPlain(followed?.url ?? options.url, options, startTimeoutMs, tls, followed?.sentinel);
    return await openOn(links, options);
  } catch (error) {
    followed?.sentinel.stop();
    throw error;
  }
}

/** One Redis (or the primary Sentinel names): a command connection and a subscription connection. */
async function connectPlain(
  url: string,
  options: OpenRedisOptions,
  startTimeoutMs: number,
  tls: TlsSocket | undefined,
  sentinel?: SentinelMaster,
): Promise<Links> {
  const common = {
    url,
    tls,
    // Behind the loopback port: the certificate must name the primary (or tls_servername, if given).
    tlsHost: sentinel === undefined || tls?.servername !== undefined ? undefined : () => sentinel.host,
    startTimeoutMs,
    failFastOffline: !options.queueOffline,
    logger: options.logger,
  };
  const client = await connectRedis({ ...common, name: 'circuitlog' });
  const subscriber = await connectRedis({ ...common, name: 'circuitlog-changes' }).catch((error: unknown) => {
    client.destroy();
    throw error;
  });
  const close = () => {
    sentinel?.stop();
    for (const c of [client, subscriber]) {
      try {
        c.destroy();
      } catch {
        // already closed
      }
    }
  };
  return {
    link: connectionLink(client),
    subscriber: subscriber as unknown as Subscriber,
    db: Number(new URL(url).pathname.slice(1) || 0),
    close,
  };
}

async function openOn(links: Links, options: OpenRedisOptions): Promise<OpenedRedis> {
  const { prefix, timeoutMs, logger, replicasAck, replicasAckTimeoutMs, history } = options;
  try {
    const store = new RedisCircuitStore(links.link, links.subscriber, {
      db: links.db,
      prefix,
      timeoutMs,
      logger,
      replicasAck,
      replicasAckTimeoutMs,
      history,
    });
    await store.ready();
    const schemaVersion = await claimSchema(store.redis, store.keys.prefix); // before any write
    await store.epoch.sync(); // adopt every shard's epoch, or write one into an empty shard
    const feed = new TransitionFeed(store.redis, store.keys, { logger });
    await feed.start();
    // A write that (probably) made a transition: read its shard's stream now (`transition-hint.ts`);
    // a miss only waits for the feed's read of every shard each second.
    const hints = new TransitionHints();
    store.onChange((name, circuit) => {
      if (hints.probablyTransitioned(name, circuit)) feed.hint(shardOf(name));
    });
    store.onRebuild(() => feed.hintAll());
    store.seqSeen = (shard) => feed.seqOf(shard); // after a reset, transition numbers go on above what this host served
    store.epoch.watch();
    // An emptied store lost its schema key too: mark it again, so an older build is still refused.
    store.epoch.onReset(() => {
      claimSchema(store.redis, store.keys.prefix).catch((error: unknown) =>
        logger.error(
          { event: 'schema_claim_failed', err: (error as Error).message },
          'marking the emptied store with its schema version failed',
        ),
      );
    });
    let mirror: CircuitMirror | undefined;
    return {
      store,
      leases: new RedisLeaseStore(store, prefix),
      feed,
      schemaVersion,
      mirror: async (headLimit?: number) => {
        if (mirror === undefined) {
          mirror = new CircuitMirror(store, logger, headLimit);
          void mirror.start(); // never rejects: a failed load is logged and retried
        }
        return mirror;
      },
      close: async () => {
        store.epoch.stop();
        store.stop();
        feed.stop();
        mirror?.stop();
        links.close();
      },
    };
  } catch (error) {
    links.close();
    throw error;
  }
}
