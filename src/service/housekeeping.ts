import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { HousekeepingStore } from '../store/housekeeping-store.js';
import type { AuditStore } from '../store/audit-store.js';
import type { Clock } from './breaker-service.js';

const DAY_MS = 86_400_000;
const DEFAULT_BATCH = 2_000; // most rows one call looks at or deletes
const FIRST_BATCH = 100; // rows in a phase's first call; later calls are sized by the time taken
const BATCH_TARGET_MS = 3; // 3 ms: how long one call may hold the event loop (or Redis)
/**
 * Share of the time the job may take: after a call of `ms` it waits `ms * (1 / DUTY - 1)`, so a
 * request waits behind at most one call, and a long call (a WAL checkpoint runs inside the
 * batch whose commit fills the WAL) is followed by a long pause. At a quarter of the time a
 * backlog drains at some 20,000 rows/s on a 2-CPU machine (a row costs about 10 µs: its rowid
 * range is contiguous, its `transitions_circuit` entry is on a page of its own circuit); see
 * docs/operations.md#retention-and-idle-circuits.
 */
export const DUTY = 0.25;
const DEFAULT_INTERVAL_MS = 60_000; // 60 s between sweeps
const HOUR_MS = 3_600_000;
/** The history's age pass runs at most this often: one statement per circuit, and its bound is in hours. */
const HISTORY_PASS_MS = HOUR_MS; // 1 h

export interface HousekeepingOptions {
  /** `events.retention`: 0 turns a bound off. */
  readonly maxAgeDays: number;
  readonly maxPerCircuit: number;
  /** `limits.idle_circuit_days`; null: idle circuits are kept. */
  readonly idleCircuitDays: number | null;
  /** Circuits the config declares (and proxy nodes): never deleted as idle. */
  readonly isDeclared: (name: string) => boolean;
  /** Most rows one call looks at or deletes (default 1,000); calls are sized to take about 2 ms. */
  readonly batch?: number;
  readonly intervalMs?: number;
  /** Waits between two batches so requests run in between, given the last call's ms (default: 49 times that). */
  readonly yieldBetween?: (lastCallMs: number) => Promise<void>;
  /** The audit log and `audit.retention_days` (issue 30): trimmed by its own age, never by `maxAgeDays`. */
  readonly audit?: { readonly store: Pick<AuditStore, 'trimByAge'>; readonly retentionDays: number };
  /** `history.max_age_hours` (issue 31): entries past it, of circuits the write path no longer trims; absent: none. */
  readonly historyMaxAgeHours?: number;
}

/** What one sweep did. */
export interface SweepReport {
  readonly trimmedByAge: number;
  readonly trimmedPerCircuit: number;
  readonly idleDeleted: number;
  /** Audit entries older than `audit.retention_days` deleted. */
  readonly auditTrimmed: number;
  /** History entries older than `history.max_age_hours` deleted by the hourly pass (issue 31). */
  readonly historyTrimmed: number;
}

/**
 * How far ahead of "no outcome for idle_circuit_days" a closed circuit's `updatedAt` is
 * refreshed by an outcome that changes nothing else (see BreakerService): at most one write per
 * circuit per this long, at most an hour.
 */
export function activityStampMs(idleCircuitDays: number): number {
  return Math.min(3_600_000, (idleCircuitDays * DAY_MS) / 24);
}

/**
 * The housekeeping job: transition-log retention and idle-circuit deletion, run by the one
 * process that holds the lease (main.ts). A sweep is many small batches with a yield to the
 * event loop between them, so no request ever waits behind more than one batch.
 */
export class Housekeeping {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<SweepReport> | null = null;
  private cancelled = false;
  /** Where the per-circuit trim goes on next (the store's meaning: see HousekeepingStore). */
  private trimCursor = 0;
  private readonly batch: number;
  private readonly pause: (lastCallMs: number) => Promise<void>;
  private lastCallMs = 0;
  /** When the history's age pass last ran (it runs at most hourly). */
  private historyPassAt = -Infinity;

  constructor(
    private readonly store: HousekeepingStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: HousekeepingOptions,
  ) {
    this.batch = options.batch ?? DEFAULT_BATCH;
    this.pause = options.yieldBetween ?? pace;
  }

  /** Sweep now and then every interval, until `stop()`. */
  start(): void {
    this.cancelled = false;
    const tick = () => {
      void this.sweep().catch((error: unknown) => {
        this.logger.warn(
          { event: 'housekeeping_failed', err: error },
          'housekeeping sweep failed; trying again at the next interval',
        );
      });
    };
    tick();
    this.timer = setInterval(tick, this.options.intervalMs ?? DEFAULT_INTERVAL_MS);
    this.timer.unref();
  }

