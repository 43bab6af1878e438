import { EventEmitter } from 'node:events';
import { createClient, createCluster } from '@redis/client';
import type { Logger } from 'pino';
import type { Subscriber } from './change-subscription.js';
import type { ClusterUrl } from './cluster-url.js';
import { RedisStartError, type RedisConnection } from './connect.js';
import type { CommandLink } from './redis-commands.js';
import { permanentStartFailure } from './start-errors.js';
import type { TlsSocket } from './tls-options.js';

const CONNECT_TIMEOUT_MS = 2_000; // 2 s per attempt
const RECONNECT_MAX_DELAY_MS = 1_000; // 1 s
const TOPOLOGY_REFRESH_MS = 200; // a node that stopped answering: ask the others for the layout after 0.2 s

export interface OpenedCluster {
  readonly link: CommandLink;
  readonly subscriber: ClusterSubscriber;
  close(): void;
}

/**
 * A Redis Cluster through @redis/client's cluster client: it learns the slots from the nodes
 * named, sends each command to the primary of its key's slot, follows MOVED and ASK (a
 * resharding), and asks the nodes for the layout again when a node stops answering (a primary
 * failed over to its replica), so the service follows without a restart.
 */
export async function connectCluster(
  url: ClusterUrl,
  logger: Logger,
  failFastOffline: boolean,
  tlsSocket?: TlsSocket,
): Promise<OpenedCluster> {
  const opened = clusterLinks(url, logger, failFastOffline, tlsSocket);
  try {
    await opened.connected;
  } catch (error) {
    opened.close();
    const permanent = opened.permanent();
    throw permanent === null ? error : new RedisStartError(permanent, error);
  }
  return opened;
}

/**
 * The cluster client for the URL's nodes, with its error reporting (one line per outage);
 * `permanent()`: why the start can never succeed (TLS, credentials), from the errors so far.
 */
