import net from 'node:net';
import type { Logger } from 'pino';
import { newRedisClient, type RedisConnection } from './redis-client.js';
import type { SentinelUrl } from './sentinel-url.js';
import { permanentStartFailure, RedisStartError } from './start-errors.js';
import type { TlsSocket } from './tls-options.js';

interface Address {
  readonly host: string;
  readonly port: number;
}
type SentinelClient = RedisConnection;

/** A connection to one sentinel (RESP2, TLS with `rediss+sentinel://`: `tlsSocket`, the URL's tls_* options). */
function sentinelClient(
  url: SentinelUrl,
  { host, port }: Address,
  socket: { connectTimeout?: number; reconnectStrategy: false | (() => number) },
  tlsSocket: TlsSocket | undefined,
): SentinelClient {
  const where = host.includes(':') ? `[${host}]` : host;
  const auth = {
    ...(url.sentinelUsername === '' ? {} : { username: url.sentinelUsername }),
    ...(url.sentinelPassword === '' ? {} : { password: url.sentinelPassword }),
  };
  const client = newRedisClient({
    url: `${url.tls ? 'rediss' : 'redis'}://${where}:${port}`,
    socket: { ...socket, ...(url.tls ? (tlsSocket ?? { tls: true as const }) : {}) },
    ...auth,
  });
  client.on('error', () => {}); // a sentinel down is expected: the others answer
  return client;
}

const ASK_TIMEOUT_MS = 2_000; // 2 s per sentinel asked
const REFRESH_GAP_MS = 250; // ask the sentinels at most 4 times a second when the primary does not answer

/**
 * The primary that Sentinel names, behind one loopback port of this process. The store's
 * connections (commands, the `changes` subscription, the transition reader) connect to that
 * port, and each of their connections is piped to the current primary. When a sentinel
 * announces `+switch-master`, or the primary stops accepting connections (then the sentinels
 * are asked again), every piped connection is closed: the clients reconnect as after any
 * Redis restart (re-subscribe, rebuild the cache, resume the transition feed), now to the new
 * primary. Why not @redis/client's `createSentinel`: see docs/many-hosts.md ("Sentinel").
 */
export class SentinelMaster {
  private target: Address;
  private readonly piped = new Set<net.Socket>();
  private readonly watchers: SentinelClient[] = [];
  private lastRefreshMs = -Infinity;
  private stopped = false;

  private constructor(
    private readonly url: SentinelUrl,
    first: Address,
    private readonly server: net.Server,
    private readonly logger: Logger,
    private readonly tlsSocket: TlsSocket | undefined,
  ) {
    this.target = first;
  }

  /**
   * Ask the sentinels for the primary (RedisStartError when none answers, none knows the name,
   * or their TLS handshake fails) and listen.
   */
  static async start(url: SentinelUrl, logger: Logger, tlsSocket?: TlsSocket): Promise<SentinelMaster> {
    const first = await askSentinels(url, ASK_TIMEOUT_MS, tlsSocket);
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const master = new SentinelMaster(url, first, server, logger, tlsSocket);
    server.on('error', (error) =>
      logger.error(
        { event: 'redis_sentinel_listener_failed', err: error.message },
        'the loopback port for Sentinel failed',
      ),
    );
    server.on('connection', (socket) => master.pipe(socket));
    master.watch();
    logger.info(
      { event: 'redis_sentinel_master', master: url.masterName, host: first.host, port: first.port },
      'Sentinel names the primary',
    );
    return master;
  }

  /** The loopback port the store's connections use. */
  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** The primary's host name now (TLS checks the certificate against it). */
  get host(): string {
    return this.target.host;
  }

  stop(): void {
    this.stopped = true;
    this.server.close();
    for (const s of this.piped) s.destroy();
    for (const w of this.watchers) {
      try {
        w.destroy();
      } catch {
        // never connected
      }
    }
  }

