import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { refusedStart } from '../refused-start.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

const refusal = (store: string) => refusedStart({ CIRCUITLOG_STORE: store });

/** The connections a redis-server has accepted since it started (INFO stats), not counting this one. */
async function connectionsTo(redis: RedisServer): Promise<number> {
  const { stdout } = await promisify(execFile)('redis-cli', [
    ...['-h', '127.0.0.1', '-p', String(redis.port), '-a', 'right-secret', '--no-auth-warning'],
    ...['INFO', 'stats'],
  ]);
  const received = /total_connections_received:(\d+)/.exec(stdout);
  if (received === null) throw new Error(`no total_connections_received in INFO stats: ${stdout}`);
  return Number(received[1]) - 1;
}

describe('a Redis that says why it cannot be used stops the start at once, saying so', () => {
  // "At once": the answer comes with the first attempt, not after the 8 s of bounded retries
  // an unreachable Redis gets (which ended in "no answer within 8000 ms" for all of these):
  // counted in connections redis-server accepted, not in wall time (a busy machine spends
  // seconds just loading Node).
  // The store's connection and its change subscription, once each, plus for rediss:// the one
  // plain-text probe that names the cause; the retries of an unreachable Redis make dozens.
  const FIRST_ATTEMPTS = 3;

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
    const { code, stderr } = await refusal(url(redis.port));
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/secret/);
    expect(stderr).not.toMatch(/no answer within/);
    expect(await connectionsTo(redis)).toBeLessThanOrEqual(FIRST_ATTEMPTS);
  });

  it('a host name that does not resolve', async () => {
    // `.invalid` never resolves (RFC 6761); the lookup is the only traffic.
    const { code, stderr } = await refusal('redis://:some-secret@nohost.invalid:6379/0');
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /CIRCUITLOG_STORE: Redis at redis:\/\/:\*\*\*@nohost\.invalid:6379\/0: the host name 'nohost\.invalid' does not resolve \(DNS: getaddrinfo E[A-Z_]+/,
    );
    expect(stderr).not.toMatch(/secret/);
    expect(stderr).not.toMatch(/no answer within/);
  });
});
