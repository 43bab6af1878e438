// Issue 15: with no traffic at all, a stream listener sees open -> half-open within a second
// of open_until, stamped at open_until; one process publishes it (alone, or the lease holder).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const servers: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

/** The transition events of `/events/stream`, as they arrive. */
async function listen(url: string, onEvent: (data: Record<string, unknown>) => void): Promise<AbortController> {
  const controller = new AbortController();
  const res = await fetch(`${url}/events/stream`, { signal: controller.signal });
  void (async () => {
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += Buffer.from(chunk).toString();
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = block.split('\n').find((l) => l.startsWith('data: '));
          if (block.includes('event: transition') && data)
            onEvent(JSON.parse(data.slice(6)) as Record<string, unknown>);
        }
      }
    } catch {
      // aborted at the end of the test
    }
  })();
  return controller;
}

describe.each([1, 2])('due transitions with %i worker(s)', (workers) => {
  it('reach a stream listener stamped at open_until, with no other request', { timeout: 30_000 }, async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'c.yaml'), 'circuit_defaults:\n  failure_threshold: 1\n  timeout_seconds: 1\n');
    const server = await startServer({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
      CIRCUITLOG_WORKERS: String(workers),
    });
    servers.push(server);
    const seen: { data: Record<string, unknown> }[] = [];
    const stream = await listen(server.url, (data) => seen.push({ data }));
    const opened = await fetch(`${server.url}/circuits/quiet/outcomes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"success":false}',
    });
    const openUntil = Date.parse(((await opened.json()) as { open_until: string }).open_until);
    const deadline = Date.now() + 10_000;
    while (!seen.some((e) => e.data.to === 'half_open') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    stream.abort();
    const halfOpen = seen.find((e) => e.data.to === 'half_open');
    expect(halfOpen?.data).toMatchObject({
      circuit: 'quiet',
      from: 'open',
      reason: 'open_timeout_elapsed',
      at: new Date(openUntil).toISOString(),
    });
    // How soon is proven with a fake clock (test/service/due-transitions.test.ts): no timed assertion here.
  });
});
