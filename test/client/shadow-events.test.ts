// Issue 31: a shadow policy's transitions on the event stream never change a client's view.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type CircuitlogClient, type TransitionEvent } from '../../src/client/index.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { FakeTransport } from './fake-transport.js';

const clients: CircuitlogClient[] = [];
const servers: ServerProcess[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

describe('shadow events and the client', () => {
  it('keeps deciding a circuit locally when a shadow event says its shadow opened', async () => {
    const transport = new FakeTransport();
    const client = createClient({ url: 'http://127.0.0.1:1', transport, closeTimeoutMs: 1_000 });
    clients.push(client);
    await client.ready();
    await client.call('svc', async () => 1);
    transport.stream!.emit({
      circuit: 'svc',
      from: 'closed',
      to: 'open',
      reason: 'failure_threshold_reached',
      at: 'x',
      shadow: true,
    });
    expect(client.state('svc')).toBe('closed');
    expect(await client.call('svc', async () => 2)).toBe(2);
    expect(transport.allowedCalls).toEqual(['svc']); // the second call was decided locally
  });

  it('reads the shadow mark off the real stream, and the circuit stays closed in its view', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 50\n');
    const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config });
    servers.push(server);
    const patched = await fetch(`${server.url}/circuits/svc`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ shadow: { failure_threshold: 2 } }),
    });
    expect(patched.status).toBe(201);
    const client = createClient({ url: server.url });
    clients.push(client);
    await client.ready();
    const seen: TransitionEvent[] = [];
    const shadowEvent = new Promise<void>((resolve) =>
      client.on('transition', (event) => {
        seen.push(event);
        if (event.shadow === true) resolve();
      }),
    );
    for (let i = 0; i < 2; i++)
      await expect(client.call('svc', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await shadowEvent;
    expect(seen).toEqual([expect.objectContaining({ circuit: 'svc', to: 'open', shadow: true })]);
    expect(client.state('svc')).toBe('closed');
    expect(await client.call('svc', async () => 3)).toBe(3);
  });
});