  /** Stops after the batch in progress. */
  stop(): void {
    this.cancelled = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One full sweep (a sweep already running is joined, not doubled). */
  sweep(): Promise<SweepReport> {
    this.running ??= this.sweepOnce().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async sweepOnce(): Promise<SweepReport> {
    const now = this.clock();
    const { maxAgeDays, maxPerCircuit, idleCircuitDays } = this.options;
    const before = maxAgeDays > 0 ? now - maxAgeDays * DAY_MS : 0;
    let trimmedByAge = 0;
    let trimmedPerCircuit = 0;
    let idleDeleted = 0;
    if (before > 0) {
      const size = this.sizer();
      for (let full = true; full && this.live(); await this.yieldBetween()) {
        const batch = size.next();
        const n = await size.time(() => this.store.trimByAge(before, batch));
        trimmedByAge += n;
        full = n === batch;
      }
    }
    if (maxPerCircuit > 0 || before > 0) {
      const size = this.sizer();
      for (let done = false; !done && this.live(); await this.yieldBetween()) {
        const batch = size.next();
        const step = await size.time(() => this.store.trimPerCircuit(maxPerCircuit, before, this.trimCursor, batch));
        trimmedPerCircuit += step.deleted;
        this.trimCursor = step.cursor;
        done = step.done;
      }
    }
    if (idleCircuitDays !== null)
      idleDeleted = await this.deleteIdle(now - idleCircuitDays * DAY_MS - activityStampMs(idleCircuitDays), now);
    const auditTrimmed = await this.trimAudit(now);
    const historyTrimmed = await this.trimHistory(now);
    const report = { trimmedByAge, trimmedPerCircuit, idleDeleted, auditTrimmed, historyTrimmed };
    if (trimmedByAge + trimmedPerCircuit + idleDeleted + auditTrimmed + historyTrimmed > 0) {
      this.logger.info(
        {
          event: 'housekeeping',
          trimmed_by_age: trimmedByAge,
          trimmed_per_circuit: trimmedPerCircuit,
          idle_deleted: idleDeleted,
          audit_trimmed: auditTrimmed,
          history_trimmed: historyTrimmed,
        },
        'housekeeping sweep done',
      );
    }
    return report;
  }

  /** The audit entries older than `audit.retention_days`, in batches as the transitions' age trim. */
  private async trimAudit(now: number): Promise<number> {
    const audit = this.options.audit;
    if (audit === undefined) return 0;
    const before = now - audit.retentionDays * DAY_MS;
    let trimmed = 0;
    const size = this.sizer();
    for (let full = true; full && this.live(); await this.yieldBetween()) {
      const batch = size.next();
      const n = await size.time(() => audit.store.trimByAge(before, batch));
      trimmed += n;
      full = n === batch;
    }
    return trimmed;
  }

  /**
   * The history's age bound for circuits that stopped receiving writes (the write path trims
   * the others): one pass over every circuit, at most hourly, in paced batches.
   */
  private async trimHistory(now: number): Promise<number> {
    const maxAgeHours = this.options.historyMaxAgeHours;
    const store = this.store;
    if (maxAgeHours === undefined || store.trimHistory === undefined || now - this.historyPassAt < HISTORY_PASS_MS)
      return 0;
    this.historyPassAt = now;
    const before = now - maxAgeHours * HOUR_MS;
    let trimmed = 0;
    const size = this.sizer();
    for (let cursor = 0, done = false; !done && this.live(); await this.yieldBetween()) {
      const batch = size.next();
      const step = await size.time(() => store.trimHistory!(before, cursor, batch));
      trimmed += step.deleted;
      cursor = step.cursor;
      done = step.done;
    }
    return trimmed;
  }

  private async deleteIdle(before: number, now: number): Promise<number> {
    let deleted = 0;
    const size = this.sizer();
    for (let cursor = 0, done = false; !done && this.live(); await this.yieldBetween()) {
      const batch = size.next();
      const step = await size.time(() => this.store.deleteIdle(before, now, this.options.isDeclared, cursor, batch));
      for (const name of step.deleted) {
        this.logger.info(
          { event: 'circuit_deleted', circuit: name, reason: 'idle', idle_since: new Date(before).toISOString() },
          `circuit ${name} deleted: no outcome for limits.idle_circuit_days`,
        );
      }
      deleted += step.deleted.length;
      cursor = step.cursor;
      done = step.done;
    }
    return deleted;
  }

  /**
   * Batch sizes for one phase: doubled while a call takes under half of BATCH_TARGET_MS, halved
   * while it takes longer (rows cost very different amounts: a circuit's deletion cascades to its
   * transitions, an index of ten million rows is slower than a small one, the machine may be busy).
   */
  private sizer(): { next(): number; time<T>(call: () => T | Promise<T>): Promise<T> } {
    let size = Math.min(FIRST_BATCH, this.batch);
    return {
      next: () => size,
      time: async (call) => {
        const started = performance.now();
        const result = await call();
        const ms = performance.now() - started;
        this.lastCallMs = ms;
        if (ms < BATCH_TARGET_MS / 2) size = Math.min(this.batch, size * 2);
        else if (ms > BATCH_TARGET_MS) size = Math.max(1, Math.floor(size / 2));
        return result;
      },
    };
  }

  private yieldBetween(): Promise<void> {
    return this.pause(this.lastCallMs);
  }

  /** A sweep in progress ends after its current batch once `stop()` was called. */
  private live(): boolean {
    return !this.cancelled;
  }
}

/** The default pause between two calls: DUTY of the time for the job, the rest for requests. */
function pace(lastCallMs: number): Promise<void> {
  const waitMs = lastCallMs * (1 / DUTY - 1);
  return new Promise((resolve) => {
    if (waitMs < 1) setImmediate(resolve);
    else setTimeout(resolve, waitMs).unref();
  });
}
