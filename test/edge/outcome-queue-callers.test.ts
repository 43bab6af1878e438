import { describe, expect, it } from 'vitest';
import { OutcomeQueue } from '../../src/client/outcome-queue.js';
import type { OutcomeItem } from '../../src/client/transport.js';

// The edge agent relays many callers' outcomes; circuitlog refuses a batch naming more than 100
// distinct callers (MAX_BATCH_CALLERS), so the agent's queue cuts batches at `maxCallers`.
describe('OutcomeQueue maxCallers', () => {
  function queue(maxCallers: number | undefined) {
    const batches: OutcomeItem[][] = [];
    const q = new OutcomeQueue(
      {
        flushAt: 1_000,
        maxBatch: 1_000,
        maxInFlight: 1,
        flushDelayMs: 1_000,
        capacity: 10_000,
        retryDelayMs: () => 0,
        maxCallers,
      },
      {
        send: async (batch) => {
          batches.push([...batch]);
        },
        onDelivered: () => undefined,
        onUnreachable: () => undefined,
        onRejected: () => undefined,
      },
    );
    return { q, batches };
  }
  const items = (callers: (string | undefined)[]): OutcomeItem[] =>
    callers.map((caller) => ({ circuit: 'c', success: true, caller }));

  it('ends a batch before the first caller past the bound, and sends the rest next', async () => {
    const { q, batches } = queue(2);
    for (const item of items(['a', undefined, 'b', 'a', 'c', 'b', 'd'])) q.push(item, false);
    q.flush();
    await q.drained();
    q.stop();
    expect(batches.map((b) => b.map((i) => i.caller ?? '-').join(''))).toEqual(['a-ba', 'cb', 'd']);
  });

  it('without a bound, sends one batch whatever the callers', async () => {
    const { q, batches } = queue(undefined);
    for (const item of items(['a', 'b', 'c', 'd'])) q.push(item, false);
    q.flush();
    await q.drained();
    q.stop();
    expect(batches).toHaveLength(1);
  });
});
