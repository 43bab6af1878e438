export interface BatchWindows {
  readonly batches: number;
  /** Batches per 10 ms over the whole `ms`. */
  readonly avgPer10ms: number;
  /** The most batches in any 10 ms (a window starting at any batch). */
  readonly maxSliding: number;
  /** The most batches in one of the fixed 10 ms slots of the clock ([0, 10), [10, 20), … ms). */
  readonly maxFixed: number;
}

export function batchWindows(times: readonly number[], ms: number): BatchWindows;
