import type { Circuit, CircuitState } from '../../domain/circuit.js';

const CODES: Record<CircuitState, number> = { closed: 0, open: 1, half_open: 2 };

/** The state a GET would show at `now`: an open circuit past `openUntil` reads half_open. */
export function stateAt(c: Circuit, now: number): CircuitState {
  return c.state === 'open' && c.openUntil !== null && c.openUntil <= now ? 'half_open' : c.state;
}

/**
 * What the state gauges need of every circuit, and no more: one small number per circuit (its
 * stored state), the retry time of each open circuit (an open circuit past it counts as
 * half-open), and the first `headLimit` circuits by id whole (the labelled gauges). About 100
 * bytes per circuit instead of a whole copy (about 1.2 KB).
 *
 * The head is a Map in id order: circuits enter it in id order (a load reads in id order, a
 * new circuit has the newest id) while nothing lies past it. A circuit leaving it while others
 * lie past it leaves it short; `short` says so and the mirror reads the head again.
 */
export class MirrorState {
  private readonly codes = new Map<string, number>();
  private readonly counts = [0, 0, 0];
  /** Open circuits with a retry time: name -> `openUntil`. */
  private readonly opens = new Map<string, number>();
  private readonly head = new Map<string, Circuit>();
  private headLastId = 0;
  /** The head lost a circuit while others lie past it (or one arrived out of id order). */
  short = false;

  constructor(readonly headLimit: number) {}

  get size(): number {
    return this.codes.size;
  }

  has(name: string): boolean {
    return this.codes.has(name);
  }

  /** Whether the circuit is one of the head's (held whole). */
  inHead(name: string): boolean {
    return this.head.has(name);
  }

  /** A circuit read or changed. Returns true when it entered the head as its new last circuit. */
  put(c: Circuit): boolean {
    const old = this.codes.get(c.name);
    if (old !== undefined) this.counts[old]!--;
    const code = CODES[c.state];
    this.counts[code]!++;
    this.codes.set(c.name, code);
    if (c.state === 'open' && c.openUntil !== null) this.opens.set(c.name, c.openUntil);
    else this.opens.delete(c.name);
    if (this.head.has(c.name)) {
      this.head.set(c.name, c); // keeps its place
      return false;
    }
    if (old !== undefined) return false;
    const nothingPast = this.head.size === this.codes.size - 1;
    if (nothingPast && this.head.size < this.headLimit && c.id > this.headLastId) {
      this.head.set(c.name, c);
      this.headLastId = c.id;
      return true;
    }
    if (this.head.size < this.headLimit) this.short = true; // out of id order: read the head again
    return false;
  }

  /** A circuit deleted. Returns true when it was in the head. */
  remove(name: string): boolean {
    const old = this.codes.get(name);
    if (old === undefined) return false;
    this.counts[old]!--;
    this.codes.delete(name);
    this.opens.delete(name);
    if (!this.head.delete(name)) return false;
    if (this.codes.size > this.head.size) this.short = true;
    return true;
  }

  /** The head as read again (`circuits` in id order, at most `headLimit`); names no longer known are left out. */
  replaceHead(circuits: readonly Circuit[]): void {
    this.head.clear();
    this.headLastId = 0;
    for (const c of circuits.slice(0, this.headLimit)) {
      if (!this.codes.has(c.name)) continue;
      this.head.set(c.name, c);
      this.headLastId = c.id;
    }
    this.short = this.head.size < this.headLimit && this.codes.size > this.head.size;
  }

  /** Counts per state at `now`: O(open circuits), not O(all). */
  stateCounts(now: number): Record<CircuitState, number> {
    let due = 0;
    for (const until of this.opens.values()) if (until <= now) due++;
    return { closed: this.counts[0]!, open: this.counts[1]! - due, half_open: this.counts[2]! + due };
  }

  /** The first `limit` circuits by id (at most the head). */
  first(limit: number): Circuit[] {
    const out: Circuit[] = [];
    if (limit <= 0) return out;
    for (const c of this.head.values()) {
      out.push(c);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** The id of the head's last circuit, and how many circuits there are in all. */
  get lastHeadId(): number {
    return this.headLastId;
  }
}
