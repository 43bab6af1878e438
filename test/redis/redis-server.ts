import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { tempDir } from '../server-process.js';
import { registerTlsPort, tlsConnect, tlsQuery, tlsServerArgs, type TlsFiles } from './tls.js';

/** A real `redis-server` of the test's own: loopback, a random port, a temp dir; never the system service. */
export interface RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly child: ChildProcess;
  url(db?: number): string;
  /** Stop it (SIGTERM: with AOF on, it fsyncs and exits) and wait for the exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Start it again on the same port and dir (same data, if persisted). */
  restart(): Promise<RedisServer>;
}

export interface RedisServerOptions {
  /** `appendonly yes` with this `appendfsync`; default: no persistence at all. */
  readonly appendfsync?: 'always' | 'everysec';
  readonly port?: number;
  readonly dir?: string;
  /** `requirepass`: clients must AUTH with this password. */
  readonly password?: string;
  /** A replica of the redis-server on this loopback port. */
  readonly replicaOf?: number;
  /** More `redis-server` arguments (a Cluster node's: test/redis/cluster.ts). */
  readonly args?: readonly string[];
  /**
   * TLS only on `port` (no plain-text port), with these certificates (test/redis/tls.ts), TLS
   * replication (and cluster bus, with `--tls-cluster yes` in `args`); clients must present a
   * certificate of the test CA unless `tlsAuthClients` is 'no'. `url()` is then `rediss://`
   * with the `tls_*` options.
   */
  readonly tls?: TlsFiles;
  readonly tlsAuthClients?: 'yes' | 'no';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Start `redis-server` and resolve once it accepts connections. */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const dir = options.dir ?? tempDir('circuitlog-redis-');
  const args = [
    ...(options.tls === undefined
      ? ['--port', String(port)]
      : tlsServerArgs(options.tls, port, options.tlsAuthClients)),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--daemonize',
    'no',
    '--loglevel',
    'warning',
  ];
  args.push('--appendonly', options.appendfsync ? 'yes' : 'no');
  if (options.appendfsync) args.push('--appendfsync', options.appendfsync, '--appenddirname', 'aof');
  if (options.password !== undefined) args.push('--requirepass', options.password);
  if (options.replicaOf !== undefined) args.push('--replicaof', '127.0.0.1', String(options.replicaOf));
  args.push(...(options.args ?? []));
  if (options.tls !== undefined) registerTlsPort(port, options.tls);
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start: ${output}`)), 15_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${output}`)));
    const poll = setInterval(() => {
      const socket = options.tls === undefined ? net.connect(port, '127.0.0.1') : tlsConnect(options.tls, port);
      socket.once(options.tls === undefined ? 'connect' : 'secureConnect', () => {
        socket.write('PING\r\n');
        socket.once('data', (data) => {
          socket.destroy();
          if (
            !data.toString().startsWith('+PONG') &&
            !data.toString().startsWith('-NOAUTH') &&
            !data.toString().startsWith('-CLUSTERDOWN')
          )
            return; // still loading its data
          clearInterval(poll);
          clearTimeout(timer);
          resolve();
        });
      });
      socket.once('error', () => socket.destroy());
    }, 50);
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  });
  const server: RedisServer = {
    port,
    dir,
    child,
    url: (db = 0) =>
      `${options.tls === undefined ? 'redis' : 'rediss'}://${options.password === undefined ? '' : `:${options.password}@`}127.0.0.1:${port}/${db}${options.tls === undefined ? '' : `?${tlsQuery(options.tls)}`}`,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) {
        if (signal !== 'SIGKILL') child.kill('SIGCONT'); // a frozen server cannot exit otherwise
        child.kill(signal);
      }
      await exited;
    },
    restart: async () => {
      await server.stop();
      return startRedis({ ...options, port, dir });
    },
  };
  return server;
}

export const aofDir = (server: RedisServer) => path.join(server.dir, 'aof');
