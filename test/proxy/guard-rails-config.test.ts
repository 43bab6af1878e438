import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig, parseConfigText } from '../../src/config.js';
import { refusedStart } from '../refused-start.js';
import { tempDir } from '../server-process.js';

const upstream = (extra = '', top = '') =>
  `${top}local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:1" }]\n${extra}`;

describe('guard-rail config keys', () => {
  it('defaults to today: every node may be ejected, no panic mode', () => {
    const users = parseConfigText(upstream(), 'f').upstreams.users!;
    expect(users.max_ejection_percent).toBe(100);
    expect(users.panic_threshold_percent).toBe(0);
  });

  it('takes both percentages from the upstream block', () => {
    const users = parseConfigText(upstream('    max_ejection_percent: 50\n    panic_threshold_percent: 30\n'), 'f')
      .upstreams.users!;
    expect(users).toMatchObject({ max_ejection_percent: 50, panic_threshold_percent: 30 });
  });

  it('refuses percentages outside 0 to 100 or not whole, naming the key', () => {
    for (const [key, value] of [
      ['max_ejection_percent', '101'],
      ['max_ejection_percent', '-1'],
      ['panic_threshold_percent', '12.5'],
      ['panic_threshold_percent', '"half"'],
    ]) {
      const text = upstream(`    ${key}: ${value}\n`);
      expect(() => parseConfigText(text, 'f')).toThrow(ConfigError);
      expect(() => parseConfigText(text, 'f')).toThrow(new RegExp(`^f upstreams\\.users\\.${key}: `));
    }
  });

  it('names the proxy <hostname>:<port> as its caller by default, and says so in the start-up line', () => {
    const config = loadConfig({ PORT: '8123' }, []);
    expect(config.instanceId).toBe(`${os.hostname()}:8123`);
    expect(describeConfig(config).instance_id).toBe(`${os.hostname()}:8123`);
  });

  it('takes instance_id from the config file', () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.yaml');
    fs.writeFileSync(file, upstream('', 'instance_id: edge-7.dc1/a\n'));
    expect(loadConfig({ CIRCUITLOG_CONFIG: file }, []).instanceId).toBe('edge-7.dc1/a');
  });

  it('refuses an instance_id that is no valid caller id, naming the key', () => {
    for (const bad of ['""', '"two words"', `"${'x'.repeat(129)}"`, '"é"']) {
      expect(() => parseConfigText(upstream('', `instance_id: ${bad}\n`), 'f')).toThrow(/^f instance_id: /);
    }
  });

  it('stops the server at start with exit code 2 and the key named', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'c.yaml');
    fs.writeFileSync(file, upstream('    max_ejection_percent: 150\n'));
    const { code, stderr } = await refusedStart({
      CIRCUITLOG_CONFIG: file,
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    });
    expect(code).toBe(2);
    expect(stderr).toContain('upstreams.users.max_ejection_percent: Too big: expected number to be <=100');
  });
});
