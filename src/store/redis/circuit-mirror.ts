import type { Logger } from 'pino';
import type { Circuit, CircuitState } from '../../domain/circuit.js';
import type { CapCutoff, GaugeCircuit, SnapshotReader } from '../snapshot-reader.js';
import type { RedisCircuitStore } from './redis-store.js';
import { callerEntries, isolatedCallerCount } from '../../domain/caller-state.js';

/** One circuit as the gauges read it, with the whole mirrored circuit. */
export interface MirroredCircuit extends GaugeCircuit {
  readonly circuit: Circuit;
}

const LOAD_PAGE = 500; // circuits read per round trip at (re)load
const RETRY_MS = 1_000; // 1 s between attempts when a reload fails (Redis still away)

/**
 * Every circuit of the store, in this host's memory, for the state gauges of `/metrics`
 * (counts per state across all circuits, and the first N by id): loaded at start and again
 * after every resubscription or store reset (messages may have been missed meanwhile), and
 * kept current by the same `changes` messages as the store's cache. A reload reads into a
 * fresh map and swaps it in when complete, so circuits deleted or changed while this host was
 * cut off do not linger; a failed reload is logged and retried, never left unhandled.
 * Costs one copy of every circuit per host; only built when metrics are on.
 */
export class CircuitMirror implements SnapshotReader {
  private byName = new Map<string, Circuit>();
  private sorted: Circuit[] | null = null;
  /** The cap's cutoff as last computed; kept current as circuits come and go (see `set`). */
  private cut: (CapCutoff & { readonly limit: number; readonly count: number }) | null = null;
  /** The reload in progress: changes arriving meanwhile go into it too, and win over what it lists. */
  private loading: { fresh: Map<string, Circuit>; touched: Set<string> } | null = null;
  private generation = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: RedisCircuitStore,
    private readonly logger?: Logger,
  ) {
    store.onChange((name, circuit) => this.set(name, circuit));
    store.onRebuild(() => this.reload());
  }

  /** Read every circuit (in pages) into a fresh copy, then swap it in. Rejects if Redis fails. */
  async load(): Promise<void> {
    const generation = ++this.generation;
    const loading = { fresh: new Map<string, Circuit>(), touched: new Set<string>() };
    this.loading = loading;
    try {
      let after = 0;
      for (;;) {
        const page = await this.store.list({ afterId: after, limit: LOAD_PAGE });
        if (generation !== this.generation) return; // a newer reload took over
        for (const c of page) if (!loading.touched.has(c.name)) loading.fresh.set(c.name, c);
        if (page.length < LOAD_PAGE) break;
        after = page.at(-1)!.id;
      }
      this.byName = loading.fresh;
      this.sorted = null;
      this.cut = null; // counted again from the fresh copy when next asked
    } finally {
      if (this.loading === loading) this.loading = null;
    }
  }

  /** A reload after a resubscription or reset: failures are logged and retried, never thrown. */
  private reload(): void {
    clearTimeout(this.retry);
    this.load().catch((error: unknown) => {
      this.logger?.warn({ event: 'redis_mirror_reload_failed', err: (error as Error).message }, 'reloading the circuits for the state gauges failed; retrying');
      this.retry = setTimeout(() => this.reload(), RETRY_MS);
      this.retry.unref();
    });
  }

  /** Stop retrying (the store is closing). */
  stop(): void {
    clearTimeout(this.retry);
    this.generation++;
  }

  private set(name: string, circuit: Circuit | null): void {
    const known = this.byName.get(name);
    for (const map of this.loading ? [this.byName, this.loading.fresh] : [this.byName]) {
      if (circuit === null) map.delete(name);
      else map.set(name, circuit);
    }
    this.loading?.touched.add(name);
    this.sorted = null;
    if (known === undefined && circuit !== null) this.added(circuit.id);
    else if (known !== undefined && circuit === null && this.cut !== null && known.id <= this.cut.lastId) this.cut = null;
  }

  /** A new circuit: past a full cap nothing moves; below it, the newest id is the new end. */
  private added(id: number): void {
    const cut = this.cut;
    if (cut === null || (cut.full && id > cut.lastId)) return;
    if (id <= cut.lastId) this.cut = null; // out of id order (a reload): count again
    else this.cut = { limit: cut.limit, lastId: id, count: cut.count + 1, full: cut.count + 1 >= cut.limit };
  }

  private inIdOrder(): Circuit[] {
    this.sorted ??= [...this.byName.values()].sort((a, b) => a.id - b.id);
    return this.sorted;
  }

  stateCounts(now: number): Record<CircuitState, number> {
    const counts: Record<CircuitState, number> = { closed: 0, open: 0, half_open: 0 };
    for (const c of this.byName.values()) counts[stateAt(c, now)]++;
    return counts;
  }

  first(limit: number, now: number): MirroredCircuit[] {
    return this.inIdOrder()
      .slice(0, Math.max(0, limit))
      .map((c) => ({
        id: c.id,
        name: c.name,
        state: stateAt(c, now),
        forcedState: c.forcedState,
        window: c.window,
        windowState: c.windowState,
        throttle: c.throttle,
        throttleState: c.throttleState,
        isolatedCallers: c.quorum == null ? null : isolatedCallerCount(callerEntries(c)),
        circuit: c,
      }));
  }

  /** O(1) while circuits are only added; counted again (one sort) after a delete inside the cap. */
  capCutoff(limit: number): CapCutoff {
    if (limit <= 0) return { lastId: 0, full: true };
    if (this.cut?.limit === limit) return this.cut;
    const ids = Float64Array.from(this.byName.values(), (c) => c.id).sort();
    const full = ids.length >= limit;
    this.cut = { limit, full, lastId: full ? ids[limit - 1]! : (ids.at(-1) ?? 0), count: Math.min(ids.length, limit) };
    return this.cut;
  }
}

function stateAt(c: Circuit, now: number): CircuitState {
  return c.state === 'open' && c.openUntil !== null && c.openUntil <= now ? 'half_open' : c.state;
}
