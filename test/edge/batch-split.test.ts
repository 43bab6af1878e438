import { describe, expect, it, vi } from 'vitest';
import { TransportError, type OutcomeItem } from '../../src/client/transport.js';
import { deliverSplitting } from '../../src/edge/batch-split.js';

const items = (...names: string[]): OutcomeItem[] =>
  names.map((circuit, i) => ({ circuit, success: false, seq: i + 1 }));
const refusal = (code: string, status = 403) => new TransportError('rejected', `refused ${code}`, status, { code });

/** A server that refuses any batch holding a circuit named `bad*` (with `code`), and records the rest. */
function server(code = 'CIRCUIT_NOT_PERMITTED') {
  const applied: string[] = [];
  const posts: string[][] = [];
  const post = vi.fn(async (batch: readonly OutcomeItem[]) => {
    posts.push(batch.map((i) => i.circuit));
    if (batch.some((i) => i.circuit.startsWith('bad'))) throw refusal(code);
    applied.push(...batch.map((i) => i.circuit));
  });
  return { applied, posts, post };
}

describe('deliverSplitting', () => {
  it('delivers the rest of a batch refused for one item, in order, and reports the item refused alone', async () => {
    const s = server();
    const refused = vi.fn();
    await deliverSplitting(items('a', 'b', 'bad', 'c', 'd'), s.post, () => true, refused);
    expect(s.applied).toEqual(['a', 'b', 'c', 'd']);
    expect(refused).toHaveBeenCalledTimes(1);
    expect(refused).toHaveBeenCalledWith(1, expect.objectContaining({ status: 403 }));
  });

  it('splits only refusals of one item’s sake: a bad token or scope refuses the whole batch at once', async () => {
    const s = server('INSUFFICIENT_SCOPE');
    await expect(deliverSplitting(items('a', 'bad'), s.post, () => true, vi.fn())).rejects.toMatchObject({
      status: 403,
    });
    expect(s.posts).toEqual([['a', 'bad']]);
  });

  it('does not split when not allowed (outcomes unnumbered: a batch sent again would count twice)', async () => {
    const s = server();
    await expect(deliverSplitting(items('a', 'bad'), s.post, () => false, vi.fn())).rejects.toBeInstanceOf(
      TransportError,
    );
    expect(s.applied).toEqual([]);
  });

  it('leaves a batch of one to the queue, and rejects when the server goes away mid-way', async () => {
    const s = server();
    await expect(deliverSplitting(items('bad'), s.post, () => true, vi.fn())).rejects.toMatchObject({ status: 403 });
    let calls = 0;
    const flaky = async (batch: readonly OutcomeItem[]) => {
      calls++;
      if (calls === 1) throw refusal('VALIDATION_FAILED', 422);
      if (calls === 3) throw new TransportError('unreachable', 'connection reset');
      s.applied.push(...batch.map((i) => i.circuit));
    };
    s.applied.length = 0;
    await expect(deliverSplitting(items('a', 'b', 'c', 'd'), flaky, () => true, vi.fn())).rejects.toMatchObject({
      kind: 'unreachable',
    });
    expect(s.applied).toEqual(['a', 'b']); // the queue sends the whole batch again: numbered, a and b count once
  });
});
