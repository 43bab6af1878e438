import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import type { OutcomeItem } from '../../src/client/transport.js';
import { edgeSchema } from '../../src/config/edge-schema.js';
import { EdgeAgent } from '../../src/edge/agent.js';
import { FakeTransport } from '../client/fake-transport.js';

// Issue 32, "Aggregation": however many processes report through one agent, the server gets at
// most one batch per `flush_ms`, also when it answers each batch sooner than that (a lower bound
// the agent enforces, whatever the machine's speed: docs/gateways.md).
class TimedServer extends FakeTransport {
  readonly sentAt: number[] = [];
  override async postOutcomes(outcomes: readonly OutcomeItem[], source?: string): Promise<void> {
    this.sentAt.push(performance.now());
    void source;
    return super.postOutcomes(outcomes);
  }
}

describe('the edge agent sends at most one batch per flush_ms', () => {
  it('spaces batches flush_ms apart while outcomes keep arriving, and loses none', async () => {
    const transport = new TimedServer();
    const agent = new EdgeAgent({
      server: 'http://127.0.0.1:1',
      config: edgeSchema.parse({ flush_ms: 20 }),
      logger: { info: () => undefined, warn: () => undefined },
      transport,
    });
    let sent = 0;
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        agent.accept([{ circuit: 'svc', success: true }]);
        if (++sent === 60) {
          clearInterval(timer);
          resolve();
        }
      }, 1);
    });
    await agent.close(5_000);
    expect(transport.outcomes).toHaveLength(60);
    expect(transport.sentAt.length).toBeGreaterThan(1);
    const gaps = transport.sentAt.slice(1).map((t, i) => t - transport.sentAt[i]!);
    // setTimeout never fires early; 1 ms for the rounding of its delay.
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(19);
    expect(transport.outcomes.map((o) => o.seq)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
  });
});