  private pipe(client: net.Socket): void {
    const { host, port } = this.target;
    const upstream = net.connect({ host, port, noDelay: true });
    this.piped.add(client);
    const close = () => {
      this.piped.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('close', close);
    upstream.on('error', () => {
      close();
      void this.refresh(); // the primary is gone: has Sentinel promoted another yet?
    });
    client.pipe(upstream).pipe(client);
  }

  /** Every sentinel's `+switch-master`, for this master name. */
  private watch(): void {
    for (const address of this.url.sentinels) {
      const watcher = sentinelClient(this.url, address, { reconnectStrategy: () => 1_000 }, this.tlsSocket);
      this.watchers.push(watcher);
      watcher
        .connect()
        .then(() =>
          watcher.SUBSCRIBE('+switch-master', (message: string) => {
            const [name, , , newHost, newPort] = message.split(' ');
            if (name === this.url.masterName && newHost !== undefined)
              this.switchTo({ host: newHost, port: Number(newPort) });
          }),
        )
        .catch(() => {});
    }
  }

  private async refresh(): Promise<void> {
    if (this.stopped || Date.now() - this.lastRefreshMs < REFRESH_GAP_MS) return;
    this.lastRefreshMs = Date.now();
    try {
      this.switchTo(await askSentinels(this.url, ASK_TIMEOUT_MS, this.tlsSocket));
    } catch {
      // no sentinel answers now: ask again at the next refused connection
    }
  }

  private switchTo(next: Address): void {
    if (this.stopped || (next.host === this.target.host && next.port === this.target.port)) return;
    this.logger.warn(
      { event: 'redis_sentinel_switch', master: this.url.masterName, from: this.target, to: next },
      'Sentinel promoted another primary; reconnecting to it',
    );
    this.target = next;
    for (const s of this.piped) s.destroy(); // every client reconnects, to the new primary
  }
}

/** `SENTINEL get-master-addr-by-name`, from the first sentinel that answers. */
async function askSentinels(url: SentinelUrl, timeoutMs: number, tlsSocket: TlsSocket | undefined): Promise<Address> {
  const failures: string[] = [];
  const denied: string[] = [];
  const handshakes: string[] = [];
  for (const { host, port } of url.sentinels) {
    const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    const client = sentinelClient(
      url,
      { host, port },
      { connectTimeout: timeoutMs, reconnectStrategy: false },
      tlsSocket,
    );
    try {
      const reply = await Promise.race([
        client.connect().then(() => client.sendCommand(['SENTINEL', 'get-master-addr-by-name', url.masterName])),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs).unref(),
        ),
      ]);
      if (reply === null)
        throw new RedisStartError(
          `sentinel ${where} knows no master named '${url.masterName}' (SENTINEL get-master-addr-by-name)`,
          null,
        );
      const [h, p] = reply as unknown as [string, string];
      return { host: h, port: Number(p) };
    } catch (error) {
      if (error instanceof RedisStartError) throw error;
      const message = (error as Error).message;
      if (/^(NOAUTH|WRONGPASS|NOPERM)\b|^ERR (invalid (username-)?password|AUTH)/i.test(message))
        denied.push(`${where}: ${message}`);
      const tlsFailure = url.tls ? permanentStartFailure(error, new URL(`rediss://${where}`)) : null;
      if (tlsFailure?.startsWith('the TLS handshake failed')) handshakes.push(`${where}: ${tlsFailure}`);
      failures.push(`${where}: ${message}`);
    } finally {
      try {
        client.destroy();
      } catch {
        // never connected
      }
    }
  }
  if (denied.length > 0) {
    throw new RedisStartError(
      `the sentinels refused the credentials given (the sentinel_username and sentinel_password options: docs/many-hosts.md): ${denied.join('; ')}`,
      null,
    );
  }
  if (handshakes.length > 0) {
    throw new RedisStartError(
      `no sentinel could be used over TLS (the tls_* options: docs/many-hosts.md): ${handshakes.join('; ')}`,
      null,
    );
  }
  throw new Error(`no sentinel answers (${failures.join('; ')})`);
}
