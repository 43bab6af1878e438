import type { Logger } from 'pino';
import { newRedisClient, type RedisConnection } from './redis-client.js';
import type { ShardChannels, ShardHandlers } from './shard-watch.js';
import { SHARD_TAGS, slotOf } from './shards.js';
import type { TlsSocket } from './tls-options.js';

const CONNECT_TIMEOUT_MS = 2_000; // 2 s per attempt
const RETRY_MIN_MS = 100; // a shard whose subscription failed is tried again after 0.1 s, doubling
const RETRY_MAX_MS = 1_000; // to 1 s

/** What the subscriber needs of the cluster client: the layout, and reading it again. */
export interface ClusterLayout {
  /** Resolves once the layout is known (the cluster client connected). */
  readonly known: Promise<void>;
  /** The primary serving a slot, as the cluster client knows it now. */
  primaryOf(slot: number): { host: string; port: number } | undefined;
  /** Ask the nodes for the layout again (after a slot moved or a node went). */
  rediscover(): Promise<void>;
}

/** One subscription connection to one primary, holding the shards whose slots it serves. */
interface NodeLink {
  readonly address: string;
  readonly client: RedisConnection;
  readonly connected: Promise<unknown>;
  readonly shards: Set<number>;
  dead: boolean;
}

/**
 * The `changes` subscription on a Cluster: each shard's writes SPUBLISH on the shard's own
 * channel (in the shard's slot), which only the primary serving that slot (and its replicas)
 * handles, so adding primaries adds write throughput. Here each shard's channel is
 * SSUBSCRIBEd on that primary, one connection per primary for all of its shards, and every
 * loss is told per shard: the connection failing or ending (a primary killed or failed over:
 * every shard on it), or the primary unsubscribing a channel itself (Redis does when its slot
 * moves to another node: `sharded-channel-moved` of the client). A lost shard is subscribed
 * again, after the layout is read again, on the slot's primary now, and confirmed when that
 * SSUBSCRIBE is answered (`MOVED`: the layout was stale, read it again and retry).
 *
 * Why not the cluster client's own SSUBSCRIBE: it follows a moved channel by itself, but
 * tells nobody when a channel was lost and when it was subscribed again (and resubscribes
 * after a node is gone without waiting for the answer), so a cache could not know for which
 * span it may have missed messages. The layout is still the cluster client's.
 */
export class ClusterSubscriber implements ShardChannels {
  readonly sharded = true as const;
  private readonly links = new Map<string, NodeLink>();
  private readonly where: (NodeLink | null)[] = SHARD_TAGS.map(() => null);
  /** Per shard: bumped on every loss, so an attempt of before that finishes late is dropped. */
  private readonly turn: number[] = SHARD_TAGS.map(() => 0);
  private readonly failures: number[] = SHARD_TAGS.map(() => 0);
  private channels: readonly string[] = [];
  private handlers: ShardHandlers | null = null;
  private stopped = false;
  private reported = false;

  constructor(
    private readonly layout: ClusterLayout,
    private readonly auth: { username?: string; password?: string },
    private readonly logger: Logger,
    /** The cluster's TLS socket options (empty without TLS). */
    private readonly tlsSocket: Partial<TlsSocket>,
  ) {}

  start(channels: readonly string[], handlers: ShardHandlers): void {
    this.channels = channels;
    this.handlers = handlers;
    for (let shard = 0; shard < channels.length; shard++) void this.subscribe(shard);
  }

  resubscribe(shard: number): void {
    const link = this.where[shard];
    this.lose(shard);
    // Only once the unsubscribe is answered: the client drops a channel's listeners when that
    // answer comes, so a subscribe sent before it on the same connection would be undone.
    const unsubscribed =
      link && !link.dead ? link.client.SUNSUBSCRIBE(this.channels[shard]!).catch(() => {}) : Promise.resolve();
    void unsubscribed.then(() => this.again(shard, 0));
  }

  stop(): void {
    this.stopped = true;
    for (const link of this.links.values()) this.close(link);
  }

