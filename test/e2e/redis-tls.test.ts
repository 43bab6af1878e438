import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openStream } from '../observe/sse-client.js';
import { startCluster, type RedisCluster } from '../redis/cluster.js';
import { eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import {
  cli,
  DOWN_AFTER_MS,
  FAILOVER_TIMEOUT_MS,
  masterInfo,
  startSentinel,
  type Sentinel,
} from '../redis/sentinel.js';
import { tlsFiles, tlsQuery, type TlsFiles } from '../redis/tls.js';
import { refusedStart } from '../refused-start.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// TLS to Redis in each mode, against real redis-servers that speak TLS only (no plain-text
// port), with certificates of a CA the test makes (test/redis/tls.ts) and client certificates
// required (mutual TLS) unless said otherwise.
let files: TlsFiles;
beforeAll(async () => {
  files = await tlsFiles();
});

const hosts: ServerProcess[] = [];
const stoppers: { stop(signal?: NodeJS.Signals): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.killGroup()));
  await Promise.all(stoppers.splice(0).map((s) => s.stop('SIGKILL')));
});

const MASTER = 'tls-m';
const config = (() => {
  let file: string | undefined;
  return () => {
    if (file === undefined) {
      file = path.join(tempDir(), 'c.yaml');
      fs.writeFileSync(file, 'circuit_defaults:\n  failure_threshold: 1\n');
    }
    return file;
  };
})();

/** Two circuitlog hosts on `store` (failure_threshold 1). */
async function twoHosts(store: string): Promise<[ServerProcess, ServerProcess]> {
  const env = { CIRCUITLOG_STORE: store, CIRCUITLOG_CONFIG: config() };
  const started = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
  hosts.push(...started);
  return started as [ServerProcess, ServerProcess];
}

/** Does `host`'s /metrics show `circuit` in `state`? */
async function gaugeShows(host: ServerProcess, circuit: string, state: string): Promise<boolean> {
  const text = (await request(`${host.url}/metrics`)).text;
  return text.includes(`circuitlog_circuit_state{circuit="${circuit}",state="${state}"} 1`);
}

/**
 * A trip on host A, over TLS: B refuses the circuit within 1 s, B's state gauge shows it open
 * within 1 s (B's mirror of the circuits, loaded before the trip, learns of changes only from
 * the `changes` subscription: so it works over TLS), and B's /events/stream delivers the transition.
 */
async function tripSeenOnOtherHost(a: ServerProcess, b: ServerProcess, circuit: string): Promise<void> {
  expect((await request(`${a.url}/circuits/${circuit}/success`, 'POST')).status).toBe(200); // made, closed
  expect((await request(`${b.url}/circuits/${circuit}/allowed`)).status).toBe(200); // b holds it in its copy now
  expect(await eventually(() => gaugeShows(b, circuit, 'closed'), 5_000)).toBe(true);
  const stream = await openStream(`${b.url}/events/stream?circuit=${circuit}`);
  try {
    expect(stream.status).toBe(200);
    expect((await request(`${a.url}/circuits/${circuit}/failure`, 'POST')).status).toBe(200);
    const refused = await eventually(
      async () => (await request(`${b.url}/circuits/${circuit}/allowed`)).status === 503,
      1_000,
    );
    expect(refused).toBe(true);
    expect(await eventually(() => gaugeShows(b, circuit, 'open'), 1_000)).toBe(true);
    expect(await stream.next(3_000)).toMatchObject({
      event: 'transition',
      data: { circuit, from: 'closed', to: 'open' },
    });
  } finally {
    stream.close();
  }
}

/** 1 primary, 1 replica (linked), 3 sentinels; TLS everywhere: clients, replication, sentinel links. */
async function tlsSentinelSet(): Promise<{ primary: RedisServer; replica: RedisServer; sentinels: Sentinel[] }> {
  const primary = await startRedis({ tls: files });
  stoppers.push(primary);
  await cli(primary.port, 'CONFIG', 'SET', 'repl-diskless-sync-delay', '0');
  const replica = await startRedis({ tls: files, replicaOf: primary.port });
  stoppers.push(replica);
  const linked = await eventually(
    async () => (await cli(replica.port, 'INFO', 'replication')).includes('master_link_status:up'),
    15_000,
  );
  expect(linked).toBe(true);
  const sentinels = await Promise.all([1, 2, 3].map(() => startSentinel(MASTER, primary.port, { tls: files })));
  stoppers.push(...sentinels);
  const settled = await eventually(async () => {
    const infos = await Promise.all(sentinels.map((s) => masterInfo(s.port, MASTER)));
    return infos.every((i) => i.get('num-slaves') === '1' && i.get('num-other-sentinels') === '2');
  }, 15_000);
  expect(settled).toBe(true);
  return { primary, replica, sentinels };
}

