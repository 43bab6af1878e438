import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import type { Admission } from '../../src/domain/circuit.js';
import { NodePick } from '../../src/proxy/node-picker.js';
import { buildUpstreams, type Upstream } from '../../src/proxy/upstreams.js';
import type { BreakerService } from '../../src/service/breaker-service.js';
import { proxyYaml } from './fake-node.js';

const nodes = Object.fromEntries(
  ['dc1-1', 'dc1-2', 'dc2-1'].map((id) => [id, { id, url: `http://127.0.0.1:1/${id}` }]),
);

function upstream(): Upstream {
  const config = parseConfigText(proxyYaml(nodes, 'health_check: { enabled: false }'), 'test');
  return buildUpstreams(config.upstreams, config.local_dc!).get('users')!;
}

const open = { verdict: { allowed: false, retryAt: 5_000 } } as unknown as Admission;
const closed = { verdict: { allowed: true, retryAt: 0 } } as unknown as Admission;

/** A breaker whose checks answer per circuit: at once, or as a promise (a store that must be asked). */
function breaker(answers: Record<string, Admission | Promise<Admission> | Error>, asked: string[]): BreakerService {
  const answer = (name: string) => answers[name] ?? null;
  const later = (a: Admission | Promise<Admission> | Error | null) => a instanceof Error || a instanceof Promise;
  return {
    // The synchronous peek answers what is at hand; the rest is `allowed`'s (each node asked once).
    peekAllowed(name: string) {
      const a = answer(name);
      if (later(a)) return undefined;
      asked.push(name);
      return a;
    },
    allowed(name: string) {
      asked.push(name);
      const a = answer(name);
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
  } as unknown as BreakerService;
}

describe('NodePick: one walk, answered at once or later', () => {
  it('answers at once when every check does, skipping an open local node for the next local one', () => {
    const asked: string[] = [];
    const pick = new NodePick(upstream(), null, breaker({ 'users/dc1-1': open }, asked), true).now();
    expect(pick?.node?.id).toBe('dc1-2');
    expect(asked).toEqual(['users/dc1-1', 'users/dc1-2']);
  });

  it('goes on later from the node whose check needs the store, checking each node once, in the same order', async () => {
    const asked: string[] = [];
    const b = breaker(
      { 'users/dc1-1': open, 'users/dc1-2': Promise.resolve(open), 'users/dc2-1': Promise.resolve(closed) },
      asked,
    );
    const picking = new NodePick(upstream(), null, b, true);
    expect(picking.now()).toBeNull();
    expect((await picking.later()).node?.id).toBe('dc2-1');
    expect(asked).toEqual(['users/dc1-1', 'users/dc1-2', 'users/dc2-1']);
  });

  it('answers no node with the earliest retry time when every circuit is open, sync or not', async () => {
    const asked: string[] = [];
    const b = breaker({ 'users/dc1-1': open, 'users/dc1-2': Promise.resolve(open), 'users/dc2-1': open }, asked);
    const picking = new NodePick(upstream(), null, b, true);
    expect(picking.now()).toBeNull();
    expect(await picking.later()).toEqual({ node: null, retryAt: 5_000 });
  });

  it('fails open to a local node on STORAGE_UNAVAILABLE, and refuses when told to', async () => {
    const { AppError } = await import('../../src/domain/errors.js');
    const down = () => breaker({ 'users/dc1-1': new AppError('STORAGE_UNAVAILABLE', 'down') }, []);
    const failOpen = new NodePick(upstream(), null, down(), true);
    expect(failOpen.now()).toBeNull();
    expect((await failOpen.later()).node?.id).toBe('dc1-1');
    const refuse = new NodePick(upstream(), null, down(), false);
    expect(refuse.now()).toBeNull();
    await expect(refuse.later()).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
  });

  it('moves the round-robin cursor of each group it enters once per pick', () => {
    const u = upstream();
    const ids = [0, 1, 2].map(() => new NodePick(u, null, breaker({}, []), true).now()?.node?.id);
    expect(ids).toEqual(['dc1-1', 'dc1-2', 'dc1-1']);
  });
});
