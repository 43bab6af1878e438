import type { CallerEntry } from '../domain/caller-state.js';

/**
 * What a write of a caller table must do to its rows: the callers gone, the entries changed in
 * place (their recency unchanged) and the entries to put after every other (new callers, and
 * callers seen again, which move to the most recent end), in order.
 */
export interface CallerWritePlan {
  readonly deleted: readonly string[];
  readonly changed: readonly CallerEntry[];
  readonly appended: readonly CallerEntry[];
}

/**
 * The rows to write to turn `before` into `after` (both in recency order). The domain's steps keep
 * the entries they leave as they were (the same tuple), so those are found by reference, and
 * only the others by caller id. An entry that keeps its place relative to the entries before it
 * keeps its `seq`; from the first that does not (a caller seen again moves to the end), every
 * entry gets a new one after all others, which keeps the order.
 */
export function planCallerWrites(before: readonly CallerEntry[], after: readonly CallerEntry[]): CallerWritePlan {
  const at = new Map<CallerEntry, number>();
  for (let i = 0; i < before.length; i++) at.set(before[i]!, i);
  let byCaller: Map<string, number> | undefined; // built at the first entry not found by reference
  const kept = new Uint8Array(before.length);
  const changed: CallerEntry[] = [];
  const appended: CallerEntry[] = [];
  let last = -1;
  for (const entry of after) {
    let i = at.get(entry);
    const same = i !== undefined;
    if (i === undefined) {
      byCaller ??= new Map(before.map((e, j) => [e[0], j]));
      i = byCaller.get(entry[0]);
    }
    if (i !== undefined) kept[i] = 1;
    if (appended.length === 0 && i !== undefined && i > last) {
      last = i;
      if (!same) changed.push(entry);
    } else {
      appended.push(entry);
    }
  }
  const deleted: string[] = [];
  for (let i = 0; i < before.length; i++) if (kept[i] === 0) deleted.push(before[i]![0]);
  return { deleted, changed, appended };
}
