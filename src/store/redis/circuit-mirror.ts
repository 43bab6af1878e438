import type { Logger } from 'pino';
import type { Circuit, CircuitState } from '../../domain/circuit.js';
import type { ListQuery } from '../circuit-store.js';
import type { CapCutoff, GaugeCircuit, SnapshotReader } from '../snapshot-reader.js';
import { callerEntries, isolatedCallerCount } from '../../domain/caller-state.js';
import { MirrorState, stateAt } from './mirror-state.js';

/** One circuit as the gauges read it, with the whole mirrored circuit. */
export interface MirroredCircuit extends GaugeCircuit {
  readonly circuit: Circuit;
}

/** What the mirror needs of the Redis store: its listing and its change feed. */
export interface MirrorSource {
  list(query: ListQuery): Promise<Circuit[]>;
  /** One circuit with its caller table as Redis holds it now (after a change whose table could not be followed). */
  fetch(name: string): Promise<Circuit | null>;
  onChange(listener: (name: string, circuit: Circuit | null, callersKnown: boolean) => void): void;
  onRebuild(listener: () => void): void;
}

const LOAD_PAGE = 1_000; // circuits read per listing call at (re)load
const RETRY_MS = 1_000; // 1 s between attempts when a load fails (Redis still away)
export const DEFAULT_HEAD = 10_000; // metrics.max_circuits' default

/** A load under way: pages in id order, and the changes to circuits it has not reached yet. */
interface Loading {
  readonly state: MirrorState;
  /** Changes to circuits past `through`: they win over what the pages list. */
  readonly pending: Map<string, Circuit | null>;
  through: number;
}

/**
 * The circuits of the store as the state gauges of `/metrics` read them (counts per state
 * across all circuits, and the first `headLimit` by id whole; see `mirror-state.ts`), kept
 * current by the same `changes` messages as the store's cache.
 *
 * Start-up does not wait for it: `start()` reads the circuits in the background, a page at a
 * time between requests (about 1 s per 12,000 circuits on a loaded 2-core machine; a million
 * take over a minute). Until that first load is complete `stateCounts` answers null (the
 * per-state counts are left out of `/metrics`), and `first` answers the circuits read so far,
 * which are exactly the first ones by id. Nothing else depends on it: `/allowed` and the
 * writes read the store and its cache. After a resubscription or a store reset (messages may
 * have been missed) it reads everything again into a fresh copy, serving the old one
 * meanwhile, and swaps; a failed load is logged and retried, never left unhandled.
 */
export class CircuitMirror implements SnapshotReader {
  private state: MirrorState;
  /** A load has completed: the counts are whole. */
  private complete = false;
  private loading: Loading | null = null;
  private generation = 0;
  private retry: NodeJS.Timeout | undefined;
  /** A read of the head under way, with the changes that arrive meanwhile (they win). */
  private headRead: Map<string, Circuit | null> | null = null;
  private headReadAgain = false;
  /** The cap's cutoff as last computed; kept current as circuits are added (see `change`). */
  private cut: (CapCutoff & { readonly limit: number; readonly count: number }) | null = null;
  private firstLoad: Promise<void> | null = null;
  /**
   * Circuits read again because a change came without their caller table (`refresh`): `wait` for
   * the read, `again` (another such change came meanwhile: read once more), `drop` (a whole change came).
   */
  private readonly refreshing = new Map<string, 'wait' | 'again' | 'drop'>();

  constructor(
    private readonly store: MirrorSource,
    private readonly logger?: Logger,
    private readonly headLimit = DEFAULT_HEAD,
  ) {
    this.state = new MirrorState(headLimit);
    store.onChange((name, circuit, callersKnown) => {
      this.change(name, circuit);
      if (callersKnown) {
        if (this.refreshing.has(name)) this.refreshing.set(name, 'drop'); // newer than the read under way, and whole
      } else if (circuit?.quorum != null && (this.state.inHead(name) || this.loading !== null)) {
        this.refresh(name);
      }
    });
    store.onRebuild(() => this.reload());
  }

  /** Read every circuit in the background; resolves when the first load is complete (nobody needs to wait). */
  start(): Promise<void> {
    this.firstLoad ??= new Promise((resolve) => {
      const attempt = () => {
        this.load().then(resolve, (error: unknown) => {
          this.logger?.warn(
            { event: 'redis_mirror_load_failed', err: (error as Error).message },
            'reading the circuits for the state gauges failed; retrying',
          );
          this.retry = setTimeout(attempt, RETRY_MS);
          this.retry.unref();
        });
      };
      attempt();
    });
    return this.firstLoad;
  }

  /** Whether the per-state counts are whole (a load has completed). */
  get loaded(): boolean {
    return this.complete;
  }

  /** Read every circuit (in pages) into a fresh copy, then swap it in. Rejects if Redis fails. */
  async load(): Promise<void> {
    const generation = ++this.generation;
    const loading: Loading = { state: new MirrorState(this.headLimit), pending: new Map(), through: 0 };
    this.loading = loading;
    if (!this.complete) this.serve(loading.state); // nothing whole to serve yet: serve the pages as they come
    try {
      for (;;) {
        const page = await this.store.list({ afterId: loading.through, limit: LOAD_PAGE });
        if (generation !== this.generation) return; // a newer load took over
        for (const c of page) {
          const latest = loading.pending.has(c.name) ? loading.pending.get(c.name)! : c;
          loading.pending.delete(c.name);
          if (latest !== null) loading.state.put(latest);
          loading.through = Math.max(loading.through, c.id);
        }
        if (page.length < LOAD_PAGE) break;
      }
      const later = [...loading.pending.values()].filter((c) => c !== null).sort((a, b) => a.id - b.id);
      for (const c of later) loading.state.put(c);
      this.serve(loading.state);
      this.complete = true;
      if (loading.state.short) this.readHead();
    } finally {
      if (this.loading === loading) this.loading = null;
    }
  }

