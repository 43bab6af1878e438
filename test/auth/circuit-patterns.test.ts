import { afterEach, describe, expect, it, vi } from 'vitest';
import { newCircuit } from '../../src/domain/circuit.js';
import { listen } from '../observe/observe-app.js';
import { openStream } from '../observe/sse-client.js';
import { bearer, buildCredentialsApp, entry } from './credentials-app.js';

const ADMIN = 'admin-token-0123456789abcdef';
const PAYMENTS = 'payments-token-0123456789abcdef';

function app(more: Parameters<typeof entry>[3] = {}) {
  return buildCredentialsApp([
    entry('ops', ADMIN, ['admin']),
    entry('payments', PAYMENTS, ['read', 'report', 'configure'], { circuits: ['payments/*'], ...more }),
  ]);
}

describe('a credential limited to circuit patterns', () => {
  it('lists only its circuits, page by page', async () => {
    const t = app();
    for (const name of ['orders/a', 'payments/a', 'orders/b', 'payments/b', 'orders/c', 'payments/c'])
      await t.request('POST', `/circuits/${encodeURIComponent(name)}/success`, undefined, bearer(ADMIN));
    const first = await t.request('GET', '/circuits?limit=2', undefined, bearer(PAYMENTS));
    const page1 = (await first.json()) as { circuits: { name: string }[]; next_cursor: string | null };
    expect(page1.circuits.map((c) => c.name)).toEqual(['payments/a', 'payments/b']);
    const second = await t.request('GET', `/circuits?limit=2&cursor=${page1.next_cursor}`, undefined, bearer(PAYMENTS));
    const page2 = (await second.json()) as { circuits: { name: string }[]; next_cursor: string | null };
    expect(page2).toMatchObject({ circuits: [{ name: 'payments/c' }], next_cursor: null });
    const all = (await (await t.request('GET', '/circuits', undefined, bearer(ADMIN))).json()) as {
      circuits: unknown[];
    };
    expect(all.circuits).toHaveLength(6);
  });

  it('sees only its circuits on the dashboard', async () => {
    const t = app();
    for (const name of ['orders/a', 'payments/a'])
      await t.request('POST', `/circuits/${encodeURIComponent(name)}/failure`, undefined, bearer(ADMIN));
    const state = (await (await t.request('GET', '/dashboard/api/state', undefined, bearer(PAYMENTS))).json()) as {
      circuits: { name: string }[];
    };
    expect(state.circuits.map((c) => c.name)).toEqual(['payments/a']);
  });

  it('is refused a circuit outside them, 403 circuit-not-permitted, also to create it, and nothing is written', async () => {
    const t = app();
    await t.request('POST', '/circuits/orders%2Fx/success', undefined, bearer(ADMIN));
    const routes: [string, string, unknown?][] = [
      ['GET', '/circuits/orders%2Fx'],
      ['GET', '/circuits/orders%2Fx/allowed'],
      ['POST', '/circuits/orders%2Fx/failure'],
      ['PATCH', '/circuits/orders%2Fnew', { failure_threshold: 3 }],
      [
        'POST',
        '/outcomes',
        {
          outcomes: [
            { circuit: 'payments/a', success: true },
            { circuit: 'orders/y', success: false },
          ],
        },
      ],
    ];
    for (const [method, path, body] of routes) {
      const res = await t.request(method, path, body, bearer(PAYMENTS));
      expect([method, path, res.status]).toEqual([method, path, 403]);
      expect(await res.json()).toMatchObject({
        code: 'CIRCUIT_NOT_PERMITTED',
        type: '/problems/circuit-not-permitted',
      });
    }
    const names = (
      (await (await t.request('GET', '/circuits', undefined, bearer(ADMIN))).json()) as { circuits: { name: string }[] }
    ).circuits;
    expect(names.map((c) => c.name)).toEqual(['orders/x']);
    expect((await t.request('POST', '/circuits/payments%2Fa/failure', undefined, bearer(PAYMENTS))).status).toBe(200);
    const metrics = await t.scrape(bearer(ADMIN));
    expect(metrics.get('circuitlog_auth_refusals_total{reason="circuit_not_permitted"}')).toBe(routes.length);
  });

  it('stops the 101st circuit past max_new_circuits with a 403, not a 429', async () => {
    const t = app({ max_new_circuits: 100 });
    for (let i = 0; i < 100; i++) {
      const res = await t.request('POST', `/circuits/payments%2F${i}/success`, undefined, bearer(PAYMENTS));
      expect(res.status).toBe(200);
    }
    const over = await t.request('POST', '/circuits/payments%2F100/success', undefined, bearer(PAYMENTS));
    expect(over.status).toBe(403);
    expect(await over.json()).toMatchObject({
      code: 'CIRCUIT_NOT_PERMITTED',
      rule: 'max_new_circuits',
      max_new_circuits: 100,
    });
    const patched = await t.request('PATCH', '/circuits/payments%2F101', { failure_threshold: 3 }, bearer(PAYMENTS));
    expect(patched.status).toBe(403);
    // Its existing circuits still take outcomes; another credential may still create.
    expect((await t.request('POST', '/circuits/payments%2F7/failure', undefined, bearer(PAYMENTS))).status).toBe(200);
    expect((await t.request('POST', '/circuits/orders%2F1/success', undefined, bearer(ADMIN))).status).toBe(200);
    const metrics = await t.scrape(bearer(ADMIN));
    expect(metrics.get('circuitlog_auth_refusals_total{reason="max_new_circuits"}')).toBe(2);
  });
});

describe('max_new_circuits on a store of many circuits', () => {
  it('counts the credential circuits through the name index, never reading every circuit', async () => {
    const t = app({ max_new_circuits: 3 });
    const settings = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
    const others = Array.from({ length: 3_000 }, (_, i) => `orders/${i}`);
    t.store.applyBatch(
      others.map((name) => ({ name, step: () => ({ circuit: newCircuit(name, settings, 0), transitions: [] }) })),
    );
    const list = vi.spyOn(t.store, 'list');
    for (const name of ['payments%2Fa', 'payments%2Fb', 'payments%2Fc'])
      expect((await t.request('POST', `/circuits/${name}/success`, undefined, bearer(PAYMENTS))).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const over = await t.request('POST', `/circuits/payments%2Fz${i}/success`, undefined, bearer(PAYMENTS));
      expect(over.status).toBe(403);
    }
    expect(list).not.toHaveBeenCalled();
    expect(t.store.count()).toBe(3_003);
  });
});

describe('the event stream of a credential limited to circuit patterns', () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  it('carries only the transitions of its circuits', async () => {
    const t = app();
    const server = await listen(t);
    cleanup.push(() => server.close());
    const stream = await openStream(`${server.url}/events/stream`, bearer(PAYMENTS));
    cleanup.push(() => stream.close());
    expect(stream.status).toBe(200);
    for (const name of ['orders/a', 'payments/a', 'orders/b', 'payments/b'])
      for (let i = 0; i < 5; i++)
        await t.request('POST', `/circuits/${encodeURIComponent(name)}/failure`, undefined, bearer(ADMIN));
    const seen = [(await stream.next()).data.circuit, (await stream.next()).data.circuit];
    expect(seen).toEqual(['payments/a', 'payments/b']);
  });
});