const sentinelUrl = (sentinels: Sentinel[], query: string, auth = '') =>
  `rediss+sentinel://${auth}${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${MASTER}/0?${query}`;

describe('rediss://: TLS to one Redis, the certificate verified against tls_ca', () => {
  it('two hosts with a client certificate (mutual TLS): a trip on one is refused on the other within 1 s and streamed', async () => {
    const redis = await startRedis({ tls: files, password: 'tls-secret' });
    stoppers.push(redis);
    const [a, b] = await twoHosts(redis.url());
    await tripSeenOnOtherHost(a, b, 'plain-tls');
    expect((await request(`${a.url}/health`)).status).toBe(200);
  });

  it('without a client certificate, against a Redis that does not ask for one (tls-auth-clients no)', async () => {
    const redis = await startRedis({ tls: files, tlsAuthClients: 'no' });
    stoppers.push(redis);
    const host = await startServer(
      { CIRCUITLOG_STORE: `rediss://127.0.0.1:${redis.port}/0?${tlsQuery(files, { withClient: false })}` },
      { detached: true },
    );
    hosts.push(host);
    expect((await request(`${host.url}/circuits/one-way/failure`, 'POST')).json.failure_count).toBe(1);
  });
});

describe('rediss+sentinel://: TLS to the sentinels and the data nodes', () => {
  it('two hosts: a trip is seen across them and streamed; after kill -9 of the primary, Sentinel promotes the replica and both serve again without a restart', async () => {
    const { primary, replica, sentinels } = await tlsSentinelSet();
    const [a, b] = await twoHosts(sentinelUrl(sentinels, tlsQuery(files)));
    await tripSeenOnOtherHost(a, b, 'sentinel-tls');

    const stream = await openStream(`${b.url}/events/stream?circuit=after-failover`);
    try {
      const killedAt = Date.now();
      await primary.stop('SIGKILL');
      // The first write acknowledged after the kill (a success: it changes no state) ends the blackout.
      const resumed = await eventually(
        async () => (await request(`${a.url}/circuits/probe/success`, 'POST', 2_000)).status === 200,
        15_000,
      );
      expect(resumed).toBe(true);
      const blackoutMs = Date.now() - killedAt;
      process.stdout.write(
        `sentinel failover over TLS: host A acknowledges writes again ${blackoutMs} ms after the kill\n`,
      );
      expect(blackoutMs).toBeLessThan(DOWN_AFTER_MS + FAILOVER_TIMEOUT_MS + 2_000); // as test/e2e/redis-sentinel.test.ts
      const [, newPort] = (await cli(sentinels[0]!.port, 'SENTINEL', 'get-master-addr-by-name', MASTER)).split('\n');
      expect(Number(newPort)).toBe(replica.port);
      // Writes go through on the promoted replica, and B (its subscription re-made over TLS) sees them.
      const tripped = await eventually(
        async () => (await request(`${a.url}/circuits/after-failover/failure`, 'POST', 2_000)).status === 200,
        10_000,
      );
      expect(tripped).toBe(true);
      expect(await stream.next(5_000)).toMatchObject({
        event: 'transition',
        data: { circuit: 'after-failover', from: 'closed', to: 'open' },
      });
      const refused = await eventually(
        async () => (await request(`${b.url}/circuits/after-failover/allowed`)).status === 503,
        5_000,
      );
      expect(refused).toBe(true);
    } finally {
      stream.close();
    }
  }, 45_000);
});

describe('rediss+cluster://: TLS to every node of a Redis Cluster (tls-cluster yes)', () => {
  let cluster: RedisCluster | undefined;
  afterEach(async () => {
    await cluster?.stop();
    cluster = undefined;
  });

  it('two hosts on 3 primaries: a trip is seen across them and streamed', async () => {
    cluster = await startCluster(3, 0, [], files);
    const [a, b] = await twoHosts(cluster.url);
    await tripSeenOnOtherHost(a, b, 'cluster-tls');
    // Circuits of every shard (so on every primary) over TLS: one batch touching all of them.
    const outcomes = Array.from({ length: 64 }, (_, i) => ({ circuit: `spread-${i}`, success: true }));
    expect((await request(`${b.url}/outcomes`, 'POST', 10_000, { outcomes })).status).toBe(200);
  }, 45_000);
});

