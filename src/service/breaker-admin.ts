import {
  configure,
  newCircuit,
  refresh,
  reset,
  type Circuit,
  type CircuitState,
  type Transition,
} from '../domain/circuit.js';
import type { CircuitPolicy } from '../domain/policy.js';
import { BreakerCore } from './breaker-core.js';

/**
 * The breaker's reads and admin use cases (get, list, reset, configure, delete, due
 * transitions); `BreakerService` adds admission and outcomes on top.
 */
export class BreakerAdmin extends BreakerCore {
  /** The circuit after the lazy open -> half-open transition, or null if unknown. */
  async get(name: string): Promise<Circuit | null> {
    const now = this.clock();
    return (await this.run(name, (c) => (c === null ? null : refresh(c, now))))?.circuit ?? null;
  }

  /**
   * The circuit as the store holds it in memory right now, without a write or a round trip
   * (null: not stored; undefined: not in memory, ask `get`). Not refreshed: an open circuit
   * past its open time is still `open` here (the proxy's panic reading judges that itself).
   */
  peekCircuit(name: string): Circuit | null | undefined {
    return this.store.peek(name);
  }

  /** Close the circuit; null if unknown. */
  async reset(name: string): Promise<Circuit | null> {
    const now = this.clock();
    return (await this.run(name, (c) => (c === null ? null : reset(c, now))))?.circuit ?? null;
  }

  /**
   * Set a circuit's policy, creating it with that policy when missing. `policyFor` sees
   * the stored circuit (inside the write transaction) and may throw to change nothing.
   */
  async configure(
    name: string,
    policyFor: (current: Circuit | null) => CircuitPolicy,
  ): Promise<{ circuit: Circuit; created: boolean }> {
    const now = this.clock();
    let created = false;
    const step = await this.run(name, (current) => {
      const policy = policyFor(current);
      created = current === null;
      // A new circuit starts unforced, so that a force it is created with is an event too.
      if (current === null) return configure(newCircuit(name, { ...policy, forcedState: null }, now), policy, now);
      const refreshed = refresh(current, now);
      const next = configure(refreshed.circuit, policy, now);
      return { circuit: next.circuit, transitions: [...refreshed.transitions, ...next.transitions] };
    });
    return { circuit: step!.circuit, created };
  }

  /**
   * Write the open -> half-open transitions that are due (up to `limit`), each stamped at
   * its `openUntil`, so stream listeners and the timeline see them without traffic. Run by
   * one process (see `DueTransitions`); answers how many circuits it changed.
   */
  async publishDue(limit = 500): Promise<number> {
    const names = await this.store.dueOpen(this.clock(), limit);
    let changed = 0;
    for (const name of names) {
      const now = this.clock();
      const step = await this.run(name, (c) => (c === null ? null : refresh(c, now)));
      if (step !== null && step.transitions.length > 0) changed++;
    }
    return changed;
  }

  /** Remove the circuit and its events; false if unknown. */
  async delete(name: string): Promise<boolean> {
    return this.store.delete(name);
  }

  /**
   * A page of circuits as a read of each would show them. Only the first `pageSize` (the
   * page; a row past it only tells whether more exist) get their lazy transition written;
   * the state filter judges open circuits by `now`.
   */
  async list(
    query: { state?: CircuitState; afterId?: number; limit: number },
    pageSize = query.limit,
  ): Promise<Circuit[]> {
    const now = this.clock();
    const rows = await this.store.list({ ...query, now });
    return Promise.all(
      rows.map((c, i) =>
        i >= pageSize || refresh(c, now).circuit === c ? c : this.get(c.name).then((got) => got ?? c),
      ),
    );
  }

  async events(name: string, limit: number): Promise<Transition[] | null> {
    const circuit = await this.store.find(name);
    return circuit === null ? null : this.store.events(circuit.id, limit);
  }
}