  private serve(state: MirrorState): void {
    this.state = state;
    this.cut = null; // counted again from the new copy when next asked
  }

  /** A reload after a resubscription or reset: failures are logged and retried, never thrown. */
  private reload(): void {
    clearTimeout(this.retry);
    this.load().catch((error: unknown) => {
      this.logger?.warn(
        { event: 'redis_mirror_reload_failed', err: (error as Error).message },
        'reloading the circuits for the state gauges failed; retrying',
      );
      this.retry = setTimeout(() => this.reload(), RETRY_MS);
      this.retry.unref();
    });
  }

  /**
   * A circuit of the head (whose isolated callers a gauge shows) changed by a caller delta this
   * host could not apply: read it whole, once more if another such change came meanwhile (that
   * read may predate it), not at all if a whole change came (it is newer than the read).
   */
  private refresh(name: string): void {
    if (this.refreshing.has(name)) {
      this.refreshing.set(name, 'again');
      return;
    }
    this.refreshing.set(name, 'wait');
    this.store.fetch(name).then(
      (circuit) => {
        const now = this.refreshing.get(name);
        this.refreshing.delete(name);
        if (now === 'again') this.refresh(name);
        else if (now === 'wait') this.change(name, circuit);
      },
      (error: unknown) => {
        this.refreshing.delete(name);
        this.logger?.warn(
          { event: 'redis_mirror_refresh_failed', err: (error as Error).message },
          'reading a circuit for the state gauges failed',
        );
      },
    );
  }

  /** Stop retrying (the store is closing). */
  stop(): void {
    clearTimeout(this.retry);
    this.generation++;
  }

  private change(name: string, circuit: Circuit | null): void {
    const loading = this.loading;
    if (loading !== null) {
      if (loading.state.has(name) || (circuit !== null && circuit.id <= loading.through))
        apply(loading.state, name, circuit);
      else loading.pending.set(name, circuit);
    }
    if (loading?.state !== this.state) this.applyServed(name, circuit);
    this.headRead?.set(name, circuit);
  }

  private applyServed(name: string, circuit: Circuit | null): void {
    const state = this.state;
    const wasHead = circuit === null ? state.remove(name) : false;
    const newLast = circuit !== null && state.put(circuit);
    if (newLast) this.added(circuit.id);
    else if (wasHead || (circuit !== null && state.short)) this.cut = null;
    if (state.short && this.complete) this.readHead();
  }

  /** A new last circuit of the head: below a full cap the newest id is the new end. */
  private added(id: number): void {
    const cut = this.cut;
    if (cut === null || cut.full) return;
    this.cut = { limit: cut.limit, lastId: id, count: cut.count + 1, full: cut.count + 1 >= cut.limit };
  }

  /** Read the first circuits again (a circuit inside the head was deleted, or one arrived out of order). */
  private readHead(): void {
    if (this.headRead !== null) {
      this.headReadAgain = true;
      return;
    }
    const touched = new Map<string, Circuit | null>();
    this.headRead = touched;
    const state = this.state;
    this.store
      .list({ afterId: 0, limit: this.headLimit })
      .then(
        (circuits) => {
          if (this.state !== state) return;
          const latest = circuits
            .map((c) => (touched.has(c.name) ? touched.get(c.name)! : c))
            .filter((c) => c !== null);
          state.replaceHead(latest);
          this.cut = null;
          if (state.short && touched.size > 0) this.headReadAgain = true; // changed meanwhile: once more
        },
        (error: unknown) => {
          this.logger?.warn(
            { event: 'redis_mirror_head_failed', err: (error as Error).message },
            'reading the first circuits for the state gauges failed',
          );
        },
      )
      .finally(() => {
        this.headRead = null;
        if (this.headReadAgain) {
          this.headReadAgain = false;
          this.readHead();
        }
      });
  }

  /** Counts per state, or null until the first load is complete (the counts would be short). */
  stateCounts(now: number): Record<CircuitState, number> | null {
    return this.complete ? this.state.stateCounts(now) : null;
  }

  first(limit: number, now: number): MirroredCircuit[] {
    return this.state.first(limit).map((c) => ({
      id: c.id,
      name: c.name,
      state: stateAt(c, now),
      forcedState: c.forcedState,
      window: c.window,
      windowState: c.windowState,
      throttle: c.throttle,
      throttleState: c.throttleState,
      isolatedCallers: c.quorum == null ? null : isolatedCallerCount(callerEntries(c)),
      ramp: c.ramp ?? null,
      rampUntil: c.rampUntil ?? null,
      circuit: c,
    }));
  }

  /** O(1) while circuits are only added; walks the head (at most `headLimit`) after a delete inside it. */
  capCutoff(limit: number): CapCutoff {
    if (limit <= 0) return { lastId: 0, full: true };
    if (this.cut?.limit === limit) return this.cut;
    const head = this.state.first(limit);
    const full = this.state.size >= limit;
    const cut = { limit, full, lastId: head.at(-1)?.id ?? 0, count: Math.min(this.state.size, limit) };
    if (this.complete || full) this.cut = cut; // while the first load runs, counted again each time
    return cut;
  }
}

function apply(state: MirrorState, name: string, circuit: Circuit | null): void {
  if (circuit === null) state.remove(name);
  else state.put(circuit);
}
