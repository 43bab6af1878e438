import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, describeConfig, loadConfig } from '../../src/config.js';
import { entry } from './credentials-app.js';

function files() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-config-creds-'));
  const write = (name: string, text: string) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  return { dir, write };
}

const creds = (id: string) => JSON.stringify({ credentials: [entry(id, `${id}-token-0123456789abcdef`, ['read'])] });

describe('where the credentials file comes from', () => {
  it('is the config file auth.credentials_file, and CIRCUITLOG_CREDENTIALS wins over it', () => {
    const { write } = files();
    const fromFile = write('file.json', creds('from-file'));
    const fromEnv = write('env.json', creds('from-env'));
    const config = write('config.yaml', `auth:\n  credentials_file: ${fromFile}\n`);
    const byFile = loadConfig({ CIRCUITLOG_CONFIG: config }, []);
    expect(byFile.credentials?.entries.map((e) => e.id)).toEqual(['from-file']);
    const byEnv = loadConfig({ CIRCUITLOG_CONFIG: config, CIRCUITLOG_CREDENTIALS: fromEnv }, []);
    expect(byEnv.credentials).toMatchObject({ path: fromEnv, entries: [{ id: 'from-env' }] });
    expect(describeConfig(byEnv).credentials).toBe(`1 from ${fromEnv}`);
    expect(loadConfig({}, []).credentials).toBeUndefined();
  });

  it('stops the start on a missing or bad file, naming the setting and the problem', () => {
    const { dir, write } = files();
    const missing = path.join(dir, 'nope.yaml');
    expect(() => loadConfig({ CIRCUITLOG_CREDENTIALS: missing }, [])).toThrow(ConfigError);
    expect(() => loadConfig({ CIRCUITLOG_CREDENTIALS: missing }, [])).toThrow(
      `CIRCUITLOG_CREDENTIALS: cannot read '${missing}'`,
    );
    const config = write(
      'config.yaml',
      `auth:\n  credentials_file: ${write('bad.yaml', 'credentials:\n  - id: a\n')}\n`,
    );
    expect(() => loadConfig({ CIRCUITLOG_CONFIG: config }, [])).toThrow(
      /^auth\.credentials_file: .*bad\.yaml: credentials\.0\.token_sha256: /,
    );
  });
});
