import { describe, expect, it, vi } from 'vitest';
import { TransportError, type OutcomeItem } from '../../src/client/transport.js';
import { edgeSchema } from '../../src/config/edge-schema.js';
import { EdgeAgent } from '../../src/edge/agent.js';
import { FakeTransport } from '../client/fake-transport.js';

// An agent upgraded before its server (docs/gateways.md#outcomes-batched-and-counted-exactly-once):
// a server from before numbered outcomes refuses `source` with a 422; the agent must not drop
// every batch for it, but send the same outcomes without numbers from then on.
class OlderServer extends FakeTransport {
  numbered = 0;
  override async postOutcomes(outcomes: readonly OutcomeItem[], source?: string): Promise<void> {
    if (source !== undefined || outcomes.some((o) => o.seq !== undefined)) {
      this.numbered++;
      throw new TransportError('rejected', 'circuitlog answered 422', 422, {
        code: 'VALIDATION_FAILED',
        errors: [{ field: 'source', message: 'is not a known field' }],
      });
    }
    return super.postOutcomes(outcomes);
  }
}

describe('the edge agent and a server from before numbered outcomes', () => {
  it('sends the refused batch again without numbers, and every later one without asking', async () => {
    const transport = new OlderServer();
    const warn = vi.fn();
    const agent = new EdgeAgent({
      server: 'http://127.0.0.1:1',
      config: edgeSchema.parse({ flush_ms: 1 }),
      logger: { info: () => undefined, warn },
      transport,
    });
    expect(agent.accept([{ circuit: 'a', success: false }])).toBe(true);
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(1));
    agent.accept([{ circuit: 'a', success: true }]);
    await vi.waitFor(() => expect(transport.outcomes).toHaveLength(2));
    expect(transport.numbered).toBe(1);
    expect(transport.outcomes.map((o) => [o.success, o.seq])).toEqual([
      [false, undefined],
      [true, undefined],
    ]);
    expect(agent.stats()).toMatchObject({ outcomes_acknowledged: 2, outcomes_rejected: 0 });
    expect(warn).toHaveBeenCalledTimes(1);
    await agent.close(1_000);
  });
});
