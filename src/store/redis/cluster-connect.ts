import { createCluster } from '@redis/client';
import type { Logger } from 'pino';
import { ClusterSubscriber } from './cluster-subscriber.js';
import type { ClusterUrl } from './cluster-url.js';
import type { CommandLink } from './redis-commands.js';
import { permanentStartFailure, RedisStartError } from './start-errors.js';
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
  const { cluster, auth, socket, permanent } = openCluster(url, logger, failFastOffline, tlsSocket);
  const connecting = cluster.connect();
  const slots = cluster._slots as unknown as { rediscover(): Promise<void> };
  const layout = {
    known: connecting.then(() => {}),
    primaryOf: (slot: number) => {
      const primary = cluster.slots[slot]?.master;
      if (primary === undefined) return undefined;
      // A node that never met another announces no address (a cluster of one): it is one the URL names.
      return primary.host === '' || primary.host === '?' ? url.nodes[0]! : { host: primary.host, port: primary.port };
    },
    rediscover: () => slots.rediscover(),
  };
  layout.known.catch(() => {}); // the commands and the subscription see it
  const subscriber = new ClusterSubscriber(layout, auth, logger, url.tls ? socket : {});
  const connected = layout.known;
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
