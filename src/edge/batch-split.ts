/**
 * One refused item must not lose its batch (issue 32, many agents, one truth). The server takes
 * a batch whole or not at all, and the agent's batches mix many clients' outcomes: a refusal
 * for one item's sake (an `at` over 60 s ahead of the server's clock, a circuit past the
 * credential's `max_new_circuits`, which the agent cannot know) is answered here by delivering
 * the batch's halves in order instead, down to the items refused alone. Numbered outcomes make
 * this safe: whatever of the batch the server applied before an outage is not applied twice
 * when the queue sends it again (domain/outcome-source.ts).
 */
import { TransportError, type OutcomeItem } from '../client/transport.js';

/** Refusals that name one item's fault, not the batch's (a bad token or scope refuses every half too). */
const ITEM_REFUSALS: ReadonlySet<string> = new Set([
  'VALIDATION_FAILED',
  'CIRCUIT_NOT_PERMITTED',
  'CALLER_NOT_PERMITTED',
]);

function itemRefusal(error: unknown): error is TransportError {
  if (!(error instanceof TransportError) || error.kind !== 'rejected') return false;
  const code = (error.problem as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && ITEM_REFUSALS.has(code);
}

/**
 * `post(batch)`; when it is refused for an item's sake and `split()` allows (numbered outcomes),
 * the halves in order, recursively. Resolves when every item was applied or refused alone
 * (`refused` is told how many, once, with the first such refusal); rejects as `post` does
 * otherwise (the queue keeps the whole batch and sends it again).
 */
export async function deliverSplitting(
  batch: readonly OutcomeItem[],
  post: (items: readonly OutcomeItem[]) => Promise<void>,
  split: () => boolean,
  refused: (count: number, first: TransportError) => void,
): Promise<void> {
  let count = 0;
  let first: TransportError | null = null;
  const deliver = async (items: readonly OutcomeItem[], top: boolean): Promise<void> => {
    try {
      await post(items);
    } catch (error) {
      if (!itemRefusal(error) || !split()) throw error;
      if (items.length === 1) {
        if (top) throw error; // the queue counts a batch of one itself
        count++;
        first ??= error;
        return;
      }
      const half = Math.ceil(items.length / 2);
      await deliver(items.slice(0, half), false);
      await deliver(items.slice(half), false);
    }
  };
  await deliver(batch, true);
  if (first !== null) refused(count, first);
}
