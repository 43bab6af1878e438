import { parseTransitionDetail } from '../../domain/transition-detail.js';
import type { LoggedTransition } from '../transition-reader.js';
import { isState } from './stored-circuit.js';

/** One entry of a shard's `transitions` stream as XRANGE answers it. */
export type StreamEntry = [id: string, fields: string[]];

/** Hand each shard's entries to `each` merged by their `at` time, each shard kept in order. */
export function mergeByTime(loaded: readonly StreamEntry[][], each: (shard: number, entry: StreamEntry) => void): void {
  const heads = loaded.map(() => 0);
  for (;;) {
    let pick = -1;
    let at = Infinity;
    for (const [shard, entries] of loaded.entries()) {
      const entry = entries[heads[shard]!];
      const when = entry === undefined ? Infinity : atOf(entry);
      if (entry !== undefined && (pick === -1 || when < at)) [pick, at] = [shard, when];
    }
    if (pick === -1) break;
    each(pick, loaded[pick]![heads[pick]!++]!);
  }
}

/** The `at` field of a stream entry, 0 when missing. */
function atOf([, fields]: StreamEntry): number {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'at') return Number(fields[i + 1]) || 0;
  return 0;
}

/** One stream entry as a transition, or why it cannot be one (the fields circuitlog writes, each checked). */
export function parseEntry(
  streamId: string,
  fields: string[],
): (Omit<LoggedTransition, 'id'> & { readonly seq: number }) | string {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
  const [seqText, part] = streamId.split('-');
  const seq = Number(seqText);
  if (!Number.isSafeInteger(seq) || seq <= 0 || part !== '0') return `the id ${streamId} is not <n>-0`;
  const [circuit, from, to, reason, at] = ['circuit', 'from', 'to', 'reason', 'at'].map((k) => f.get(k));
  if (circuit === undefined || circuit === '') return 'circuit is missing';
  if (!isState(from) || !isState(to))
    return `from/to ${JSON.stringify(from ?? null)}/${JSON.stringify(to ?? null)} are not states`;
  if (reason === undefined || reason === '') return 'reason is missing';
  const when = Number(at);
  if (at === undefined || at.trim() === '' || !Number.isFinite(when))
    return `at ${JSON.stringify(at ?? null)} is not a number`;
  const detail = f.get('detail');
  return detail === undefined
    ? { seq, circuit, from, to, reason, at: when }
    : { seq, circuit, from, to, reason, at: when, ...parseTransitionDetail(detail) };
}
