import { it } from 'vitest';
import { startRedis } from '../redis/redis-server.js';
import { startSentinel } from '../redis/sentinel.js';
import { startCluster } from '../redis/cluster.js';
import { tlsFiles, tlsQuery } from '../redis/tls.js';
import { refusedStart } from '../refused-start.js';
it('peek', async () => {
  const files = await tlsFiles();
  const redis = await startRedis({ tls: files, password: 'pw' });
  const base = `rediss://:pw@127.0.0.1:${redis.port}/0`;
  for (const store of [`${base}?${tlsQuery(files, { ca: files.otherCa })}`, `${base}?tls_cert=${files.clientCert}&tls_key=${files.clientKey}`, `${base}?${tlsQuery(files)}&tls_servername=redis.example.com`, `${base}?${tlsQuery(files, {withClient:false})}`, `${base}?tls_ca=${files.clientKey}`, `${base}?tls_ca=${files.ca}&tls_cert=${files.clientCert}&tls_key=${files.serverKey}`]) {
    const r = await refusedStart({ CIRCUITLOG_STORE: store }).catch((e) => ({ code: -1, stderr: String(e), ms: 0 }));
    console.log(r.code, r.ms, r.stderr);
  }
  const s = await startSentinel('m', redis.port, { tls: files });
  const r = await refusedStart({ CIRCUITLOG_STORE: `rediss+sentinel://127.0.0.1:${s.port}/m?${tlsQuery(files, { ca: files.otherCa })}` });
  console.log(r.code, r.ms, r.stderr);
  const c = await startCluster(1, 0, [], files);
  const r2 = await refusedStart({ CIRCUITLOG_STORE: c.url.replace(encodeURIComponent(files.ca), encodeURIComponent(files.otherCa)) });
  console.log(r2.code, r2.ms, r2.stderr);
  await s.stop(); await redis.stop('SIGKILL'); await c.stop();
}, 60000);