describe('TLS that cannot work stops the start with exit 2 within 10 s, naming CIRCUITLOG_STORE, no password', () => {
  const NOT_VERIFIED = /the TLS handshake failed: .*certificate.*checked against tls_ca/;

  it('rediss:// with the wrong CA, no tls_ca (Node’s bundled roots), a tls_servername the certificate does not name, no client certificate, and one Redis does not trust', async () => {
    const redis = await startRedis({ tls: files, password: 'tls-secret' });
    stoppers.push(redis);
    const base = `rediss://:tls-secret@127.0.0.1:${redis.port}/0`;
    const client = `tls_cert=${files.clientCert}&tls_key=${files.clientKey}`;
    for (const [store, why] of [
      [`${base}?${tlsQuery(files, { ca: files.otherCa })}`, NOT_VERIFIED],
      [`${base}?${client}`, NOT_VERIFIED],
      [
        `${base}?${tlsQuery(files)}&tls_servername=redis.example.com`,
        /Host: redis\.example\.com\. is not in the cert's altnames/,
      ],
      [
        `${base}?${tlsQuery(files, { withClient: false })}`,
        /this Redis asks for a client certificate: give tls_cert and tls_key/,
      ],
      [
        `${base}?tls_ca=${files.ca}&tls_cert=${files.strangerCert}&tls_key=${files.strangerKey}`,
        /Redis refused the client certificate \(tls_cert, tls_key\)/,
      ],
    ] as const) {
      const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: store });
      expect(code).toBe(2);
      expect(stderr).toMatch(
        /CIRCUITLOG_STORE: Redis at rediss:\/\/:\*\*\*@127\.0\.0\.1:\d+\/0\?.*: the TLS handshake failed/,
      );
      expect(stderr).toMatch(why);
      expect(stderr).not.toMatch(/tls-secret/);
    }
  });

  it('rediss+sentinel:// with the wrong CA', async () => {
    const primary = await startRedis({ tls: files });
    stoppers.push(primary);
    const sentinel = await startSentinel(MASTER, primary.port, { tls: files });
    stoppers.push(sentinel);
    const { code, stderr } = await refusedStart({
      CIRCUITLOG_STORE: sentinelUrl([sentinel], tlsQuery(files, { ca: files.otherCa }), ':tls-secret@'),
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /CIRCUITLOG_STORE: Redis at rediss\+sentinel:\/\/:\*\*\*@127\.0\.0\.1:\d+\/tls-m\/0\?.*: no sentinel could be used over TLS .*the TLS handshake failed/,
    );
    expect(stderr).toMatch(NOT_VERIFIED);
    expect(stderr).not.toMatch(/tls-secret/);
  });

  it('rediss+sentinel:// whose primary presents a certificate that does not name the host Sentinel names', async () => {
    // Sentinels and replicas check only the chain; circuitlog checks the primary's name too.
    const primary = await startRedis({
      tls: { ...files, serverCert: files.elsewhereCert, serverKey: files.elsewhereKey },
    });
    stoppers.push(primary);
    const sentinel = await startSentinel(MASTER, primary.port, { tls: files });
    stoppers.push(sentinel);
    const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: sentinelUrl([sentinel], tlsQuery(files)) });
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /CIRCUITLOG_STORE: Redis at rediss\+sentinel:.*: the TLS handshake failed: Hostname\/IP does not match certificate's altnames: IP: 127\.0\.0\.1 is not in the cert's list/,
    );
  });

  it('rediss+cluster:// with the wrong CA', async () => {
    const cluster = await startCluster(1, 0, [], files);
    stoppers.push(cluster);
    const store = cluster.url
      .replace('rediss+cluster://', 'rediss+cluster://:tls-secret@')
      .replace(`tls_ca=${encodeURIComponent(files.ca)}`, `tls_ca=${encodeURIComponent(files.otherCa)}`);
    const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: store });
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /CIRCUITLOG_STORE: Redis at rediss\+cluster:\/\/:\*\*\*@127\.0\.0\.1:\d+\/\?.*: the TLS handshake failed/,
    );
    expect(stderr).toMatch(NOT_VERIFIED);
    expect(stderr).not.toMatch(/tls-secret/);
  });

  it.each([
    [
      'a tls_* option on redis:// (no TLS)',
      'redis://127.0.0.1:6379/0?tls_ca=/ca.pem',
      /has the option 'tls_ca', which needs TLS: use the rediss scheme/,
    ],
    ['an unknown option', 'rediss://127.0.0.1:6379/0?tls_insecure=1', /has the unknown option 'tls_insecure'/],
    [
      'tls_cert without tls_key',
      'rediss+cluster://127.0.0.1:7000/?tls_cert=/c.pem',
      /has only one of tls_cert and tls_key/,
    ],
    [
      'a tls_ca that cannot be read',
      'rediss+sentinel://:tls-secret@127.0.0.1:26379/m?tls_ca=/nonexistent/ca.pem',
      /CIRCUITLOG_STORE: Redis at rediss\+sentinel:\/\/:\*\*\*@.*: tls_ca '\/nonexistent\/ca\.pem' cannot be read \(ENOENT\)/,
    ],
  ])('%s', async (_, store, message) => {
    const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: store });
    expect(code).toBe(2);
    expect(stderr).toMatch(/CIRCUITLOG_STORE: /);
    expect(stderr).toMatch(message);
    expect(stderr).not.toMatch(/tls-secret/);
  });
});
