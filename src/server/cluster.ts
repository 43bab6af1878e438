import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { serveClusterMetrics } from '../observe/cluster-metrics.js';
import { urlHost } from './listen.js';

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
  /** An IPC message to the worker (absent in tests' fakes). */
  send?(message: object): unknown;
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
  /**
   * Ask every live worker to read the credentials file again (SIGHUP to the primary): a
   * message, not a signal, so a worker still starting (no handler yet) is not killed by it.
   */
  reloadCredentials(): void;
}

/** The primary's message asking a worker to reload the credentials file. */
export const RELOAD_CREDENTIALS = 'circuitlog:reload_credentials';

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
  const pool = new WorkerPool(options);
  serveClusterMetrics(); // a worker's /metrics asks here for the counters of all workers
  for (let i = 0; i < options.workers; i++) pool.start();
  return { shutdown: (signal, code) => pool.shutdown(signal, code), reloadCredentials: () => pool.reloadCredentials() };
}

/** The live workers, which of them listen, and whether the primary is stopping. */
class WorkerPool {
  private readonly clock: () => number;
  private readonly fork: () => WorkerProcess;
  private readonly exit: (code: number) => void;
  private readonly report: (message: string) => void;
  private readonly budget = new RestartBudget(MAX_RESTARTS, RESTART_WINDOW_MS);
  private readonly live = new Map<number, WorkerProcess>();
  private readonly ready = new Set<number>();
  private stopping: { code: number } | null = null;
  private announced = false;

  constructor(private readonly options: PrimaryOptions) {
    this.clock = options.clock ?? Date.now;
    this.fork = options.fork ?? (() => cluster.fork());
    this.exit = options.exit ?? ((code: number) => process.exit(code));
    this.report = options.report ?? ((message: string) => process.stderr.write(`circuitlog: ${message}\n`));
  }

  start(): void {
    const worker = this.fork();
    this.live.set(worker.id, worker);
    let listened = false;
    let startError: string | undefined;
    worker.on('message', (message) => {
      if (isStartFailure(message)) startError = message.message;
    });
    worker.on('listening', (address) => {
      listened = true;
      this.listening(worker, address.port);
    });
    worker.on('exit', (code, signal) =>
      this.exited(worker, listened, signal ? `signal ${signal}` : `exit code ${code}`, startError, { code, signal }),
    );
  }

  reloadCredentials(): void {
    if (this.stopping) return;
    for (const worker of this.live.values()) worker.send?.({ type: RELOAD_CREDENTIALS });
  }

  /** Stop every worker (they drain for shutdownGraceMs themselves; SIGKILL is the backstop). */
  shutdown(signal: string, code = 0): void {
    if (this.stopping) return;
    this.stopping = { code };
    this.options.logger.info({ event: 'shutdown', signal }, 'stopping workers');
    const workers = [...this.live.values()];
    if (workers.length === 0) {
      this.finish();
      return;
    }
    for (const worker of workers) worker.process.kill('SIGTERM');
    const killer = setTimeout(() => {
      for (const worker of this.live.values()) worker.process.kill('SIGKILL');
    }, this.options.shutdownGraceMs + 1_000);
    killer.unref();
  }

  /** Once every worker listens, say so once. */
  private listening(worker: WorkerProcess, port: number): void {
    const { logger, host, workers } = this.options;
    this.ready.add(worker.id);
    if (this.announced || this.ready.size < workers) return;
    this.announced = true;
    logger.info(
      { event: 'listening', host, port, workers },
      `circuitlog listening on http://${urlHost(host)}:${port} with ${workers} workers`,
    );
  }

  private exited(
    worker: WorkerProcess,
    listened: boolean,
    how: string,
    startError: string | undefined,
    status: { code: number | null; signal: string | null },
  ): void {
    this.live.delete(worker.id);
    this.ready.delete(worker.id);
    if (this.stopping) {
      if (this.live.size === 0) this.finish();
      return;
    }
    if (!listened) {
      this.stopWith('worker_start_failed', 2, `cannot start: a worker failed at start: ${startError ?? how}`);
      return;
    }
    this.options.logger.error(
      { event: 'worker_crashed', worker_pid: worker.process.pid, ...status },
      'worker died; starting a replacement',
    );
    if (!this.budget.allow(this.clock())) {
      const window = `${RESTART_WINDOW_MS / 1000} s`;
      this.stopWith(
        'crash_loop',
        1,
        `stopping: workers crashed more than ${MAX_RESTARTS} times within ${window} (last: ${how})`,
      );
      return;
    }
    setTimeout(() => {
      if (!this.stopping) this.start();
    }, RESPAWN_DELAY_MS);
  }

  private stopWith(event: string, code: number, message: string): void {
    this.options.logger.error({ event }, message);
    this.report(message);
    this.shutdown(event, code);
  }

  private finish(): void {
    this.options.logger.info({ event: 'stopped' }, 'stopped');
    this.exit(this.stopping!.code);
  }
}
