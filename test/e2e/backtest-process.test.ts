import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// The policy lab end to end: a real server (dist/main.js) on a temp database records a
// circuit's history; its backtest replays it in the server's worker thread.

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

async function start(): Promise<ServerProcess> {
  const server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
  running.push(server);
  return server;
}

// biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
async function request(
  url: string,
  method = 'GET',
  body?: unknown,
): Promise<{ status: number; type: string | null; json: any }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get('content-type'), json: await res.json() };
}
const post = (server: ServerProcess, name: string, success: boolean) =>
  request(`${server.url}/circuits/${name}/outcomes`, 'POST', { success });

/** A circuit 'db' with failure_threshold 3 that opened once: 2 failures, a success, 3 failures. */
async function recordedHistory(server: ServerProcess): Promise<void> {
  const patch = await fetch(`${server.url}/circuits/db`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ failure_threshold: 3, timeout_seconds: 3_600 }),
  });
  expect(patch.status).toBe(201);
  for (const success of [false, false, true, false, false, false])
    expect((await post(server, 'db', success)).status).toBe(200);
  expect((await request(`${server.url}/circuits/db`)).json.state).toBe('open');
}

/** Whether a text parses as an SVG document (Chromium's DOMParser). */
async function parsesAsSvg(text: string): Promise<boolean> {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
  try {
    const page = await browser.newPage();
    return await page.evaluate((svg) => {
      const doc = new DOMParser().parseFromString(svg, 'image/svg+xml');
      return doc.querySelector('parsererror') === null && doc.documentElement.nodeName === 'svg';
    }, text);
  } finally {
    await browser.close();
  }
}

describe('POST /circuits/{name}/backtest on a real server', () => {
  it('replays the live policy to the recorded transitions (fidelity 1) and a looser one to no opening; the picture is an SVG', async () => {
    const server = await start();
    await recordedHistory(server);
    const recorded = (await request(`${server.url}/circuits/db/events`)).json.events as {
      from: string;
      to: string;
      reason: string;
      at: string;
    }[];
    const answer = await request(`${server.url}/circuits/db/backtest`, 'POST', { policy: { failure_threshold: 10 } });
    expect(answer.status).toBe(200);
    const result = answer.json;
    expect(result).toMatchObject({ circuit: 'db', outcomes: 6, start: 'created', skipped: 0 });
    expect(result.fidelity).toMatchObject({ matched: 1, recorded: 1, ratio: 1, first_mismatch: null });
    // The live replay's transitions are the recorded ones (GET /events is newest first).
    expect(
      result.current.transitions.map((t: { from: string; to: string; reason: string; at: number }) => ({
        ...t,
        at: new Date(t.at).toISOString(),
      })),
    ).toEqual(recorded.map(({ from, to, reason, at }) => ({ from, to, reason, at })).reverse());
    expect(result.current).toMatchObject({ openings: 1, refused_calls: 0 });
    expect(result.proposed).toMatchObject({ openings: 0, refused_calls: 0, transitions: [] });

    const svg = await fetch(`${server.url}/circuits/db/backtest/${result.id}.svg`);
    expect(svg.status).toBe(200);
    expect(svg.headers.get('content-type')).toBe('image/svg+xml; charset=utf-8');
    expect(await parsesAsSvg(await svg.text())).toBe(true);
  });

  it('counts outcomes that arrived while a stricter replay was open as refused, not fed', async () => {
    const server = await start();
    await recordedHistory(server);
    // Opening at the 2nd failure: the success, then the last 3 failures arrive while it is open.
    const result = (await request(`${server.url}/circuits/db/backtest`, 'POST', { policy: { failure_threshold: 2 } }))
      .json;
    expect(result.proposed).toMatchObject({ openings: 1, refused_calls: 4 });
    expect(result.current).toMatchObject({ openings: 1, refused_calls: 0 });
  });

  it('answers bad input with problem+json and changes nothing', async () => {
    const server = await start();
    await recordedHistory(server);
    const before = (await request(`${server.url}/circuits/db`)).json;
    const events = (await request(`${server.url}/circuits/db/events`)).json;
    const cases: [unknown, string, number, string][] = [
      [{}, 'nobody', 404, '/problems/circuit-not-found'],
      [{ policy: { failure_threshold: 0 } }, 'db', 422, '/problems/validation-failed'],
      [
        { policy: { window: { type: 'time', size: 10 } }, grid: { 'window.size': [0] } },
        'db',
        422,
        '/problems/validation-failed',
      ],
      [
        {
          grid: {
            failure_threshold: Array.from({ length: 11 }, (_, i) => i + 1),
            timeout_seconds: Array.from({ length: 10 }, (_, i) => i + 1),
          },
        },
        'db',
        400,
        '/problems/too-many-combinations',
      ],
      [{ from: '2026-12-05T00:00:00Z', to: '2026-12-04T00:00:00Z' }, 'db', 422, '/problems/validation-failed'],
    ];
    for (const [body, name, status, type] of cases) {
      const res = await request(`${server.url}/circuits/${name}/backtest`, 'POST', body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.type).toBe('application/problem+json');
      expect(res.json.type).toBe(type);
    }
    expect((await request(`${server.url}/circuits/db`)).json).toEqual(before);
    expect((await request(`${server.url}/circuits/db/events`)).json).toEqual(events);
    expect((await request(`${server.url}/circuits/nobody`)).status).toBe(404);
    expect((await fetch(`${server.url}/circuits/db/backtest/not-an-id.svg`)).status).toBe(404);
  });
});
