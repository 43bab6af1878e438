/**
 * What crosses to the backtest worker thread and back. A history is packed as one
 * Float64Array of times (transferred, not copied) and its texts joined by newlines in a few
 * strings (one structured-clone copy each): cloning a million small objects would hold the
 * event loop far longer than this.
 */
import type { FieldError } from '../domain/errors.js';
import type { StoredEntry } from '../domain/history.js';
import type { GridShare } from './backtest.js';
import type { BacktestInput, BacktestResult } from './backtest-types.js';

/** A history as it crosses to the thread. */
export interface PackedEntries {
  readonly times: Float64Array;
  /** The texts, newline-joined, in chunks of `PACK_CHUNK` entries. */
  readonly texts: readonly string[];
}

/** Entries packed per chunk (a chunk is one string). */
export const PACK_CHUNK = 65_536;
/** Stands for a stored text that holds a newline (never one `encodeEntry` wrote): decoded as nothing, so skipped. */
const UNREADABLE = '\u0000';

export interface ThreadJob {
  readonly id: string;
  readonly input: Omit<BacktestInput, 'entries'>;
  readonly packed: PackedEntries;
  /** A grid's share: the candidates `[start, end)` of `input.proposed` to evaluate; null: a backtest. */
  readonly share: { readonly start: number; readonly end: number } | null;
}

export type ThreadAnswer =
  | { readonly ok: true; readonly result: BacktestResult | GridShare }
  | {
      readonly ok: false;
      readonly code: string;
      readonly message: string;
      readonly fields: readonly FieldError[] | null;
    };

/** Packs entries `[start, end)` into `times` and answers their newline-joined texts. */
export function packChunk(entries: readonly StoredEntry[], times: Float64Array, start: number, end: number): string {
  const texts: string[] = new Array(end - start);
  for (let i = start; i < end; i++) {
    const e = entries[i]!;
    times[i] = e.t;
    texts[i - start] = e.text.includes('\n') ? UNREADABLE : e.text;
  }
  return texts.join('\n');
}

/** The entries a packed history holds. */
export function unpackEntries(packed: PackedEntries): StoredEntry[] {
  const out: StoredEntry[] = new Array(packed.times.length);
  let i = 0;
  for (const chunk of packed.texts) {
    for (const text of chunk.split('\n')) {
      out[i] = { t: packed.times[i]!, text };
      i++;
    }
  }
  return out;
}

/** Pack a history for the thread, yielding to the event loop between chunks. */
export async function pack(entries: BacktestInput['entries']): Promise<PackedEntries> {
  const times = new Float64Array(entries.length);
  const texts: string[] = [];
  for (let start = 0; start < entries.length; start += PACK_CHUNK) {
    if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    texts.push(packChunk(entries, times, start, Math.min(entries.length, start + PACK_CHUNK)));
  }
  return { times, texts };
}

/** Candidates `[start, end)` of each of `threads` shares of `n` candidates: contiguous, sizes apart by at most 1. */
export function gridShares(n: number, threads: number): { start: number; end: number }[] {
  const k = Math.max(1, Math.min(threads, n));
  return Array.from({ length: k }, (_, i) => ({
    start: Math.floor((i * n) / k),
    end: Math.floor(((i + 1) * n) / k),
  }));
}
