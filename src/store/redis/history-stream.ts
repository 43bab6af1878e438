import type { Circuit, Step } from '../../domain/circuit.js';
import { stepEntries as domainStepEntries, type HistoryHook, type StoredEntry } from '../../domain/history.js';
import type { HistoryQuery } from '../circuit-store.js';
import type { RedisCommands } from './redis-commands.js';
import type { HistoryOptions } from './redis-store-options.js';

/** Config `history.max_outcomes`' default: entries kept per circuit. */
export const DEFAULT_MAX_OUTCOMES = 200_000;
/** Config `history.max_age_hours`' default: 168 h (a week). */
export const DEFAULT_MAX_AGE_HOURS = 168;

/** The history settings in force, defaults filled in. */
export interface HistorySettings {
  readonly enabled: boolean;
  readonly maxOutcomes: number;
  readonly maxAgeMs: number;
}

/**
 * The settings of `options` (config `history`), defaults filled in, made whole: the script hands
 * them to `XTRIM`, which takes whole numbers only (at least one entry; 0 h: no age bound).
 */
export function historySettings(options: HistoryOptions | undefined): HistorySettings {
  const maxOutcomes = Math.floor(options?.maxOutcomes ?? DEFAULT_MAX_OUTCOMES);
  const maxAgeMs = Math.floor((options?.maxAgeHours ?? DEFAULT_MAX_AGE_HOURS) * 3_600_000); // h -> ms
  return {
    enabled: options?.enabled ?? true,
    maxOutcomes: Number.isFinite(maxOutcomes) ? Math.max(1, maxOutcomes) : DEFAULT_MAX_OUTCOMES,
    maxAgeMs: Number.isFinite(maxAgeMs) ? Math.max(0, maxAgeMs) : 0,
  };
}

/** The circuit's own opt-out: its policy's `history` (issue 31), read defensively (absent: on). */
export function keepsHistory(circuit: Circuit): boolean {
  return (circuit as { history?: boolean }).history !== false;
}

/**
 * The entries one step leaves in its circuit's history (design: the hook's entry, then one per
 * transition, `t` the hook entry's or else each transition's own `at`), or none when the history
 * is off (config, or the circuit's policy after the step). Called on the step's final result
 * only: an attempt that loses its compare-and-set computes them again on the state it lost to.
 */
export function stepEntries(
  settings: HistorySettings,
  hook: HistoryHook | undefined,
  before: Circuit | null,
  result: Step,
): StoredEntry[] {
  if (!settings.enabled || !keepsHistory(result.circuit)) return [];
  const entry = hook?.(before, result) ?? null;
  return domainStepEntries(entry, result.transitions);
}

/** The CAS script's history argument (`scripts.ts` APPEND_HISTORY): `<t>\n<text>\n` per entry; `''` for none. */
export function historyArg(entries: readonly StoredEntry[]): string {
  let arg = '';
  for (const e of entries) arg += `${Math.max(0, Math.floor(e.t))}\n${e.text}\n`; // JSON text: no raw newline
  return arg;
}

type StreamEntry = [id: string, fields: unknown[]];

/**
 * A circuit's history entries by stream id, whose milliseconds are the entry's `t` (or, for an
 * entry whose `t` was behind the stream's newest, that newest id's: ids only grow), oldest
 * first, at most `query.limit`. What Redis answers is untrusted: an entry without a whole `t`
 * or a text is skipped (the lab's `decodeEntry` judges the text).
 */
export async function readHistory(redis: RedisCommands, key: string, query: HistoryQuery): Promise<StoredEntry[]> {
  const limit = Math.floor(query.limit);
  const from = query.from === undefined ? 0 : Math.max(0, Math.ceil(query.from));
  const to = query.to === undefined ? undefined : Math.floor(query.to);
  if (!(limit > 0) || (to !== undefined && to <= from)) return [];
  const start = from === 0 ? '-' : `${from}-0`;
  const end = to === undefined ? '+' : `(${to}-0`; // exclusive: `to` is not in the range
  const flat = await redis.command<StreamEntry[]>(['XRANGE', key, start, end, 'COUNT', String(limit)], 'read');
  const out: StoredEntry[] = [];
  for (const entry of Array.isArray(flat) ? flat : []) {
    const fields = Array.isArray(entry?.[1]) ? entry[1] : [];
    let t: number | undefined;
    let text: string | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] === 't') t = Number(fields[i + 1]);
      else if (fields[i] === 'e' && typeof fields[i + 1] === 'string') text = fields[i + 1] as string;
    }
    if (t !== undefined && Number.isSafeInteger(t) && text !== undefined) out.push({ t, text });
  }
  return out;
}
