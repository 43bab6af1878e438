/**
 * The nginx access-log parser (src/edge/nginx-log.ts) on datagrams a real nginx sent
 * (test/edge/fixtures/nginx-syslog.json, captured by capture-nginx-syslog.mjs beside it from
 * Debian's nginx 1.22.1, and util-linux's `logger` for RFC 5424), then on edge cases by hand.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { circuitNameProblem } from '../../src/domain/circuit-name.js';
import { callerProblem } from '../../src/domain/caller.js';
import { nginxOutcomes, syslogMessage, type LineVerdict } from '../../src/edge/nginx-log.js';

interface Captured {
  readonly case: string;
  readonly variant: string;
  readonly text: string;
  readonly base64: string;
}
const fixture = JSON.parse(readFileSync(new URL('./fixtures/nginx-syslog.json', import.meta.url), 'utf8')) as {
  captured: Captured[];
};
/** The datagram as nginx sent it, decoded as the intake decodes it. */
const datagram = (c: Captured) => Buffer.from(c.base64, 'base64').toString('utf8');
const NOW = Date.parse('2026-12-05T04:00:00Z'); // after every captured line
const msecOf = (message: string) => JSON.parse(message).msec as string;

/** The outcomes of a verdict that must have some. */
function itemsOf(v: LineVerdict) {
  if (v.kind !== 'outcomes') throw new Error(`expected outcomes, got ${JSON.stringify(v)}`);
  return v.items;
}

function outcomesOf(c: Captured): LineVerdict {
  const m = syslogMessage(datagram(c));
  if (m === null) throw new Error(`not syslog: ${c.text}`);
  return nginxOutcomes(m.message, NOW);
}

/** What each captured case reports, without `at` and `duration_ms` (checked apart). */
const EXPECTED: Record<string, unknown> = {
  '200': [{ circuit: 'payments', success: true, caller: 'checkout-7' }],
  '404': [{ circuit: 'payments', kind: 'rejected' }],
  '429': [{ circuit: 'payments', kind: 'throttled', retry_after_seconds: 7 }],
  // 2099 is further than the server's largest retry_after_seconds: capped to it (the policy caps it further).
  '503 retry-after date': [{ circuit: 'payments', kind: 'throttled', retry_after_seconds: 2_147_483_647 }],
  '503 without retry-after': [{ circuit: 'payments', success: false }],
  '500': [{ circuit: 'payments', success: false }],
  '502 then 200 (next upstream)': [
    { circuit: 'payments', success: false },
    { circuit: 'payments', success: true },
  ],
  '502, 502, 200 (next upstream twice)': [
    { circuit: 'payments', success: false },
    { circuit: 'payments', success: false },
    { circuit: 'payments', success: true },
  ],
  'three servers, the live one answers 500 (round robin)': [
    { circuit: 'payments', success: false },
    { circuit: 'payments', success: false },
  ],
  '504 timeout': [{ circuit: 'payments', success: false }],
  '502 : 200 (error_page redirect)': [
    { circuit: 'payments', success: false },
    { circuit: 'payments', success: true },
  ],
  'gate allows': [{ circuit: 'payments', success: true }],
  'gate refuses': { kind: 'none', reason: 'no_upstream' },
  'return 503 (no upstream)': { kind: 'none', reason: 'no_upstream' },
  'no circuit': { kind: 'none', reason: 'no_circuit' },
  'escaped name and caller': { kind: 'drop', reason: 'bad_circuit' },
  '503 with Retry-After, relayed': [
    { circuit: 'payments', kind: 'throttled', retry_after_seconds: 30, caller: 'relay-1' },
  ],
};

