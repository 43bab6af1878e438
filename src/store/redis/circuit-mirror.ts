import type { Circuit, CircuitState } from '../../domain/circuit.js';
import { toParams } from '../circuit-store.js';
import type { RedisCircuitStore } from './redis-store.js';

/** One circuit as the metrics read it (the same shape as the SQLite snapshot's rows). */
export interface MirroredCircuit {
  readonly id: number;
  readonly name: string;
  /** The state a GET would show now: an open circuit past `open_until` reads half_open. */
  readonly state: CircuitState;
  /** The circuit as SQLite columns (snake_case, JSON text), for code written against rows. */
  readonly row: Readonly<Record<string, unknown>>;
}

const LOAD_PAGE = 500; // circuits read per round trip at (re)load

/**
 * Every circuit of the store, in this host's memory, for the state gauges of `/metrics`
 * (counts per state across all circuits, and the first N by id): loaded at start and after
 * every resubscription, and kept current by the same `changes` messages as the store's cache.
 * Costs one copy of every circuit per host; only built when metrics are on.
 */
export class CircuitMirror {
  private readonly byName = new Map<string, Circuit>();
  private sorted: Circuit[] | null = null;

  constructor(private readonly store: RedisCircuitStore) {
    store.onChange((name, circuit) => this.set(name, circuit));
    store.onResubscribed(() => void this.load());
  }

  /** Read every circuit (in pages); the changes that arrive meanwhile are applied as well. */
  async load(): Promise<void> {
    let after = 0;
    for (;;) {
      const page = await this.store.list({ afterId: after, limit: LOAD_PAGE });
      for (const c of page) if (!this.byName.has(c.name)) this.set(c.name, c);
      if (page.length < LOAD_PAGE) return;
      after = page.at(-1)!.id;
    }
  }

  private set(name: string, circuit: Circuit | null): void {
    if (circuit === null) this.byName.delete(name);
    else this.byName.set(name, circuit);
    this.sorted = null;
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
      .map((c) => ({ id: c.id, name: c.name, state: stateAt(c, now), row: { ...toParams(c), effective_state: stateAt(c, now) } }));
  }

  isAmongFirst(id: number, limit: number): boolean {
    let before = 0;
    for (const c of this.byName.values()) if (c.id < id) before++;
    return before < limit;
  }
}

function stateAt(c: Circuit, now: number): CircuitState {
  return c.state === 'open' && c.openUntil !== null && c.openUntil <= now ? 'half_open' : c.state;
}
