import { afterEach, describe, expect, it } from 'vitest';
import { refusedPort } from '../refused-port.js';
import { refusedStart } from '../refused-start.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startSentinel, type Sentinel } from '../redis/sentinel.js';

const stoppers: (RedisServer | Sentinel)[] = [];
afterEach(async () => {
  await Promise.all(stoppers.splice(0).map((s) => (s as RedisServer).stop('SIGKILL')));
});

const refusal = (store: string) => refusedStart({ CIRCUITLOG_STORE: store });

describe('redis+sentinel:// that cannot work stops the start with exit 2 within 10 s, naming CIRCUITLOG_STORE, no password', () => {
  it.each([
    [
      'no master name',
      'redis+sentinel://:s3cret@127.0.0.1:26379',
      /CIRCUITLOG_STORE: 'redis\+sentinel:\/\/:\*\*\*@127\.0\.0\.1:26379' is not redis\+sentinel:\/\/\[user:pass@\]host:26379/,
    ],
    [
      'a bad sentinel address',
      'redis+sentinel://:s3cret@127.0.0.1:99999/m',
      /CIRCUITLOG_STORE: .*has sentinel address '127\.0\.0\.1:99999'; each must be host\[:port\]/,
    ],
    [
      'a database that is not a number',
      'rediss+sentinel://u:s3cret@h1,h2:26380/m/x',
      /CIRCUITLOG_STORE: 'rediss\+sentinel:\/\/u:\*\*\*@h1,h2:26380\/m\/x' has database 'x'/,
    ],
  ])('a malformed URL: %s', async (_, store, message) => {
    const { code, stderr } = await refusal(store);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/s3cret/);
  });

  it('no sentinel reachable', async () => {
    const [a, b] = [await refusedPort(), await refusedPort()];
    const { code, stderr } = await refusal(`redis+sentinel://:s3cret@127.0.0.1:${a},127.0.0.1:${b}/m`);
    expect(code).toBe(2);
    expect(stderr).toMatch(
      new RegExp(
        `CIRCUITLOG_STORE: cannot reach Redis at redis\\+sentinel://:\\*\\*\\*@127\\.0\\.0\\.1:${a},127\\.0\\.0\\.1:${b}/m: no sentinel answers \\(127\\.0\\.0\\.1:${a}: .*; 127\\.0\\.0\\.1:${b}: `,
      ),
    );
    expect(stderr).not.toMatch(/s3cret/);
  });

  it('a master name the sentinels do not know', async () => {
    const primary = await startRedis();
    stoppers.push(primary);
    const sentinel = await startSentinel('m', primary.port);
    stoppers.push(sentinel);
    const { code, stderr } = await refusal(`redis+sentinel://:s3cret@127.0.0.1:${sentinel.port}/other`);
    expect(code).toBe(2);
    expect(stderr).toMatch(
      new RegExp(
        `CIRCUITLOG_STORE: Redis at redis\\+sentinel://:\\*\\*\\*@127\\.0\\.0\\.1:${sentinel.port}/other: sentinel 127\\.0\\.0\\.1:${sentinel.port} knows no master named 'other'`,
      ),
    );
    expect(stderr).not.toMatch(/s3cret/);
  });
});