describe('nginx access log over syslog: real datagrams', () => {
  it('has every case from both nginx variants (RFC 3164, with and without the host name) and the RFC 5424 relay', () => {
    const variants = new Set(fixture.captured.map((c) => c.variant));
    expect([...variants].sort()).toEqual([
      'rfc3164 hostname local0.notice',
      'rfc3164 logger',
      'rfc3164 nohostname',
      'rfc5424 logger',
      'rfc5424 logger structured data',
    ]);
    for (const c of fixture.captured) expect(Object.keys(EXPECTED)).toContain(c.case);
  });

  it('reads the tag and the JSON line out of each header form', () => {
    for (const c of fixture.captured) {
      const m = syslogMessage(datagram(c));
      expect(m, c.text).not.toBeNull();
      expect(m!.tag).toBe('circuitlog');
      expect(m!.message.startsWith('{"v":1,')).toBe(true);
      expect(m!.message.endsWith('"}')).toBe(true);
    }
  });

  it.each(fixture.captured.map((c) => [`${c.case} (${c.variant})`, c] as const))('%s', (_, c) => {
    const verdict = outcomesOf(c);
    const expected = EXPECTED[c.case];
    if (!Array.isArray(expected)) {
      expect(verdict).toMatchObject(expected as object);
      return;
    }
    if (verdict.kind !== 'outcomes') throw new Error(`expected outcomes, got ${JSON.stringify(verdict)}`);
    const message = syslogMessage(datagram(c))!.message;
    const at = new Date(Math.round(Number(msecOf(message)) * 1000)).toISOString();
    const times = (JSON.parse(message).time as string).split(/ [,:] |, /).map((s) => Math.round(Number(s) * 1000));
    expect(verdict.items.map(({ at: _a, duration_ms: _d, ...rest }) => rest)).toEqual(expected);
    expect(verdict.items.map((i) => i.at)).toEqual(expected.map(() => at));
    expect(verdict.items.map((i) => i.duration_ms)).toEqual(times);
  });

  it('gives a timed-out attempt its time (proxy_read_timeout 1s) in ms', () => {
    const c = fixture.captured.find((x) => x.case === '504 timeout')!;
    const verdict = outcomesOf(c);
    if (verdict.kind !== 'outcomes') throw new Error('expected outcomes');
    expect(verdict.items[0]!.duration_ms).toBeGreaterThanOrEqual(1000);
    expect(verdict.items[0]!.duration_ms).toBeLessThan(2000);
  });

  it('drops a caller that breaks the rules (a header nginx copied as bytes, not UTF-8)', () => {
    const c = fixture.captured.find((x) => x.case === 'escaped name and caller')!;
    const message = syslogMessage(datagram(c))!.message.replace('pay ments\\"x', 'payments');
    expect(nginxOutcomes(message, NOW)).toMatchObject({ kind: 'drop', reason: 'bad_caller' });
  });
});

const line = (fields: Record<string, unknown>) =>
  JSON.stringify({
    v: 1,
    circuit: 'payments',
    caller: '',
    status: '200',
    time: '0.010',
    retry_after: '',
    msec: '1796443200.000',
    ...fields,
  });

describe('nginx access log lines by hand', () => {
  it("reads escape=default's `-` as nginx's no value: no upstream, no caller, no time", () => {
    expect(nginxOutcomes(line({ status: '-', time: '-' }), NOW)).toEqual({ kind: 'none', reason: 'no_upstream' });
    expect(nginxOutcomes(line({ caller: '-', time: '-' }), NOW)).toEqual({
      kind: 'outcomes',
      circuit: 'payments',
      items: [{ circuit: 'payments', success: true, at: '2026-12-05T04:00:00.000Z' }],
    });
    expect(nginxOutcomes(line({ circuit: '-' }), NOW)).toEqual({ kind: 'none', reason: 'no_circuit' });
  });

  it('skips an attempt nginx has no status for, and keeps the others', () => {
    const v = nginxOutcomes(line({ status: '502, -', time: '0.003, -' }), NOW);
    expect(v).toMatchObject({ kind: 'outcomes', items: [{ success: false, duration_ms: 3 }] });
    expect(nginxOutcomes(line({ status: '-, -', time: '-, -' }), NOW)).toEqual({ kind: 'none', reason: 'no_upstream' });
  });

  it('applies Retry-After to the last attempt only (nginx keeps the last response headers)', () => {
    const v = nginxOutcomes(line({ status: '503, 429', time: '0.001, 0.002', retry_after: '12' }), NOW);
    expect(v).toMatchObject({
      kind: 'outcomes',
      items: [
        { success: false, duration_ms: 1 },
        { kind: 'throttled', retry_after_seconds: 12, duration_ms: 2 },
      ],
    });
    expect(itemsOf(v)[0]).not.toHaveProperty('kind');
  });

  it('names 429 without Retry-After throttled with no seconds, and 4xx rejected', () => {
    const items = (status: string) => itemsOf(nginxOutcomes(line({ status }), NOW));
    expect(items('429')).toEqual([expect.objectContaining({ kind: 'throttled' })]);
    expect(items('429')[0]).not.toHaveProperty('retry_after_seconds');
    expect(items('403')).toEqual([expect.objectContaining({ kind: 'rejected' })]);
    expect(items('408')).toEqual([expect.objectContaining({ success: false })]);
    expect(items('101')).toEqual([expect.objectContaining({ success: true })]);
  });

  it('drops what is not the documented line, each with its reason', () => {
    const reason = (message: string) => (nginxOutcomes(message, NOW) as { reason?: string }).reason;
    expect(reason('GET / HTTP/1.1 200')).toBe('not_json');
    expect(reason('[1,2]')).toBe('not_our_format');
    expect(reason('null')).toBe('not_our_format');
    expect(reason(line({ v: 2 }))).toBe('bad_version');
    expect(reason(line({ v: '1' }))).toBe('bad_version');
    expect(reason(JSON.stringify({ v: 1, circuit: 'payments', msec: '1' }))).toBe('not_our_format');
    expect(reason(line({ status: 200 }))).toBe('not_our_format');
    expect(reason(line({ circuit: 'a/../b' }))).toBe('bad_circuit');
    expect(reason(line({ circuit: 'x'.repeat(201) }))).toBe('bad_circuit');
    expect(reason(line({ caller: 'a b' }))).toBe('bad_caller');
    expect(reason(line({ status: '600' }))).toBe('bad_status');
    expect(reason(line({ status: '099' }))).toBe('bad_status');
    expect(reason(line({ status: '2000' }))).toBe('bad_status');
    expect(reason(line({ status: 'x', time: '' }))).toBe('bad_status');
    expect(reason(line({ status: Array(101).fill('502').join(', '), time: '' }))).toBe('bad_status');
    expect(reason(line({ status: '502, 200', time: '0.001' }))).toBe('bad_time');
    expect(reason(line({ time: 'soon' }))).toBe('bad_time');
    expect(reason(line({ time: '86400.001' }))).toBe('bad_time');
    expect(reason(line({ msec: 'yesterday' }))).toBe('bad_time');
    // More than 60 s ahead: the server would refuse the whole batch it went into.
    expect(reason(line({ msec: String((NOW + 61_000) / 1000) }))).toBe('bad_time');
    expect(reason(line({ msec: String((NOW + 59_000) / 1000) }))).toBeUndefined();
  });

  it('takes now for a line without msec', () => {
    expect(nginxOutcomes(line({ msec: '' }), NOW)).toMatchObject({ items: [{ at: new Date(NOW).toISOString() }] });
  });
});

