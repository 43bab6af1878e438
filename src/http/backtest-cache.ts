/**
 * The last backtests' answers, kept so `GET /circuits/{name}/backtest/{id}.svg` draws one
 * without replaying it: bounded by count and by bytes (the answer's JSON text), oldest evicted
 * first. Per process: another worker, or this one after an eviction or a restart, replays what
 * the id names instead (`backtest-picture.ts`).
 */
import type { BacktestResult, GridResult } from '../lab/backtest-types.js';

export type LabResult = BacktestResult | GridResult;

const DEFAULT_MAX_RESULTS = 16;
const DEFAULT_MAX_BYTES = 8 * 1024 * 1024; // 8 MiB of answers' JSON text

interface Kept {
  readonly result: LabResult;
  readonly bytes: number;
}

export class BacktestCache {
  private readonly kept = new Map<string, Kept>();
  private bytes = 0;

  constructor(
    readonly maxResults = DEFAULT_MAX_RESULTS,
    readonly maxBytes = DEFAULT_MAX_BYTES,
  ) {}

  /** Keep a result whose JSON text is `bytes` long; one larger than the whole bound is not kept. */
  put(result: LabResult, bytes: number): void {
    if (bytes > this.maxBytes) return;
    this.kept.set(result.id, { result, bytes });
    this.bytes += bytes;
    for (const [id, entry] of this.kept) {
      if (this.kept.size <= this.maxResults && this.bytes <= this.maxBytes) break;
      this.kept.delete(id); // a Map iterates oldest first
      this.bytes -= entry.bytes;
    }
  }

  /** A kept result of `circuit`, or null (never kept, evicted, or another circuit's). */
  get(id: string, circuit: string): LabResult | null {
    const entry = this.kept.get(id);
    return entry !== undefined && entry.result.circuit === circuit ? entry.result : null;
  }

  /** The results kept and their bytes (tests, docs). */
  size(): { results: number; bytes: number } {
    return { results: this.kept.size, bytes: this.bytes };
  }
}
