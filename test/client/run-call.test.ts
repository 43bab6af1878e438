// Without a timeout or a caller's signal, call() gives fn one shared, never-aborted signal. fetch
// (undici) adds an abort listener to the signal it is given per request and drops it only when the
// request is garbage collected, so the documented `(signal) => fetch(url, { signal })` piled
// thousands of listeners on that one signal: Node printed a MaxListenersExceededWarning for each
// past 1,500 (seen in test/e2e/fleet-cool-down.test.ts). A fake transport: no sockets.
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type CircuitlogClient } from '../../src/client/index.js';
import { FakeTransport } from './fake-transport.js';

const clients: CircuitlogClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
});

describe('call() without a timeout or a signal', () => {
  it('gives fn a signal that takes one abort listener per call, as fetch adds, without a MaxListenersExceededWarning', async () => {
    const client = createClient({ url: 'http://127.0.0.1:1', transport: new FakeTransport(), flushDelayMs: 1 });
    clients.push(client);
    await client.ready();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const held: (() => void)[] = []; // kept alive, as undici keeps them until its request is collected
    try {
      for (let i = 0; i < 2_000; i++) {
        const result = await client.call('dep', (signal) => {
          const listener = () => {};
          held.push(listener);
          signal.addEventListener('abort', listener);
          return 'ok';
        });
        expect(result).toBe('ok');
      }
      await new Promise((resolve) => setImmediate(resolve)); // process warnings are emitted on a later tick
    } finally {
      process.off('warning', onWarning);
    }
    expect(held).toHaveLength(2_000);
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
