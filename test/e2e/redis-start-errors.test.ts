import { afterEach, describe, expect, it } from 'vitest';
import { refusedStart } from '../refused-start.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

const refusal = (store: string) => refusedStart({ CIRCUITLOG_STORE: store });

describe('a Redis that says why it cannot be used stops the start at once, saying so', () => {
  // "At once": the answer comes with the first attempt, not after the 8 s of bounded retries
  // an unreachable Redis gets (which ended in "no answer within 8000 ms" for all of these).
  const AT_ONCE_MS = 6_000;

  it.each([
    [
      'a wrong password (WRONGPASS)',
      (port: number) => `redis://:wrong-secret@127.0.0.1:${port}/0`,
      /CIRCUITLOG_STORE: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0: authentication failed \(the password given\): Redis answered "WRONGPASS/,
    ],
    [
      'an unknown user (WRONGPASS)',
      (port: number) => `redis://bob:wrong-secret@127.0.0.1:${port}/0`,
      /CIRCUITLOG_STORE: Redis at .*authentication failed \(user 'bob'\): Redis answered "WRONGPASS/,
    ],
    [
      'no password (NOAUTH)',
      (port: number) => `redis://127.0.0.1:${port}/0`,
      /CIRCUITLOG_STORE: Redis at .*authentication failed \(no credentials given\): Redis answered "NOAUTH/,
    ],
    [
      'a database out of range',
      (port: number) => `redis://:right-secret@127.0.0.1:${port}/99`,
      /CIRCUITLOG_STORE: Redis at .*database 99 cannot be selected: Redis answered "ERR DB index is out of range/,
    ],
    [
      'rediss:// against a plain-text Redis',
      (port: number) => `rediss://:right-secret@127.0.0.1:${port}/0`,
      /CIRCUITLOG_STORE: Redis at rediss:.*this Redis does not speak TLS there/,
    ],
  ])('%s', async (_, url, message) => {
    const redis = await startRedis({ password: 'right-secret' });
    redises.push(redis);
    const { code, stderr, ms } = await refusal(url(redis.port));
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/secret/);
    expect(stderr).not.toMatch(/no answer within/);
    expect(ms).toBeLessThan(AT_ONCE_MS);
  });

  it('a host name that does not resolve', async () => {
    // `.invalid` never resolves (RFC 6761); the lookup is the only traffic.
    const { code, stderr, ms } = await refusal('redis://:some-secret@nohost.invalid:6379/0');
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /CIRCUITLOG_STORE: Redis at redis:\/\/:\*\*\*@nohost\.invalid:6379\/0: the host name 'nohost\.invalid' does not resolve \(DNS: getaddrinfo E[A-Z_]+/,
    );
    expect(stderr).not.toMatch(/secret/);
    expect(ms).toBeLessThan(AT_ONCE_MS);
  });
});
