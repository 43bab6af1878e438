import { describe, expect, it } from 'vitest';
import { OutcomeQueue } from '../../src/client/outcome-queue.js';
import { TransportError, type OutcomeItem } from '../../src/client/transport.js';

// The queue's bound holds also for a batch that comes back undelivered (circuitlog went away
// while it was on the wire): back in the queue it counts against `capacity`, the oldest dropped.
describe('OutcomeQueue capacity after a failed batch', () => {
  it('never holds more than capacity once an undelivered batch is back', async () => {
    let fail: (error: Error) => void = () => undefined;
    const q = new OutcomeQueue(
      { flushAt: 5, maxBatch: 5, maxInFlight: 1, flushDelayMs: 1_000, capacity: 5, retryDelayMs: () => 60_000 },
      {
        send: () => new Promise<void>((_resolve, reject) => (fail = reject)),
        onDelivered: () => undefined,
        onUnreachable: () => undefined,
        onRejected: () => undefined,
      },
    );
    const item = (i: number): OutcomeItem => ({ circuit: 'c', success: true, duration_ms: i });
    for (let i = 0; i < 5; i++) q.push(item(i), true); // the 5th sends the batch
    for (let i = 5; i < 8; i++) q.push(item(i), true); // queued while it is on the wire
    expect(q.pending).toBe(8);
    fail(new TransportError('unreachable', 'reset'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(q.pending).toBe(5);
    expect(q.stats().dropped).toBe(3);
    q.stop();
  });
});
