import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  MAX_RESTARTS,
  RESTART_WINDOW_MS,
  RestartBudget,
  runPrimary,
  type WorkerProcess,
} from '../../src/server/cluster.js';
import { FakeClock, silentLogger } from '../helper.js';

/** A worker that does what the test tells it: listen, send a message, die. */
class FakeWorker extends EventEmitter implements WorkerProcess {
  static nextId = 1;
  readonly id = FakeWorker.nextId++;
  readonly signals: string[] = [];
  readonly process = {
    pid: 10_000 + this.id,
    kill: (signal?: NodeJS.Signals) => {
      this.signals.push(signal ?? 'SIGTERM');
      return true;
    },
  };
  listen(): void {
    this.emit('listening', { port: 8080 });
  }
  die(code: number | null, signal: string | null = null): void {
    this.emit('exit', code, signal);
  }
}

function primary(workers = 2) {
  const clock = new FakeClock();
  const forked: FakeWorker[] = [];
  const exits: number[] = [];
  const reports: string[] = [];
  const handle = runPrimary({
    workers,
    port: 8080,
    host: '127.0.0.1',
    shutdownGraceMs: 1_000,
    logger: silentLogger,
    clock: clock.now,
    fork: () => {
      const worker = new FakeWorker();
      forked.push(worker);
      return worker;
    },
    exit: (code) => exits.push(code),
    report: (message) => reports.push(message),
  });
  return { clock, forked, exits, reports, handle };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('the primary of several workers', () => {
  it('stops the whole service with the reason when a worker fails at start', () => {
    const { forked, exits, reports } = primary();
    const [first, second] = forked;
    first!.listen();
    second!.emit('message', {
      type: 'circuitlog:start_failed',
      message: 'PORT: 127.0.0.1:8080 is already in use by another process',
    });
    second!.die(2);
    vi.advanceTimersByTime(1_000); // past the 200 ms respawn delay, before the 2 s kill backstop
    expect(forked).toHaveLength(2); // no replacement for a worker that never started
    expect(reports).toEqual([
      'cannot start: a worker failed at start: PORT: 127.0.0.1:8080 is already in use by another process',
    ]);
    expect(first!.signals).toEqual(['SIGTERM']);
    expect(exits).toEqual([]); // waits for the others to drain
    first!.die(0);
    expect(exits).toEqual([2]);
  });

  it('replaces a worker that crashes after it started', () => {
    const { forked, exits } = primary();
    for (const w of forked) w.listen();
    forked[0]!.die(null, 'SIGKILL');
    vi.advanceTimersByTime(1_000);
    expect(forked).toHaveLength(3);
    expect(exits).toEqual([]);
  });

  it(`stops with a clear message after ${MAX_RESTARTS} restarts within ${RESTART_WINDOW_MS / 1000} s`, () => {
    const { forked, exits, reports, clock } = primary(1);
    for (let i = 0; i < MAX_RESTARTS; i++) {
      forked.at(-1)!.listen();
      forked.at(-1)!.die(1);
      clock.advance(1_000);
      vi.advanceTimersByTime(1_000);
    }
    expect(forked).toHaveLength(MAX_RESTARTS + 1);
    forked.at(-1)!.listen();
    forked.at(-1)!.die(1);
    vi.advanceTimersByTime(1_000);
    expect(forked).toHaveLength(MAX_RESTARTS + 1);
    expect(reports).toEqual([
      `stopping: workers crashed more than ${MAX_RESTARTS} times within 60 s (last: exit code 1)`,
    ]);
    expect(exits).toEqual([1]);
  });

  it('drains every worker on SIGTERM and exits 0', () => {
    const { forked, exits, handle } = primary();
    for (const w of forked) w.listen();
    handle.shutdown('SIGTERM');
    expect(forked.map((w) => w.signals)).toEqual([['SIGTERM'], ['SIGTERM']]);
    for (const w of forked) w.die(0);
    expect(exits).toEqual([0]);
  });
});

describe('the restart budget', () => {
  it('allows a bounded number of restarts per sliding window', () => {
    const budget = new RestartBudget(3, 60_000);
    expect([0, 1_000, 2_000, 3_000].map((t) => budget.allow(t))).toEqual([true, true, true, false]);
    expect(budget.allow(59_999)).toBe(false);
    expect(budget.allow(60_000)).toBe(true); // the first restart left the window
  });
});
