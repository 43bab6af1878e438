import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { credentialSource } from '../../src/auth/credential-source.js';
import { identityOfEntry, parseCredentials } from '../../src/auth/credentials.js';
import { entry } from './credentials-app.js';

const OLD = 'old-token-0123456789abcdef';
const NEW = 'new-token-0123456789abcdef';
const KEPT = 'kept-token-0123456789abcdef';

/** A logger into `lines`; `logged(event)` resolves at the first line with that event. */
function logLines() {
  const lines: Record<string, unknown>[] = [];
  const waiting: { event: string; resolve: () => void }[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as Record<string, unknown>;
        lines.push(entry);
        for (const w of waiting.splice(0))
          if (w.event === entry.event) w.resolve();
          else waiting.push(w);
      },
    },
  );
  const logged = (event: string) => new Promise<void>((resolve) => waiting.push({ event, resolve }));
  return { lines, logger, logged };
}

const fileText = (entries: ReturnType<typeof entry>[]) => JSON.stringify({ credentials: entries });

/** Replace the file as a deployer does: write a temp file beside it, rename it over. */
function replace(file: string, text: string) {
  const temp = `${file}.tmp-${process.hrtime.bigint()}`;
  fs.writeFileSync(temp, text);
  fs.renameSync(temp, file);
}

const sources: { close(): void }[] = [];
afterEach(() => {
  for (const s of sources.splice(0)) s.close();
});

function setUp(initial = [entry('kept', KEPT, ['read']), entry('old', OLD, ['read'])]) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-creds-'));
  const file = path.join(dir, 'credentials.json');
  fs.writeFileSync(file, fileText(initial));
  const { lines, logger, logged } = logLines();
  const reloads: (readonly string[])[] = [];
  let notify: () => void = () => {};
  const source = credentialSource({
    path: file,
    entries: parseCredentials(fs.readFileSync(file, 'utf8'), file),
    logger,
    debounceMs: 20,
    onReload: (ids) => {
      reloads.push(ids);
      notify();
    },
  });
  sources.push(source);
  const nextReload = () => new Promise<void>((resolve) => (notify = resolve));
  const who = (token: string) => source.authenticate(`Bearer ${token}`)?.id ?? null;
  return { file, source, lines, reloads, nextReload, who, logged };
}

