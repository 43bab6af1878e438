import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { serveClusterMetrics } from './observe/cluster-metrics.js';

export interface PrimaryOptions {
  readonly workers: number;
  readonly port: number;
  readonly host: string;
  /** How long SIGTERM waits for workers to drain before killing them. */
  readonly shutdownGraceMs: number;
  readonly logger: Logger;
}

const RESPAWN_DELAY_MS = 200; // keeps a worker that dies at start from spinning the CPU

/**
 * The primary of a multi-worker server: forks N workers that share one port (node:cluster)
 * and one database file, replaces a worker that crashes, and on SIGTERM drains them all.
 */
export function runPrimary(options: PrimaryOptions): void {
  const { logger } = options;
  let stopping = false;
  const ready = new Set<number>();
  let announced = false;

  const fork = (): Worker => {
    const worker = cluster.fork();
    worker.on('listening', (address) => {
      ready.add(worker.id);
      if (!announced && ready.size >= options.workers) {
        announced = true;
        logger.info(
          { event: 'listening', host: options.host, port: address.port, workers: options.workers },
          `circuitlog listening on http://${options.host}:${address.port} with ${options.workers} workers`,
        );
      }
    });
    return worker;
  };

  cluster.on('exit', (worker, code, signal) => {
    ready.delete(worker.id);
    if (stopping) {
      if (Object.values(cluster.workers ?? {}).every((w) => w === undefined || w.isDead())) {
        logger.info({ event: 'stopped' }, 'stopped');
        process.exit(0);
      }
      return;
    }
    logger.error({ event: 'worker_crashed', worker_pid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
    setTimeout(() => {
      if (!stopping) fork();
    }, RESPAWN_DELAY_MS);
  });

  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ event: 'shutdown', signal }, 'stopping workers');
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    for (const worker of workers) worker.process.kill('SIGTERM');
    // Workers drain for shutdownGraceMs themselves; this is the backstop.
    const killer = setTimeout(() => {
      for (const worker of workers) if (!worker.isDead()) worker.process.kill('SIGKILL');
    }, options.shutdownGraceMs + 1_000);
    killer.unref();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  serveClusterMetrics(); // a worker's /metrics asks here for the counters of all workers
  for (let i = 0; i < options.workers; i++) fork();
}
