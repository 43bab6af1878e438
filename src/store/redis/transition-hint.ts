import type { Circuit } from '../../domain/types.js';

/** Most circuits remembered as cooling; past it a cool-down's end waits for the feed's 1-s read. */
const MAX_COOLING = 10_000;

/**
 * Whether a change message's write (probably) made a transition, so the host reads its shard's
 * `transitions` stream at once instead of at the feed's next read of every shard (1 s). A state
 * change is one; so is a cool-down begun, extended or ended (issue 29): those events go
 * `closed -> closed` and leave `stateChangedAt` alone, so a circuit that shows a cool-down, or
 * showed one in its previous message, is read too.
 */
export class TransitionHints {
  private readonly cooling = new Set<string>();

  probablyTransitioned(name: string, circuit: Circuit | null): boolean {
    const coolingNow = circuit !== null && circuit.coolDueAt != null;
    const wasCooling = this.cooling.has(name);
    if (coolingNow) {
      if (!wasCooling && this.cooling.size < MAX_COOLING) this.cooling.add(name);
    } else if (wasCooling) this.cooling.delete(name);
    if (coolingNow || wasCooling) return true;
    return circuit !== null && circuit.stateChangedAt != null && circuit.stateChangedAt >= circuit.updatedAt - 2_000;
  }
}
