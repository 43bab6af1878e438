import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { serveClusterMetrics } from './observe/cluster-metrics.js';
import { urlHost } from './server/listen.js';

/** What a worker sends the primary before it exits because it could not start. */
export interface StartFailedMessage {
  readonly type: 'circuitlog:start_failed';
  readonly message: string;
}

/** The part of a node:cluster Worker the primary uses (tests pass fakes). */
export interface WorkerProcess {
  readonly id: number;
  readonly process: { readonly pid?: number | undefined; kill(signal?: NodeJS.Signals): boolean };
  on(event: 'listening', listener: (address: { port: number }) => void): unknown;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'exit', listener: (code: number | null, signal: string | null) => void): unknown;
}

export interface PrimaryOptions {
  readonly workers: number;
  readonly port: number;
  readonly host: string;
  /** How long SIGTERM waits for workers to drain (their shutdown delay and grace) before killing them. */
  readonly shutdownGraceMs: number;
  readonly logger: Logger;
  readonly clock?: () => number;
  readonly fork?: () => WorkerProcess;
  /** Ends the primary; `process.exit` unless a test says otherwise. */
  readonly exit?: (code: number) => void;
  /** Where the reason for stopping goes besides the log; stderr by default. */
  readonly report?: (message: string) => void;
}

export interface Primary {
  /** Stop every worker (they drain) and exit with `code`. */
  shutdown(signal: string, code?: number): void;
}

const RESPAWN_DELAY_MS = 200; // a replacement starts this long after a crash
/** Crash-loop protection: more crashes than this within the window stop the service. */
export const MAX_RESTARTS = 5;
export const RESTART_WINDOW_MS = 60_000; // 60 s

/**
 * A sliding-window restart budget: `allow(now)` is false once `max` restarts happened in
 * the last `windowMs`, so a worker that crashes on every request cannot spin forever.
 */
export class RestartBudget {
  private readonly restarts: number[] = [];

  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  allow(now: number): boolean {
    while (this.restarts.length > 0 && this.restarts[0]! <= now - this.windowMs) this.restarts.shift();
    if (this.restarts.length >= this.max) return false;
    this.restarts.push(now);
    return true;
  }
}

function isStartFailure(message: unknown): message is StartFailedMessage {
  return (message as StartFailedMessage | null)?.type === 'circuitlog:start_failed';
}

/**
 * The primary of a multi-worker server: forks N workers that share one port (node:cluster)
 * and one database file. A worker that exits before it listens stops the whole service with
 * its reason (exit code 2): its replacement would fail the same way. A worker that crashes
 * later is replaced, at most MAX_RESTARTS times per RESTART_WINDOW_MS (then exit code 1).
 */
export function runPrimary(options: PrimaryOptions): Primary {
  const { logger } = options;
  const clock = options.clock ?? Date.now;
  const fork = options.fork ?? (() => cluster.fork());
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const report = options.report ?? ((message: string) => process.stderr.write(`circuitlog: ${message}\n`));
  const budget = new RestartBudget(MAX_RESTARTS, RESTART_WINDOW_MS);
  const live = new Map<number, WorkerProcess>();
  const ready = new Set<number>();
  let stopping: { code: number } | null = null;
  let announced = false;

  const finish = () => {
    logger.info({ event: 'stopped' }, 'stopped');
    exit(stopping!.code);
  };

  const shutdown = (signal: string, code = 0) => {
    if (stopping) return;
    stopping = { code };
    logger.info({ event: 'shutdown', signal }, 'stopping workers');
    const workers = [...live.values()];
    if (workers.length === 0) return finish();
    for (const worker of workers) worker.process.kill('SIGTERM');
    // Workers drain for shutdownGraceMs themselves; this is the backstop.
    const killer = setTimeout(() => {
      for (const worker of live.values()) worker.process.kill('SIGKILL');
    }, options.shutdownGraceMs + 1_000);
    killer.unref();
  };

  const stopWith = (event: string, code: number, message: string) => {
    logger.error({ event }, message);
    report(message);
    shutdown(event, code);
  };

  const start = () => {
    const worker = fork();
    live.set(worker.id, worker);
    let listened = false;
    let startError: string | undefined;
    worker.on('message', (message) => {
      if (isStartFailure(message)) startError = message.message;
    });
    worker.on('listening', (address) => {
      listened = true;
      ready.add(worker.id);
      if (!announced && ready.size >= options.workers) {
        announced = true;
        logger.info(
          { event: 'listening', host: options.host, port: address.port, workers: options.workers },
          `circuitlog listening on http://${urlHost(options.host)}:${address.port} with ${options.workers} workers`,
        );
      }
    });
    worker.on('exit', (code, signal) => {
      live.delete(worker.id);
      ready.delete(worker.id);
      if (stopping) {
        if (live.size === 0) finish();
        return;
      }
      const how = signal ? `signal ${signal}` : `exit code ${code}`;
      if (!listened) {
        return stopWith('worker_start_failed', 2, `cannot start: a worker failed at start: ${startError ?? how}`);
      }
      logger.error({ event: 'worker_crashed', worker_pid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
      if (!budget.allow(clock())) {
        const window = `${RESTART_WINDOW_MS / 1000} s`;
        return stopWith('crash_loop', 1, `stopping: workers crashed more than ${MAX_RESTARTS} times within ${window} (last: ${how})`);
      }
      setTimeout(() => {
        if (!stopping) start();
      }, RESPAWN_DELAY_MS);
    });
  };

  serveClusterMetrics(); // a worker's /metrics asks here for the counters of all workers
  for (let i = 0; i < options.workers; i++) start();
  return { shutdown };
}
