import { afterEach, describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/domain/redact-url.js';
import { parseSentinelUrl } from '../../src/store/redis/sentinel-url.js';
import { request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startSentinel, type Sentinel } from '../redis/sentinel.js';
import { refusedStart } from '../refused-start.js';
import { startServer, type ServerProcess } from '../server-process.js';

const stoppers: (RedisServer | Sentinel)[] = [];
const hosts: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.killGroup()));
  await Promise.all(stoppers.splice(0).map((s) => (s as RedisServer).stop('SIGKILL')));
});

/** A primary with `requirepass data-pw`, watched by a sentinel with `requirepass sent-pw`. */
async function guarded(): Promise<Sentinel> {
  const primary = await startRedis({ password: 'data-pw' });
  stoppers.push(primary);
  const sentinel = await startSentinel('m', primary.port, { requirepass: 'sent-pw', masterPassword: 'data-pw' });
  stoppers.push(sentinel);
  return sentinel;
}

describe("sentinel credentials apart from the data nodes' (sentinel_username / sentinel_password)", () => {
  it('parses them from the URL options, refuses unknown options, and never shows the sentinel password', () => {
    expect(
      parseSentinelUrl('redis+sentinel://u:p@h1:26379,h2/m/2?sentinel_username=su&sentinel_password=s%40p'),
    ).toMatchObject({
      username: 'u',
      password: 'p',
      sentinelUsername: 'su',
      sentinelPassword: 's@p',
      masterName: 'm',
      db: 2,
    });
    expect(parseSentinelUrl('redis+sentinel://h1/m?sentinel_pass=x')).toEqual({
      problem: "has the unknown option 'sentinel_pass'; the options are sentinel_username and sentinel_password",
    });
    expect(redactUrl('redis+sentinel://:p@h1/m?sentinel_username=su&sentinel_password=secret')).toBe(
      'redis+sentinel://:***@h1/m?sentinel_username=su&sentinel_password=***',
    );
  });

  it('starts against a sentinel with requirepass when given its password, and serves from the primary it names', async () => {
    const sentinel = await guarded();
    const host = await startServer(
      { CIRCUITLOG_STORE: `redis+sentinel://:data-pw@127.0.0.1:${sentinel.port}/m?sentinel_password=sent-pw` },
      { detached: true },
    );
    hosts.push(host);
    expect((await request(`${host.url}/circuits/auth/failure`, 'POST')).json.failure_count).toBe(1);
    expect((await request(`${host.url}/health`)).status).toBe(200);
  });

  it.each([
    ['no sentinel password', ''],
    ['a wrong sentinel password', '?sentinel_password=wrong-pw'],
  ])(
    'stops the start with exit 2 naming CIRCUITLOG_STORE and the sentinel credentials, with %s',
    async (_, options) => {
      const sentinel = await guarded();
      const { code, stderr } = await refusedStart({
        CIRCUITLOG_STORE: `redis+sentinel://:data-pw@127.0.0.1:${sentinel.port}/m${options}`,
      });
      expect(code).toBe(2);
      expect(stderr).toMatch(
        /CIRCUITLOG_STORE: Redis at redis\+sentinel:\/\/:\*\*\*@127\.0\.0\.1:\d+\/m.*: the sentinels refused the credentials given \(the sentinel_username and sentinel_password options/,
      );
      expect(stderr).not.toMatch(/data-pw|wrong-pw|sent-pw/);
    },
  );
});
