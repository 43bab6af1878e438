import type { Logger } from 'pino';
import { matchesFilter, type LoggedTransition, type TransitionFilter } from '../transition-reader.js';
import type { RedisConnection } from './connect.js';
import { isState } from './stored-circuit.js';

/** One transition of the `transitions` stream, with its number (the stream id `<n>-0`): the same shape as SQLite's log. */
export type FedTransition = LoggedTransition;

export interface TransitionFeedOptions {
  readonly prefix?: string;
  /** Newest transitions kept in memory for synchronous reads (replay after a reconnect). */
  readonly keep?: number;
  readonly logger: Logger;
}

const BLOCK_MS = 1_000; // 1 s: XREAD waits at most this long, so stop() is prompt
const DEFAULT_KEEP = 10_000;

type StreamEntry = [id: string, fields: string[]];

/**
 * A host's live copy of the `transitions` stream every host's writes append to: loaded at
 * start with the newest `keep` entries, then tailed with a blocking XREAD on a connection of
 * its own, so a transition made on any host reaches this host's readers within milliseconds.
 * Reads are synchronous, from memory, in id order: the event stream can replay what a
 * reconnecting client missed (`Last-Event-ID`) as far back as the copy reaches.
 */
export class TransitionFeed {
  private readonly key: string;
  private readonly keep: number;
  private entries: FedTransition[] = [];
  private lastStreamId = '0-0';
  private running = false;
  private lastWarningMs = -Infinity;
  private readonly listeners: (() => void)[] = [];

  constructor(
    private readonly reader: RedisConnection,
    private readonly options: TransitionFeedOptions,
  ) {
    this.key = `${options.prefix ?? 'circuitlog:'}transitions`;
    this.keep = options.keep ?? DEFAULT_KEEP;
  }

  /** Load the newest entries, then tail the stream until `stop()`. */
  async start(): Promise<void> {
    const newest = (await this.reader.sendCommand(['XREVRANGE', this.key, '+', '-', 'COUNT', String(this.keep)])) as StreamEntry[];
    this.append(newest.reverse());
    this.running = true;
    void this.tail();
  }

  stop(): void {
    this.running = false;
  }

  private async tail(): Promise<void> {
    let failing = false; // log an outage once, not every retry
    while (this.running) {
      try {
        const reply = (await this.reader.sendCommand(['XREAD', 'BLOCK', String(BLOCK_MS), 'STREAMS', this.key, this.lastStreamId])) as
          | [string, StreamEntry[]][]
          | null;
        if (reply !== null && reply.length > 0) this.append(reply[0]![1]);
        failing = false;
      } catch (error) {
        if (!this.running) return;
        if (!failing) this.options.logger.warn({ event: 'transition_feed_error', err: (error as Error).message }, 'reading the transitions stream failed; retrying');
        failing = true;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  private append(raw: StreamEntry[]): void {
    if (raw.length === 0) return;
    for (const [streamId, fields] of raw) {
      this.lastStreamId = streamId;
      const entry = parseEntry(streamId, fields);
      if (typeof entry === 'string') {
        this.warnMalformed(streamId, entry);
        continue;
      }
      if (entry.id <= this.maxId()) continue; // never out of order: readers page by id
      this.entries.push(entry);
    }
    if (this.entries.length > this.keep * 2) this.entries = this.entries.slice(-this.keep);
    for (const listener of this.listeners) listener();
  }

  /** A malformed entry is skipped; one warning a minute at most (a stream may hold many). */
  private warnMalformed(streamId: string, problem: string): void {
    if (Date.now() - this.lastWarningMs < 60_000) return;
    this.lastWarningMs = Date.now();
    this.options.logger.warn({ event: 'redis_malformed', key: this.key, entry: streamId, problem }, `skipping malformed data in Redis at ${this.key} entry ${streamId}: ${problem}`);
  }

  /** Called after new transitions arrived, from any host (the event stream wakes its readers). */
  onAppend(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** The newest transition number, 0 when none. */
  maxId(): number {
    return this.entries.at(-1)?.id ?? 0;
  }

  /** Up to `limit` transitions with id > `afterId` matching `filter`, oldest first. */
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

/** One stream entry as a transition, or why it cannot be one (the fields circuitlog writes, each checked). */
function parseEntry(streamId: string, fields: string[]): FedTransition | string {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
  const [seq, part] = streamId.split('-');
  const id = Number(seq);
  if (!Number.isSafeInteger(id) || id <= 0 || part !== '0') return `the id ${streamId} is not <n>-0`;
  const [circuit, from, to, reason, at] = ['circuit', 'from', 'to', 'reason', 'at'].map((k) => f.get(k));
  if (circuit === undefined || circuit === '') return 'circuit is missing';
  if (!isState(from) || !isState(to)) return `from/to ${JSON.stringify(from ?? null)}/${JSON.stringify(to ?? null)} are not states`;
  if (reason === undefined || reason === '') return 'reason is missing';
  const when = Number(at);
  if (at === undefined || at.trim() === '' || !Number.isFinite(when)) return `at ${JSON.stringify(at ?? null)} is not a number`;
  return { id, circuit, from, to, reason, at: when };
}
