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
