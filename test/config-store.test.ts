import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig } from '../src/config.js';
import { parseClusterUrl } from '../src/store/redis/cluster-url.js';
import { parseSentinelUrl } from '../src/store/redis/sentinel-url.js';

describe('CIRCUITLOG_STORE', () => {
  it('defaults to SQLite at CIRCUITLOG_DB', () => {
    expect(loadConfig({}, []).store).toEqual({ kind: 'sqlite', path: './data/circuitlog.db' });
    expect(loadConfig({ CIRCUITLOG_DB: '/tmp/x.db' }, []).store).toEqual({ kind: 'sqlite', path: '/tmp/x.db' });
  });

  it('wins over CIRCUITLOG_DB, for sqlite: and redis:// alike', () => {
    const sqlite = loadConfig({ CIRCUITLOG_DB: '/tmp/x.db', CIRCUITLOG_STORE: 'sqlite:/tmp/y.db' }, []);
    expect(sqlite.store).toEqual({ kind: 'sqlite', path: '/tmp/y.db' });
    expect(sqlite.dbPath).toBe('/tmp/y.db');
    const redis = loadConfig({ CIRCUITLOG_DB: '/tmp/x.db', CIRCUITLOG_STORE: 'rediss://u:p@cache.example:6380/2' }, []);
    expect(redis.store).toEqual({ kind: 'redis', url: 'rediss://u:p@cache.example:6380/2', timeoutMs: 1_000 });
  });

  it('takes the per-command timeout from CIRCUITLOG_STORE_TIMEOUT_MS, 50 to 10000 ms', () => {
    const env = { CIRCUITLOG_STORE: 'redis://127.0.0.1' };
    expect(loadConfig({ ...env, CIRCUITLOG_STORE_TIMEOUT_MS: '2000' }, []).store).toMatchObject({ timeoutMs: 2_000 });
    for (const bad of ['0', '49', '10001', '1.5', 'soon']) {
      expect(() => loadConfig({ ...env, CIRCUITLOG_STORE_TIMEOUT_MS: bad }, [])).toThrow(/CIRCUITLOG_STORE_TIMEOUT_MS/);
    }
  });

  it('refuses a bad CIRCUITLOG_STORE_TIMEOUT_MS on SQLite too (every bad value stops the start)', () => {
    for (const env of [{}, { CIRCUITLOG_STORE: 'sqlite:/tmp/y.db' }, { CIRCUITLOG_DB: '/tmp/x.db' }]) {
      for (const bad of ['5s', '0', '10001']) {
        expect(() => loadConfig({ ...env, CIRCUITLOG_STORE_TIMEOUT_MS: bad }, [])).toThrow(
          `CIRCUITLOG_STORE_TIMEOUT_MS: must be a whole number of milliseconds from 50 to 10000, got '${bad}'`,
        );
      }
      expect(loadConfig({ ...env, CIRCUITLOG_STORE_TIMEOUT_MS: '2000' }, []).store.kind).toBe('sqlite');
    }
  });

  it('refuses a URL with no host, an unknown scheme or a path that is no database number, naming the variable and hiding the password', () => {
    for (const bad of [
      'redis://',
      'redis:///3',
      'http://127.0.0.1',
      'redis://h/db1',
      'redis://h:6379/0?x=1',
      'sqlite:',
      'nonsense',
    ]) {
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad }, [])).toThrow(/^CIRCUITLOG_STORE: /);
    }
    expect(() => loadConfig({ CIRCUITLOG_STORE: 'ftp://user:hunter2@h' }, [])).toThrow(/ftp:\/\/user:\*\*\*@h/);
  });

  it('takes redis+sentinel:// (and rediss+sentinel://) with sentinels, a master name and a database, refusing malformed ones without the password', () => {
    const url = 'rediss+sentinel://u:hunter2@s1:26379,[::1]:26380,s3/mymaster/2';
    expect(loadConfig({ CIRCUITLOG_STORE: url }, []).store).toEqual({ kind: 'redis', url, timeoutMs: 1_000 });
    const described = describeConfig(loadConfig({ CIRCUITLOG_STORE: url }, []));
    expect(described).toMatchObject({ store: 'rediss+sentinel://u:***@s1:26379,[::1]:26380,s3/mymaster/2' });
    for (const bad of [
      'redis+sentinel://s1:26379',
      'redis+sentinel://s1:26379/',
      'redis+sentinel://:hunter2@s1:0/m',
      'redis+sentinel://s1,/m',
      'redis+sentinel://s1/m/db',
      'redis+sentinel://s1/m/0?x=1',
    ]) {
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad }, [])).toThrow(/^CIRCUITLOG_STORE: '/);
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad }, [])).not.toThrow(/hunter2/);
    }
  });

  it('takes redis+cluster:// (and rediss+cluster://) with host:port nodes, refusing malformed ones without the password', () => {
    const url = 'rediss+cluster://u:hunter2@n1:7000,[::1]:7001,n3:7002';
    expect(loadConfig({ CIRCUITLOG_STORE: url }, []).store).toEqual({ kind: 'redis', url, timeoutMs: 1_000 });
    expect(describeConfig(loadConfig({ CIRCUITLOG_STORE: url }, []))).toMatchObject({
      store: 'rediss+cluster://u:***@n1:7000,[::1]:7001,n3:7002',
    });
    for (const bad of [
      'redis+cluster://',
      'redis+cluster://:hunter2@n1',
      'redis+cluster://n1:7000/0',
      'redis+cluster://n1:7000?x=1',
      'redis+cluster://n1:0',
      'redis+cluster://n1:7000,',
    ]) {
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad }, [])).toThrow(/^CIRCUITLOG_STORE: '/);
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad }, [])).not.toThrow(/hunter2/);
    }
  });

  it('takes the tls_* options (tls_ca, tls_cert with tls_key, tls_servername) on rediss://, rediss+sentinel:// and rediss+cluster:// only', () => {
    const tls = 'tls_ca=/etc/redis/ca.pem&tls_cert=/etc/c.pem&tls_key=/etc/c.key&tls_servername=redis.internal';
    for (const url of [
      `rediss://:hunter2@h:6380/1?${tls}`,
      `rediss+sentinel://:hunter2@s1,s2/m/0?sentinel_password=x&${tls}`,
      `rediss+cluster://:hunter2@n1:7000,n2:7001/?${tls}`,
      'rediss+cluster://n1:7000?tls_ca=/ca.pem',
    ])
      expect(loadConfig({ CIRCUITLOG_STORE: url }, []).store).toEqual({ kind: 'redis', url, timeoutMs: 1_000 });
    expect(parseSentinelUrl(`rediss+sentinel://s1/m?${tls}`)).toMatchObject({
      tlsPaths: { ca: '/etc/redis/ca.pem', cert: '/etc/c.pem', key: '/etc/c.key', servername: 'redis.internal' },
    });
    expect(parseClusterUrl('rediss+cluster://n1:7000/?tls_ca=%2Fca.pem')).toMatchObject({
      tlsPaths: { ca: '/ca.pem' },
    });
    for (const [bad, why] of [
      ['redis://:hunter2@h/0?tls_ca=/ca.pem', "has the option 'tls_ca', which needs TLS: use the rediss scheme"],
      ['redis+sentinel://:hunter2@s1/m?tls_ca=/ca.pem', "has the option 'tls_ca', which needs TLS"],
      ['redis+cluster://:hunter2@n1:7000/?tls_servername=x', "has the option 'tls_servername', which needs TLS"],
      ['rediss://:hunter2@h/0?tls_cert=/c.pem', 'has only one of tls_cert and tls_key'],
      ['rediss+sentinel://:hunter2@s1/m?tls_key=/c.key', 'has only one of tls_cert and tls_key'],
      ['rediss://:hunter2@h/0?tls_ca=', "has an empty 'tls_ca'"],
      ['rediss://:hunter2@h/0?tls_ca=/a&tls_ca=/b', "has the option 'tls_ca' more than once"],
      ['rediss://:hunter2@h/0?tls_verify=no', "has the unknown option 'tls_verify'"],
      ['rediss+sentinel://:hunter2@s1/m?rejectUnauthorized=false', "has the unknown option 'rejectUnauthorized'"],
      ['rediss+cluster://:hunter2@n1:7000/?tls_insecure=1', "has the unknown option 'tls_insecure'"],
    ]) {
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad! }, [])).toThrow(/^CIRCUITLOG_STORE: '/);
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad! }, [])).toThrow(why!);
      expect(() => loadConfig({ CIRCUITLOG_STORE: bad! }, [])).not.toThrow(/hunter2/);
    }
  });

  it('logs where the state lives without the password', () => {
    const described = describeConfig(loadConfig({ CIRCUITLOG_STORE: 'redis://user:hunter2@h:6379/1' }, []));
    expect(described).toMatchObject({ store: 'redis://user:***@h:6379/1', db: null });
    expect(JSON.stringify(described)).not.toContain('hunter2');
  });

  it('takes the proxy choice on a storage outage: fail_open (default) or refuse', () => {
    expect(loadConfig({}, []).proxyOnStorageOutage).toBe('fail_open');
    expect(loadConfig({ CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE: 'REFUSE' }, []).proxyOnStorageOutage).toBe('refuse');
    expect(() => loadConfig({ CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE: 'maybe' }, [])).toThrow(
      /CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE/,
    );
  });
});
