import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { refusedStart } from '../refused-start.js';
import { tempDir } from '../server-process.js';

const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

/** Start the server expecting a refusal; everything it printed, stdout (the log) and stderr. */
async function refused(env: Record<string, string>): Promise<{ code: number; printed: string; stderr: string }> {
  const { code, stdout, stderr } = await refusedStart({ CIRCUITLOG_LOG_LEVEL: 'info', ...env });
  return { code, printed: stdout + stderr, stderr };
}

describe('no password in any printed URL', () => {
  it('a Sentinel password under an encoded key (sentinel%5Fpassword) is in neither the start log nor the start error', async () => {
    const sentinel = await startRedis({ password: 'the-right-one' }); // answers WRONGPASS to the sentinel password given
    redises.push(sentinel);
    const { code, printed, stderr } = await refused({
      CIRCUITLOG_STORE: `redis+sentinel://:D4ta-pw@127.0.0.1:${sentinel.port}/m?sentinel%5Fpassword=S3ntinel-pw`,
    });
    expect(code).toBe(2);
    expect(printed).toContain('"event":"starting"');
    expect(printed).toContain(`"store":"redis+sentinel://:***@127.0.0.1:${sentinel.port}/m?sentinel%5Fpassword=***"`);
    expect(stderr).toContain('the sentinels refused the credentials');
    expect(stderr).toContain('sentinel%5Fpassword=***');
    expect(printed).not.toMatch(/D4ta|S3ntinel/);
  });

  it.each([
    ['an unencoded @ and / in a Sentinel URL', 'redis+sentinel://:p4@S3/cr3t@127.0.0.1:1/m'],
    ['an unencoded / in a Redis URL', 'redis://:p4/S3cr3t@127.0.0.1:1/0'],
    ['an unencoded @ in a Cluster URL', 'redis+cluster://u:p4@S3cr3t@127.0.0.1:1,127.0.0.1:x'],
  ])('%s: the refused URL is printed without any of the password', async (_, url) => {
    const { code, printed } = await refused({ CIRCUITLOG_STORE: url });
    expect(code).toBe(2);
    expect(printed).toContain('cannot start: CIRCUITLOG_STORE:');
    expect(printed).not.toMatch(/p4|S3|cr3t/);
  });

  it("an upstream node's URL that does not parse is printed without its password", async () => {
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(
      config,
      'local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://u:S3cr3t@127.0.0.1:99999" }]\n',
    );
    const { code, printed } = await refused({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config });
    expect(code).toBe(2);
    expect(printed).toContain("got 'http://u:***@127.0.0.1:99999'");
    expect(printed).not.toContain('S3cr3t');
  });
});