describe('syslog headers by hand', () => {
  it('reads RFC 5424 with no structured data, escaped brackets in it, a BOM, and an empty message', () => {
    expect(syslogMessage('<14>1 2026-12-05T03:00:00Z h app - - - {"v":1}')).toEqual({ tag: 'app', message: '{"v":1}' });
    expect(syslogMessage('<14>1 - - - - - [a@1 x="q\\"]"][b@2] {"v":1}')).toEqual({ tag: null, message: '{"v":1}' });
    expect(syslogMessage('<14>1 - - app - - - \uFEFF{"v":1}')).toEqual({ tag: 'app', message: '{"v":1}' });
    expect(syslogMessage('<14>1 - - app - - -')).toEqual({ tag: 'app', message: '' });
  });

  it('reads RFC 3164 with a pid after the tag', () => {
    expect(syslogMessage('<190>Dec 15 03:10:42 web-1 nginx[123]: {"v":1}')).toEqual({
      tag: 'nginx',
      message: '{"v":1}',
    });
  });

  it('refuses what is not syslog', () => {
    for (const d of [
      '',
      '{"v":1}',
      '<>Dec  5 03:10:42 t: x',
      '<192>Dec  5 03:10:42 t: x',
      '<012>Dec  5 03:10:42 t: x',
      '<14>Dec  5 03:10:42',
      '<14>1 - - - - - [unclosed x="]"',
      '<14>1 - - - - - [a@1]x',
      '<14>1 - - - - - x',
    ])
      expect(syslogMessage(d), d).toBeNull();
  });
});

describe('nginx access log lines: random input', () => {
  const fields = fc.record({
    v: fc.oneof(fc.constant(1), fc.anything()),
    circuit: fc.oneof(fc.string(), fc.constantFrom('payments', 'a/b', '', '-', '../x')),
    caller: fc.oneof(fc.string(), fc.constantFrom('', '-', 'svc-1')),
    status: fc.oneof(
      fc.string(),
      fc
        .array(fc.oneof(fc.integer({ min: 0, max: 999 }).map(String), fc.constant('-')), { maxLength: 5 })
        .map((a) => a.join(', ')),
    ),
    time: fc.oneof(
      fc.string(),
      fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }).map(String)).map((a) => a.join(', ')),
    ),
    retry_after: fc.oneof(fc.string(), fc.nat().map(String)),
    msec: fc.oneof(
      fc.string(),
      fc.double({ min: 0, max: 4e9, noNaN: true }).map((n) => n.toFixed(3)),
    ),
  });

  it('never throws, and every outcome it gives has a valid name and caller and an `at` the server takes', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fields.map((f) => JSON.stringify(f)),
          fc.string(),
          fc.json(),
        ),
        (message) => {
          const v = nginxOutcomes(message, NOW);
          if (v.kind !== 'outcomes') return;
          for (const item of v.items) {
            expect(circuitNameProblem(item.circuit)).toBeNull();
            if (item.caller !== undefined) expect(callerProblem(item.caller)).toBeNull();
            expect(Date.parse(item.at!) - NOW).toBeLessThanOrEqual(60_000);
            expect(item.success === undefined).toBe(item.kind !== undefined);
            if (item.duration_ms !== undefined) expect(item.duration_ms).toBeLessThanOrEqual(86_400_000);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
