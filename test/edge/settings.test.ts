import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { edgeSettings } from '../../src/edge/settings.js';
import { tempDir } from '../server-process.js';

// The edge agent's settings (docs/gateways.md#running-the-agent): the flags over the config file's
// `edge:` section, every value checked, loopback by default.
describe('edgeSettings', () => {
  it('defaults to loopback, fail open, a 10 ms flush, no syslog', () => {
    const s = edgeSettings(['--server', 'http://127.0.0.1:8080'], {});
    expect(s).toMatchObject({
      server: 'http://127.0.0.1:8080',
      listen: '127.0.0.1:8090',
      fail_open: true,
      flush_ms: 10,
      gate: { circuit_from: 'path', caller_header: 'x-circuitlog-caller', form: 'auto' },
      syslog: { listen: null, create: [] },
      bodyLimitBytes: 16 * 1024,
    });
  });

  it('reads the config file section and lets the flags win over it', () => {
    const dir = tempDir();
    const file = path.join(dir, 'edge.yaml');
    fs.writeFileSync(
      file,
      'api_body_limit_bytes: 65536\nedge:\n  server: http://a:1\n  fail_open: false\n  gate:\n    circuit_from: {header: X-Circuit}\n  syslog:\n    create: ["web/*"]\n',
    );
    const s = edgeSettings(['--config', file, '--server', 'http://b:2', '--syslog', '127.0.0.1:0'], {});
    expect(s).toMatchObject({
      server: 'http://b:2',
      fail_open: false,
      gate: { circuit_from: { header: 'x-circuit' } },
      syslog: { listen: '127.0.0.1:0', create: ['web/*'] },
      bodyLimitBytes: 65_536, // the server's own limit, from the same file
    });
    expect(edgeSettings(['--fail-open', 'true'], { CIRCUITLOG_CONFIG: file })).toMatchObject({ fail_open: true });
  });

  it('refuses what it cannot use, naming it', () => {
    expect(() => edgeSettings([], {})).toThrow(/--server/);
    expect(() => edgeSettings(['--server', 'not a url'], {})).toThrow(/server/);
    expect(() => edgeSettings(['--server', 'http://a:1', '--listen', 'nowhere'], {})).toThrow(/listen/);
    expect(() => edgeSettings(['--server', 'http://a:1', '--fail-open', 'maybe'], {})).toThrow(/fail-open/);
    expect(() => edgeSettings(['--server', 'http://a:1', '--bogus'], {})).toThrow(/bogus/);
    const dir = tempDir();
    const file = path.join(dir, 'edge.yaml');
    fs.writeFileSync(file, 'edge:\n  gate:\n    circuit_from: {path_prefix: {"/api/": "bad name"}}\n');
    expect(() => edgeSettings(['--server', 'http://a:1', '--config', file], {})).toThrow(/circuit name/);
  });
});
