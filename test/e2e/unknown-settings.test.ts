import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { request } from '../redis/http.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

const warnings = (server: ServerProcess) => server.logs.filter((l) => l.event === 'unknown_setting');

describe('a CIRCUITLOG_* variable the server does not read', () => {
  it('logs one warning naming it and the nearest known name, never its value', async () => {
    const server = await startServer(
      {
        CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'),
        CIRCUITLOG_TOKEN: 'token-0123456789abcdef', // set: the misspellings below are no auth risk
        CIRCUITLOG_LOG_LEVL: 'value-never-logged-1',
        CIRCUITLOG_WORKRS: 'value-never-logged-2',
        CIRCUITLOG_NOTHING_LIKE_IT: 'value-never-logged-3',
        CIRCUITLOG_URL: 'http://127.0.0.1:1', // the examples' and clients' variable: no warning
      },
      { detached: true },
    );
    running.push(server);
    expect(warnings(server).map((l) => [l.level, l.setting, l.suggestion, l.msg])).toEqual([
      [
        40,
        'CIRCUITLOG_LOG_LEVL',
        'CIRCUITLOG_LOG_LEVEL',
        'CIRCUITLOG_LOG_LEVL: unknown setting, did you mean CIRCUITLOG_LOG_LEVEL?',
      ],
      [
        40,
        'CIRCUITLOG_NOTHING_LIKE_IT',
        null,
        'CIRCUITLOG_NOTHING_LIKE_IT: unknown setting (the settings are listed in docs/operations.md#configuration)',
      ],
      [
        40,
        'CIRCUITLOG_WORKRS',
        'CIRCUITLOG_WORKERS',
        'CIRCUITLOG_WORKRS: unknown setting, did you mean CIRCUITLOG_WORKERS?',
      ],
    ]);
    expect(JSON.stringify(server.logs)).not.toContain('value-never-logged');
  });

  it('a misspelt token with no token set: the log says the start is not protected, and it is not', async () => {
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'), CIRCUITLOG_TOKN: 'meant-to-be-the-token-0123' },
      { detached: true },
    );
    running.push(server);
    expect(warnings(server).map((l) => l.msg)).toEqual([
      'CIRCUITLOG_TOKN: unknown setting, did you mean CIRCUITLOG_TOKEN? CIRCUITLOG_TOKEN is not set, so this start is NOT protected: every route answers without a token',
    ]);
    expect(server.logs.find((l) => l.event === 'starting')).toMatchObject({ token: 'off' });
    expect(JSON.stringify(server.logs)).not.toContain('meant-to-be-the-token');
    expect((await request(`${server.url}/circuits`)).status).toBe(200); // no token asked for
  });

  it('with several workers, the primary alone warns, once', async () => {
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'), CIRCUITLOG_WORKERS: '2', CIRCUITLOG_SYNCRONOUS: 'FULL' },
      { detached: true },
    );
    running.push(server);
    expect(warnings(server).map((l) => l.msg)).toEqual([
      'CIRCUITLOG_SYNCRONOUS: unknown setting, did you mean CIRCUITLOG_SYNCHRONOUS?',
    ]);
  });
});
