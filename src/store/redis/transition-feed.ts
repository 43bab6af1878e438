import type { Logger } from 'pino';
import { matchesFilter, type LoggedTransition, type TransitionFilter } from '../transition-reader.js';
import { covers, formatCursor, mergeCursor, parseCursor, zeroCursor, type Cursor } from './event-cursor.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.js';
import { ALL_SHARDS } from './shards.js';
import { mergeByTime, parseEntry, type StreamEntry } from './stream-entry.js';

/**
 * One transition of a shard's stream. `id` is its position in this host's merged copy (the
 * event hub pages by it); `shard` and `seq` (the stream id `<seq>-0`) say where it is in the
 * store; `cursor` is the event id it is sent with: this host's cursor just after it.
 */
export interface FedTransition extends LoggedTransition {
  readonly shard: number;
  readonly seq: number;
  readonly cursor: string;
}

/** Where a resuming stream starts in this host's copy, or why it cannot (`event: reset`). */
export type Resume =
  | { readonly afterId: number; readonly skip: ReadonlySet<number>; readonly base: Cursor }
  | { readonly reset: 'unknown-event-id' | 'expired' };

export interface TransitionFeedOptions {
  /** Newest transitions kept in memory for synchronous reads (replay after a reconnect). */
  readonly keep?: number;
  readonly logger: Logger;
}

const POLL_MS = 1_000; // 1 s: every shard is read at least this often, even if a change message was lost
const PAGE = 1_000; // entries per XRANGE
const DEFAULT_KEEP = 10_000;

/**
 * A host's live copy of the shards' `transitions` streams, merged: loaded at start with each
 * shard's newest entries, then read again whenever a change message names a circuit of the
 * shard (`hint`), and every second anyway. Reads are synchronous, from memory, in this host's
 * order; the event id of each is a cursor over all shards (`event-cursor.ts`), so a client
 * resumes exactly on any host (`resume`), as far back as the copy reaches.
 */