function openCluster(url: ClusterUrl, logger: Logger, failFastOffline: boolean, tlsSocket: TlsSocket | undefined) {
  const scheme = url.tls ? 'rediss' : 'redis';
  const where = ({ host, port }: { host: string; port: number }) =>
    `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const auth = {
    ...(url.username === '' ? {} : { username: url.username }),
    ...(url.password === '' ? {} : { password: url.password }),
  };
  const socket = {
    connectTimeout: CONNECT_TIMEOUT_MS,
    reconnectStrategy: (retries: number) => Math.min(50 * 2 ** Math.min(retries, 5), RECONNECT_MAX_DELAY_MS),
    ...(url.tls ? (tlsSocket ?? { tls: true as const }) : {}),
  };
  const cluster = createCluster({
    rootNodes: url.nodes.map((n) => ({ url: where(n) })),
    defaults: { ...auth, socket, disableOfflineQueue: failFastOffline, name: 'circuitlog' },
    RESP: 2,
    topologyRefreshOnReconnectionAttemptStrategy: TOPOLOGY_REFRESH_MS,
  });
  let reported = false;
  let permanent: string | null = null;
  cluster.on('error', (error: Error) => {
    permanent ??= permanentStartFailure(error, new URL(where(url.nodes[0]!)));
    if (reported) return;
    reported = true;
    logger.error(
      { event: 'redis_error', connection: 'cluster', err: error.message },
      'Redis Cluster connection failed; retrying',
    );
  });
  cluster.on('node-ready', () => (reported = false));
  return { cluster, where, auth, socket, permanent: () => permanent };
}

/** The cluster's links at once; `connected` resolves when the layout is known and the subscription connected. */
export function clusterLinks(
  url: ClusterUrl,
  logger: Logger,
  failFastOffline: boolean,
  tlsSocket?: TlsSocket,
): OpenedCluster & { readonly connected: Promise<void>; permanent(): string | null } {
  const { cluster, where, auth, socket, permanent } = openCluster(url, logger, failFastOffline, tlsSocket);
  const nodes = () => {
    // A node that never met another announces no address (a cluster of one): it is one the URL names.
    const known = [...cluster.masters, ...cluster.replicas]
      .filter((n) => n.host !== '' && n.host !== '?')
      .map((n) => ({ host: n.host, port: n.port }));
    return (known.length > 0 ? known : url.nodes).map(where);
  };
  const subscriber = new ClusterSubscriber(nodes, auth, logger, url.tls ? socket : {});
  const connecting = cluster.connect();
  const connected = connecting.then(() => subscriber.start());
  connected.catch(() => {}); // the caller awaits it (or, in tests, only the commands do)
  const slots = cluster._slots as unknown as { rediscover(): Promise<void> };
  let lastRediscoverMs = -Infinity;
  let layoutKnown = false; // once it is, a command goes straight to the client (no wait on a settled promise)
  connecting.then(
    () => (layoutKnown = true),
    () => {},
  );
  const link: CommandLink = {
    send: async (args, routeKey) => {
      if (!layoutKnown) await connecting;
      try {
        return await cluster.sendCommand(routeKey, false, args);
      } catch (error) {
        // A dead primary answers nothing: ask the others for the layout (its replica may be promoted by now).
        if (
          !/^(MOVED|ASK|TRYAGAIN|NOSCRIPT|WRONGTYPE|ERR|BUSY|NOAUTH|WRONGPASS)/.test(
            String((error as Error).message),
          ) &&
          Date.now() - lastRediscoverMs > TOPOLOGY_REFRESH_MS
        ) {
          lastRediscoverMs = Date.now();
          void slots.rediscover().catch(() => {});
        }
        throw error;
      }
    },
  };
  return {
    link,
    subscriber,
    connected,
    permanent,
    close: () => {
      subscriber.stop();
      cluster.destroy();
    },
  };
}

/**
 * The `changes` subscription on a Cluster: a plain PUBLISH reaches every node, so one
 * connection to any node hears every write. When that node goes, the connection moves to
 * another node the cluster client knows, and says so the way a Redis client does ('error',
 * then 'ready' again), so the cache distrusts itself and the subscription resubscribes.
 */
export class ClusterSubscriber extends EventEmitter implements Subscriber {
  private client: RedisConnection | null = null;
  private turn = 0;
  private stopped = false;
  private readonly channels = new Map<string, (message: string) => void>();

  constructor(
    private readonly nodes: () => string[],
    private readonly auth: { username?: string; password?: string },
    private readonly logger: Logger,
    /** The cluster's TLS socket options (empty without TLS). */
    private readonly tlsSocket: Partial<TlsSocket>,
  ) {
    super();
    this.on('error', () => {}); // an EventEmitter throws on an 'error' nobody listens to
  }

  get isReady(): boolean {
    return this.client?.isReady ?? false;
  }

  async start(): Promise<void> {
    await this.connectNext();
  }

  stop(): void {
    this.stopped = true;
    this.client?.destroy();
  }

  async SUBSCRIBE(channel: string, listener: (message: string) => void): Promise<void> {
    this.channels.set(channel, listener);
    await this.client?.SUBSCRIBE(channel, listener);
  }

  async UNSUBSCRIBE(channel: string): Promise<void> {
    this.channels.delete(channel);
    await this.client?.UNSUBSCRIBE(channel);
  }

  private async connectNext(): Promise<void> {
    if (this.stopped) return;
    const nodes = this.nodes();
    const url = nodes[this.turn++ % nodes.length]!;
    const client = createClient({
      url,
      RESP: 2,
      ...this.auth,
      name: 'circuitlog-changes',
      socket: { ...this.tlsSocket, connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false },
    }) as unknown as RedisConnection;
    this.client = client;
    let failed = false;
    const fail = () => {
      if (failed || this.stopped) return;
      failed = true;
      this.emit('error');
      client.destroy();
      setTimeout(() => void this.connectNext().catch(() => {}), 100).unref();
    };
    client.on('error', fail);
    client.on('end', fail);
    try {
      await client.connect();
    } catch (error) {
      this.logger.warn(
        { event: 'redis_subscribe_failed', node: url.replace(/\/\/[^@]*@/, '//'), err: (error as Error).message },
        'the changes subscription could not reach a Cluster node; trying another',
      );
      fail();
      throw error;
    }
    this.emit('ready');
  }
}
