import type { Circuit } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import type { CircuitStore } from '../store/circuit-store.js';
import { isPromise } from '../store/maybe-promise.js';

/**
 * `limits.maxCircuits`: a write that would create circuits runs only if they fit. Existing
 * circuits always pass. Circuits this process is creating meanwhile count as stored, so
 * concurrent requests cannot overshoot the limit together (across processes they can, by at
 * most the creations in flight at once).
 */
export class CircuitRoom {
  /** New circuits this process is writing right now, counted before they are stored. */
  private creating = 0;

  constructor(
    private readonly store: CircuitStore,
    private readonly max: number | undefined,
  ) {}

  /**
   * Run `write` if the named circuits fit; else TOO_MANY_CIRCUITS and nothing is written. The
   * problem names the circuits refused (`refused_circuits`): the new names past the room left, in
   * order of first appearance, so a client can drop their items and resend the rest at once.
   */
  async withRoom<T>(names: readonly string[], write: () => Promise<T>): Promise<T> {
    const max = this.max;
    if (max === undefined || this.store.count === undefined) return write();
    const unique = [...new Set(names)];
    const found = unique.map((name) => this.store.find(name));
    const circuits = found.some(isPromise) ? await Promise.all(found) : (found as (Circuit | null)[]);
    const missing = circuits.filter((c) => c === null).length;
    if (missing === 0) return write();
    const stored = await this.store.count();
    if (stored + this.creating + missing > max) {
      const room = Math.max(0, max - stored - this.creating);
      const refused = unique.filter((_, i) => circuits[i] === null).slice(room);
      throw new AppError(
        'TOO_MANY_CIRCUITS',
        `No circuit named '${refused[0]}' exists and the store already holds limits.max_circuits (${max}) circuits; nothing was written. Delete unused circuits or raise the limit.`,
        {
          extensions: { max_circuits: max, refused_circuits: refused },
        },
      );
    }
    this.creating += missing;
    try {
      return await write();
    } finally {
      this.creating -= missing;
    }
  }
}
