import type { Circuit, Step } from '../domain/circuit.js';
import type { BatchItem } from '../store/circuit-store.js';

/**
 * Decides the step an outcome stores, knowing its peers' circuits as the same write reads
 * them (null: not stored). Pure, like every step: it may run more than once.
 */
export type OutcomeGuard = (step: Step, before: Circuit | null, peers: readonly (Circuit | null)[]) => Step;

/**
 * The batch recording one outcome under a guard, in one atomic write (`applyBatch`):
 * 1. each peer is read; its step writes nothing;
 * 2. the outcome's step runs on the circuit and `guard` may change it, seeing the peers;
 * 3. when the outcome changes the circuit's state (the only steps a guard over its peers
 *    decides), each peer is written back unchanged. A store that checks only the versions
 *    of what it writes (Redis' compare-and-set) then refuses the write if a peer changed
 *    meanwhile, and runs the steps again on the peers as they are now; SQLite holds its
 *    write lock across the whole batch anyway.
 * `index` is the outcome's item, whose result is the one to answer.
 */
export function guardedItems(
  name: string,
  step: (current: Circuit | null) => Step,
  peers: readonly string[],
  guard: OutcomeGuard,
): { items: BatchItem[]; index: number } {
  const seen: (Circuit | null)[] = peers.map(() => null);
  let decided = false;
  const read = peers.map(
    (peer, i): BatchItem => ({
      name: peer,
      step: (c) => {
        seen[i] = c;
        return null;
      },
    }),
  );
  const outcome: BatchItem = {
    name,
    step: (c) => {
      const unguarded = step(c);
      decided = unguarded.transitions.length > 0;
      return guard(unguarded, c, seen);
    },
  };
  const confirm = peers.map(
    (peer): BatchItem => ({
      name: peer,
      step: (c) => (decided && c !== null ? { circuit: { ...c }, transitions: [] } : null),
    }),
  );
  return { items: [...read, outcome, ...confirm], index: read.length };
}