  /** The shard's subscription is gone: tell, and forget where it was. */
  private lose(shard: number): void {
    this.turn[shard]!++;
    const link = this.where[shard];
    this.where[shard] = null;
    if (link) {
      link.shards.delete(shard);
      if (link.shards.size === 0 && !link.dead) this.close(link);
    }
    this.handlers?.lost(shard);
  }

  private again(shard: number, delayMs: number): void {
    if (this.stopped) return;
    const turn = this.turn[shard];
    setTimeout(() => {
      if (this.turn[shard] === turn && this.where[shard] === null) void this.subscribe(shard);
    }, delayMs).unref();
  }

  private async subscribe(shard: number): Promise<void> {
    const turn = this.turn[shard];
    let link: NodeLink | undefined;
    try {
      await this.layout.known;
      if (this.stopped) return;
      const primary = this.layout.primaryOf(slotOf(SHARD_TAGS[shard]!));
      if (primary === undefined) throw new Error(`no primary serves slot ${slotOf(SHARD_TAGS[shard]!)}`);
      link = this.linkTo(primary.host, primary.port);
      link.shards.add(shard);
      this.where[shard] = link;
      await link.connected;
      await link.client.SSUBSCRIBE(this.channels[shard]!, (message: string) => this.handlers?.message(shard, message));
      if (this.turn[shard] !== turn || link.dead) return; // lost meanwhile: that loss subscribes again
      this.failures[shard] = 0;
      this.reported = false;
      this.handlers?.confirmed(shard);
    } catch (error) {
      if (this.stopped || this.turn[shard] !== turn) return;
      this.report(shard, error);
      if (this.where[shard] !== null) this.lose(shard);
      void this.layout.rediscover().catch(() => {});
      const failures = this.failures[shard]!++;
      this.again(shard, Math.min(RETRY_MIN_MS * 2 ** failures, RETRY_MAX_MS));
    }
  }

  private report(shard: number, error: unknown): void {
    if (this.reported) return;
    this.reported = true;
    this.logger.warn(
      { event: 'redis_subscribe_failed', shard, channel: this.channels[shard], err: (error as Error).message },
      "a shard's changes subscription failed; retrying on the slot's primary",
    );
  }

  /** The connection to a primary, made on first use; it tells every loss of its shards. */
  private linkTo(host: string, port: number): NodeLink {
    const address = `${host}:${port}`;
    const held = this.links.get(address);
    if (held !== undefined && !held.dead) return held;
    const scheme = this.tlsSocket.tls ? 'rediss' : 'redis';
    const client = newRedisClient({
      url: `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`,
      ...this.auth,
      name: 'circuitlog-changes',
      socket: { ...this.tlsSocket, connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false },
    });
    const link: NodeLink = { address, client, connected: client.connect(), shards: new Set(), dead: false };
    link.connected.catch(() => {}); // each shard's attempt sees the failure itself
    const down = () => this.down(link);
    client.on('error', down);
    client.on('end', down);
    // Redis unsubscribes a channel itself when its slot moves to another node.
    client.on('sharded-channel-moved', (channel: string) => {
      const shard = this.channels.indexOf(channel);
      if (shard === -1 || this.where[shard] !== link) return;
      this.lose(shard);
      void this.layout.rediscover().then(
        () => this.again(shard, 0),
        () => this.again(shard, RETRY_MIN_MS),
      );
    });
    this.links.set(address, link);
    return link;
  }

  /** A connection failed or ended (its primary killed, failed over, restarted): every shard on it is lost. */
  private down(link: NodeLink): void {
    if (link.dead) return;
    this.close(link);
    const shards = [...link.shards];
    for (const shard of shards) this.lose(shard);
    if (this.stopped || shards.length === 0) return;
    void this.layout.rediscover().catch(() => {});
    for (const shard of shards) this.again(shard, RETRY_MIN_MS);
  }

  private close(link: NodeLink): void {
    link.dead = true;
    if (this.links.get(link.address) === link) this.links.delete(link.address);
    try {
      link.client.destroy();
    } catch {
      // already closed
    }
  }
}