describe('the credentials in force', () => {
  it('follow the file when it is replaced on disk, and tell onReload the ids', async () => {
    const t = setUp();
    t.source.watch();
    expect([t.who(OLD), t.who(NEW)]).toEqual(['old', null]);
    const reloaded = t.nextReload();
    replace(t.file, fileText([entry('kept', KEPT, ['read']), entry('new', NEW, ['report'])]));
    await reloaded;
    expect([t.who(KEPT), t.who(OLD), t.who(NEW)]).toEqual(['kept', null, 'new']);
    expect(t.reloads).toEqual([['kept', 'new']]);
    expect(t.lines.filter((l) => l.event === 'credentials_reloaded')).toHaveLength(1);
  });

  it('reads a change while the database beside the file keeps writing, and reloads nothing for those writes', async () => {
    const t = setUp();
    t.source.watch();
    const wal = path.join(path.dirname(t.file), 'db.sqlite-wal');
    let writing = true;
    const writes = (async () => {
      const stopAt = Date.now() + 3_000;
      while (writing && Date.now() < stopAt) {
        fs.appendFileSync(wal, 'a write beside the file\n');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return writing; // still writing when it gave up: the change was never read meanwhile
    })();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const reloaded = t.nextReload();
    replace(t.file, fileText([entry('kept', KEPT, ['read']), entry('new', NEW, ['report'])]));
    await Promise.race([reloaded, writes]);
    writing = false;
    expect(await writes).toBe(false);
    expect(t.reloads).toEqual([['kept', 'new']]);
    expect(t.lines.filter((l) => l.event === 'credentials_reloaded')).toHaveLength(1);
  });

  it('answers a SIGHUP over an unchanged file in the log, without a reload to audit', () => {
    const t = setUp();
    expect(t.source.reload('signal')).toBe(true);
    expect(t.reloads).toEqual([]);
    expect(t.lines.filter((l) => l.event === 'credentials_reloaded')).toMatchObject([{ changed: false }]);
    expect([t.who(KEPT), t.who(OLD)]).toEqual(['kept', 'old']);
  });

  it('keeps the previous set when the new file is bad, with one error line naming the problem', async () => {
    const t = setUp();
    t.source.watch();
    const bad = JSON.stringify({ credentials: [{ id: 'x', token_sha256: 'abc', scopes: ['read'] }] });
    const failed = t.logged('credentials_reload_failed');
    replace(t.file, bad);
    await failed;
    const errors = t.lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toContain('credentials.0.token_sha256: the hex SHA-256 of the token (64 hex digits)');
    expect([t.who(KEPT), t.who(OLD)]).toEqual(['kept', 'old']);
    expect(t.reloads).toEqual([]);
  });

  it('reads the file again on a signal (SIGHUP)', () => {
    const t = setUp();
    fs.writeFileSync(t.file, fileText([entry('new', NEW, ['read'])]));
    expect(t.source.reload('signal')).toBe(true);
    expect([t.who(OLD), t.who(NEW)]).toEqual([null, 'new']);
  });

  it('keeps CIRCUITLOG_TOKEN as the credential token across reloads', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-creds-'));
    const file = path.join(dir, 'credentials.yaml');
    fs.writeFileSync(
      file,
      `credentials:\n  - id: old\n    token_sha256: ${entry('old', OLD, ['read']).token_sha256}\n    scopes: [read]\n`,
    );
    const token = 'the-circuitlog-token-0123456789';
    const source = credentialSource({
      path: file,
      entries: parseCredentials(fs.readFileSync(file, 'utf8'), file),
      token,
      logger: pino({ level: 'silent' }),
    });
    fs.writeFileSync(file, 'credentials: []\n');
    source.reload('signal');
    expect(source.authenticate(`Bearer ${token}`)).toMatchObject({ id: 'token', kind: 'token' });
    expect(source.authenticate(`Bearer ${OLD}`)).toBeNull();
  });
});

describe('the credentials file', () => {
  it('names the problem of a bad entry', () => {
    const bad = (text: string) => () => parseCredentials(text, 'creds.yaml');
    expect(bad('credentials:\n  - id: a\n    token_sha256: x\n    scopes: [read]\n')).toThrow(
      'creds.yaml: credentials.0.token_sha256: the hex SHA-256 of the token (64 hex digits)',
    );
    const hash = 'a'.repeat(64);
    expect(bad(`credentials:\n  - id: a\n    token_sha256: ${hash}\n    scopes: [fly]\n`)).toThrow(
      'credentials.0.scopes.0',
    );
    expect(
      bad(`credentials:\n  - id: a\n    token_sha256: ${hash}\n    scopes: [read]\n    circuits: ['a*b']\n`),
    ).toThrow("credentials.0.circuits.0: a name pattern: not empty, '*' only as its last character");
    expect(bad(`credentials:\n  - id: a\n    token_sha256: ${hash}\n    scopes: [read]\n    token: plain\n`)).toThrow(
      'token',
    );
    expect(bad('credentials: [')).toThrow('creds.yaml: not valid YAML or JSON');
  });

  it('gives an entry its default callers, every circuit and no bound unless set', () => {
    const [e] = parseCredentials(JSON.stringify({ credentials: [entry('checkout', OLD, ['report'])] }), 'f');
    expect(identityOfEntry(e!)).toMatchObject({
      id: 'checkout',
      kind: 'credential',
      callers: ['checkout', 'checkout/*'],
      circuits: null,
      maxNewCircuits: null,
    });
  });
});