export class TransitionFeed {
  private readonly keep: number;
  private entries: FedTransition[] = [];
  private nextId = 1;
  private readonly seen = zeroCursor();
  /** Per shard: the newest seq no longer in the copy (a resume below it has expired). */
  private readonly floor = zeroCursor();
  private readonly reading = new Map<number, Promise<void>>();
  private readonly again = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private lastWarningMs = -Infinity;
  private lastFailureMs = -Infinity;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly redis: RedisCommands,
    private readonly keys: RedisKeys,
    private readonly options: TransitionFeedOptions,
  ) {
    this.keep = options.keep ?? DEFAULT_KEEP;
  }

  /** Load each shard's newest entries (merged by time, each shard in order), then follow them until `stop()`. */
  async start(): Promise<void> {
    const per = Math.max(1, Math.ceil(this.keep / ALL_SHARDS.length) * 2);
    const loaded = await Promise.all(
      this.keys.shards.map(async (k) =>
        (
          await this.redis.command<StreamEntry[]>(['XREVRANGE', k.transitions, '+', '-', 'COUNT', String(per)], 'read')
        ).reverse(),
      ),
    );
    for (const [shard, entries] of loaded.entries()) {
      const first = entries[0];
      if (first !== undefined) this.floor[shard] = Number(first[0].split('-')[0]) - 1;
    }
    mergeByTime(loaded, (shard, entry) => this.append(shard, [entry], false));
    this.notify();
    this.running = true;
    this.timer = setInterval(() => this.hintAll(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    this.running = false;
    clearInterval(this.timer);
  }

  /** A change on one of the shard's circuits: read what is new in its stream (one read at a time per shard). */
  hint(shard: number): void {
    if (!this.running) return;
    if (this.reading.has(shard)) {
      this.again.add(shard);
      return;
    }
    const read = this.readShard(shard).finally(() => {
      this.reading.delete(shard);
      if (this.again.delete(shard)) this.hint(shard);
    });
    this.reading.set(shard, read);
  }

  hintAll(): void {
    for (const shard of ALL_SHARDS) this.hint(shard);
  }

  /** Read every shard now (a resume that names transitions this host has not read yet). */
  async catchUp(): Promise<void> {
    await Promise.all(ALL_SHARDS.map((shard) => this.readShard(shard).catch(() => {})));
  }

  private async readShard(shard: number): Promise<void> {
    const stream = this.keys.shards[shard]!.transitions;
    try {
      for (;;) {
        const entries = await this.redis.command<StreamEntry[]>(
          ['XRANGE', stream, `(${this.seen[shard]}-0`, '+', 'COUNT', String(PAGE)],
          'read',
        );
        this.append(shard, entries, true);
        if (entries.length < PAGE) return;
      }
    } catch (error) {
      if (Date.now() - this.lastFailureMs < 10_000) return; // an outage: the connection's own handling reports it
      this.lastFailureMs = Date.now();
      this.options.logger.warn(
        { event: 'transition_feed_error', err: (error as Error).message },
        'reading the transitions stream failed; retrying',
      );
    }
  }

  private append(shard: number, raw: StreamEntry[], notify: boolean): void {
    if (raw.length === 0) return;
    for (const [streamId, fields] of raw) {
      const entry = parseEntry(streamId, fields);
      if (typeof entry === 'string') {
        this.warnMalformed(this.keys.shards[shard]!.transitions, streamId, entry);
        const seq = Number(streamId.split('-')[0]);
        if (Number.isSafeInteger(seq) && seq > this.seen[shard]!) this.seen[shard] = seq;
        continue;
      }
      if (entry.seq <= this.seen[shard]!) continue; // never twice, never out of order within a shard
      this.seen[shard] = entry.seq;
      this.entries.push({ ...entry, id: this.nextId++, shard, cursor: formatCursor(this.seen) });
    }
    if (this.entries.length > this.keep * 2) {
      const dropped = this.entries.slice(0, -this.keep);
      this.entries = this.entries.slice(-this.keep);
      for (const t of dropped) this.floor[t.shard] = Math.max(this.floor[t.shard]!, t.seq);
    }
    if (notify) this.notify();
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  /** A malformed entry is skipped; one warning a minute at most (a stream may hold many). */
  private warnMalformed(key: string, streamId: string, problem: string): void {
    if (Date.now() - this.lastWarningMs < 60_000) return;
    this.lastWarningMs = Date.now();
    this.options.logger.warn(
      { event: 'redis_malformed', key, entry: streamId, problem },
      `skipping malformed data in Redis at ${key} entry ${streamId}: ${problem}`,
    );
  }

  /** Called after new transitions arrived, from any host (the event stream wakes its readers). */
  onAppend(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** The newest position in this host's copy, 0 when none. */
  maxId(): number {
    return this.entries.at(-1)?.id ?? 0;
  }

  /** The newest transition number of a shard this host has read (a floor for the counters after a reset). */
  seqOf(shard: number): number {
    return this.seen[shard]!;
  }

  /** This host's cursor now: everything it has read. */
  cursor(): string {
    return formatCursor(this.seen);
  }

  /** The event id of `t` for a stream that resumed from `base` (null: it did not): what that client has seen after `t`. */
  eventId(t: FedTransition, base: Cursor | null): string {
    return base === null ? t.cursor : formatCursor(mergeCursor(base, parseCursor(t.cursor)!));
  }

  /**
   * A `Last-Event-ID` that is a cursor: the position after which everything this host holds is
   * new to that client, but for the few (`skip`) it saw from another host in another order;
   * null when the text is not a cursor. A cursor past what this host has read is read up to
   * first; past the store (another store, or a reset one), or below what is kept: a reset.
   */
  async resume(text: string): Promise<Resume | null> {
    const v = parseCursor(text);
    if (v === null) return null;
    if (v.some((seq, shard) => seq > this.seen[shard]!)) await this.catchUp();
    if (v.some((seq, shard) => seq > this.seen[shard]!)) return { reset: 'unknown-event-id' };
    if (v.some((seq, shard) => seq < this.floor[shard]!)) return { reset: 'expired' };
    let start = this.entries.findIndex((t) => !covers(v, t.shard, t.seq));
    if (start === -1) start = this.entries.length;
    const skip = new Set<number>();
    for (let i = start; i < this.entries.length; i++)
      if (covers(v, this.entries[i]!.shard, this.entries[i]!.seq)) skip.add(this.entries[i]!.id);
    const afterId = start === 0 ? (this.entries[0]?.id ?? this.nextId) - 1 : this.entries[start - 1]!.id;
    return { afterId, skip, base: v };
  }

  /** Up to `limit` transitions with position > `afterId` matching `filter`, oldest first. */
  after(afterId: number, limit: number, filter: TransitionFilter = {}): FedTransition[] {
    const out: FedTransition[] = [];
    let lo = 0;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.entries[mid]!.id <= afterId) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.entries.length && out.length < limit; i++) {
      const t = this.entries[i]!;
      if (matchesFilter(t.circuit, filter)) out.push(t);
    }
    return out;
  }

  /** The `limit` newest transitions, newest first. */
  latest(limit: number): FedTransition[] {
    return this.entries.slice(-limit).reverse();
  }

  /** Each circuit's newest transition in the copy, by name. */
  lastPerCircuit(): Map<string, FedTransition> {
    return new Map(this.entries.map((t) => [t.circuit, t]));
  }
}
