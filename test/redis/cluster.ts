import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import { startRedis, type RedisServer } from './redis-server.js';
import { cliTlsArgs, tlsQuery, type TlsFiles } from './tls.js';

const exec = promisify(execFile);

/** Cluster timing the failover tests use (also in docs/many-hosts.md). */
export const NODE_TIMEOUT_MS = 1_000;

/** A real Redis Cluster of the test's own: loopback, random ports, temp dirs. */
export interface RedisCluster {
  readonly nodes: RedisServer[];
  /** `redis+cluster://` naming every node (`rediss+cluster://` with the `tls_*` options, on TLS). */
  readonly url: string;
  /** The primaries now, with the slot ranges they serve. */
  primaries(): Promise<{ port: number; slots: [number, number][] }[]>;
  stop(): Promise<void>;
}

export const clusterCli = async (port: number, ...args: string[]) =>
  (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...cliTlsArgs(port), ...args])).stdout.trim();

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port whose cluster bus port (+10000) is free too. */
async function clusterPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if ((await isFree(port)) && (await isFree(port + 10_000))) return port;
  }
}

/**
 * `primaries` primaries, each with `replicas` replicas (`redis-cli --cluster create`); resolves
 * once every node says cluster_state:ok and every replica is in sync. With `tls`: every node on
 * TLS only, the cluster bus too (`tls-cluster yes`).
 */
export async function startCluster(
  primaries = 3,
  replicas = 1,
  extra: readonly string[] = [],
  tls?: TlsFiles,
): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  for (let i = 0; i < primaries * (1 + replicas); i++) {
    const port = await clusterPort();
    const args = [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(NODE_TIMEOUT_MS),
      '--appendonly',
      'no',
      ...(tls === undefined ? [] : ['--tls-cluster', 'yes']),
      ...extra,
    ];
    nodes.push(await startRedis({ port, args, tls }));
  }
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop('SIGKILL')));
  };
  try {
    const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
    if (primaries === 1 && replicas === 0) {
      await clusterCli(nodes[0]!.port, 'CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    } else {
      await exec('redis-cli', [
        '--cluster',
        'create',
        ...addresses,
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
        ...cliTlsArgs(nodes[0]!.port),
      ]);
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      const states = await Promise.all(nodes.map((n) => clusterCli(n.port, 'CLUSTER', 'INFO').catch(() => '')));
      // A replica that never finished its first sync is not promoted (cluster-replica-validity-factor):
      // ready means every replica's link to its primary is up, too.
      const links = await Promise.all(nodes.map((n) => clusterCli(n.port, 'INFO', 'replication').catch(() => '')));
      const synced = links.every((info) => info.includes('role:master') || info.includes('master_link_status:up'));
      if (synced && states.every((s) => s.includes('cluster_state:ok'))) break;
      if (Date.now() > deadline) throw new Error(`the cluster did not come up: ${states.join(' | ')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    nodes,
    url: `${tls === undefined ? 'redis' : 'rediss'}+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}${tls === undefined ? '' : `/?${tlsQuery(tls)}`}`,
    primaries: async () => {
      const alive = nodes.find((n) => n.child.exitCode === null && n.child.signalCode === null)!;
      const lines = (await clusterCli(alive.port, 'CLUSTER', 'NODES')).split('\n');
      return lines
        .filter((l) => l.split(' ')[2]!.includes('master') && !l.split(' ')[2]!.includes('fail'))
        .map((l) => {
          const parts = l.split(' ');
          const port = Number(parts[1]!.split(':')[1]!.split('@')[0]);
          const slots = parts
            .slice(8)
            .filter((r) => !r.startsWith('['))
            .map((r) => r.split('-').map(Number) as [number, number])
            .map(([a, b]) => [a, b ?? a] as [number, number]);
          return { port, slots };
        })
        .filter((p) => p.slots.length > 0);
    },
    stop,
  };
}
