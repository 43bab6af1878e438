/**
 * The agent's syslog intake (src/edge/syslog.ts) on a real UDP socket on 127.0.0.1: datagrams
 * a real nginx sent (test/edge/fixtures/nginx-syslog.json) become outcomes for the sink; noise
 * is counted and dropped with one rate-limited log line; unknown circuits are asked about once
 * per ttl and never reach the sink. Every wait is on the intake's counts (vi.waitFor), not a sleep.
 */
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { OutcomeItem } from '../../src/client/transport.js';
import { callerProblem } from '../../src/domain/caller.js';
import { circuitNameProblem } from '../../src/domain/circuit-name.js';
import { DropCounter, type EdgeLogger } from '../../src/edge/edge-types.js';
import { KnownCircuits, MAX_KNOWN_NAMES, MAX_QUESTIONS } from '../../src/edge/known-circuits.js';
import {
  MAX_WAITING_LINES,
  parseListen,
  RECEIVE_BUFFER_BYTES,
  type SyslogIntake,
  type SyslogIntakeOptions,
  startSyslogIntake,
} from '../../src/edge/syslog.js';

const fixture = JSON.parse(readFileSync(new URL('./fixtures/nginx-syslog.json', import.meta.url), 'utf8')) as {
  captured: { case: string; variant: string; base64: string }[];
};
const nginxSent = fixture.captured.map((c) => Buffer.from(c.base64, 'base64'));
const NOW = Date.parse('2026-12-05T04:00:00Z');

/** A syslog datagram as nginx sends it (nohostname), around one log line. */
const datagram = (fields: Record<string, unknown>) =>
  Buffer.from(
    `<190>Dec  5 03:10:42 circuitlog: ${JSON.stringify({
      v: 1,
      circuit: 'payments',
      caller: '',
      status: '200',
      time: '0.010',
      retry_after: '',
      msec: '1796443200.000',
      ...fields,
    })}`,
  );

const logger = () => ({ info: vi.fn(), warn: vi.fn() }) satisfies EdgeLogger;

let sender: dgram.Socket;
beforeAll(() => {
  sender = dgram.createSocket('udp4');
  return () => sender.close();
});

const started: SyslogIntake[] = [];
const counters: DropCounter[] = [];
afterEach(async () => {
  for (const d of counters.splice(0)) d.stop();
  await Promise.all(started.splice(0).map((i) => i.close()));
});

interface Harness {
  intake: SyslogIntake;
  accepted: OutcomeItem[][];
  log: ReturnType<typeof logger>;
  drops: DropCounter;
  /** Sends the datagrams (a few at a time, so none is lost to a full receive buffer) and waits until all were read. */
  send(datagrams: readonly Buffer[]): Promise<void>;
}

async function start(options: Partial<SyslogIntakeOptions> & { clock?: () => number } = {}): Promise<Harness> {
  const accepted: OutcomeItem[][] = [];
  const log = logger();
  const clock = options.clock ?? (() => NOW);
  const drops = new DropCounter(log, clock);
  counters.push(drops);
  const intake = await startSyslogIntake({
    listen: '127.0.0.1:0',
    maxLineBytes: 8_192,
    sink: {
      accept: (items) => {
        accepted.push([...items]);
        return true;
      },
    },
    known: (name) => name === 'payments',
    drops,
    ...options,
    clock,
  });
  started.push(intake);
  const send = async (datagrams: readonly Buffer[]) => {
    for (let i = 0; i < datagrams.length; i += 50) {
      const before = intake.counts().received;
      const chunk = datagrams.slice(i, i + 50);
      await Promise.all(
        chunk.map(
          (d) => new Promise<void>((ok, ko) => sender.send(d, intake.port, '127.0.0.1', (e) => (e ? ko(e) : ok()))),
        ),
      );
      await vi.waitFor(() => expect(intake.counts().received).toBe(before + chunk.length), { timeout: 10_000 });
    }
  };
  return { intake, accepted, log, drops, send };
}

describe('syslog intake: what a real nginx sent', () => {
  it('turns each captured datagram into outcomes for the sink, skips lines with no upstream, drops the bad name', async () => {
    const h = await start();
    await h.send(nginxSent);
    // Each nginx variant: 16 lines, 12 with outcomes (17 of them); and 3 relayed lines of 1 outcome.
    const counts = h.intake.counts();
    expect(counts.received).toBe(35);
    expect(counts.skipped).toEqual({ no_circuit: 2, no_upstream: 4 });
    expect(counts.dropped).toEqual({ bad_circuit: 2 });
    await vi.waitFor(() => expect(h.intake.counts().outcomes).toBe(2 * 17 + 3));
    const items = h.accepted.flat();
    expect(items).toHaveLength(37);
    expect(new Set(items.map((i) => i.circuit))).toEqual(new Set(['payments']));
    expect(items.filter((i) => i.success === true)).toHaveLength(2 * 5);
    expect(items.filter((i) => i.success === false)).toHaveLength(2 * 9);
    expect(items.filter((i) => i.kind === 'rejected')).toHaveLength(2);
    expect(items.filter((i) => i.kind === 'throttled')).toHaveLength(2 * 2 + 3);
    // One datagram's attempts reach the sink together, as one call.
    expect(h.accepted.map((a) => a.length).sort()).toContain(3);
  });
});

describe('syslog intake: bad input', () => {
  it('counts and drops each kind of noise through the DropCounter, with one log line for all of them', async () => {
    const h = await start({ maxLineBytes: 400 });
    await h.send([
      Buffer.alloc(401, 'x'),
      Buffer.from('hello'),
      Buffer.from('<190>Dec  5 03:10:42 circuitlog: GET / 200'),
      Buffer.from('<190>Dec  5 03:10:42 circuitlog: [1]'),
      datagram({ v: 2 }),
      datagram({ circuit: 'a//b' }),
      datagram({ circuit: 'ghost' }),
      datagram({ caller: 'a b' }),
      datagram({ status: '700' }),
      datagram({ time: '1, 2' }),
    ]);
    await vi.waitFor(() => expect(h.intake.counts().dropped.unknown_circuit).toBe(1));
    const expected = {
      too_long: 1,
      not_syslog: 1,
      not_json: 1,
      not_our_format: 1,
      bad_version: 1,
      bad_circuit: 1,
      unknown_circuit: 1,
      bad_caller: 1,
      bad_status: 1,
      bad_time: 1,
    };
    expect(h.intake.counts().dropped).toEqual(expected);
    expect(h.drops.counts()).toEqual(expected);
    expect(h.accepted).toEqual([]);
    expect(h.log.warn).toHaveBeenCalledTimes(1);
    expect(h.log.warn.mock.calls[0]![0]).toMatchObject({ event: 'edge_dropped', example: { reason: 'too_long' } });
  });

  it('asks about an unknown circuit once per few seconds under a flood, and never hands its outcomes on', async () => {
    let now = NOW;
    const asked: string[] = [];
    const h = await start({
      clock: () => now,
      known: async (name) => {
        asked.push(name);
        return name === 'payments';
      },
    });
    await h.send(Array.from({ length: 200 }, () => datagram({ circuit: 'ghost' })));
    await vi.waitFor(() => expect(h.intake.counts().dropped.unknown_circuit).toBe(200));
    expect(asked).toEqual(['ghost']);
    now += 4_999;
    await h.send([datagram({ circuit: 'ghost' })]);
    now += 1;
    await h.send([datagram({ circuit: 'ghost' }), datagram({ circuit: 'payments' })]);
    await vi.waitFor(() => expect(h.intake.counts().outcomes).toBe(1));
    expect(asked).toEqual(['ghost', 'ghost', 'payments']);
    expect(h.accepted.flat().map((i) => i.circuit)).toEqual(['payments']);
    expect(h.intake.counts().dropped).toEqual({ unknown_circuit: 202 });
  });

  it('takes a question that throws, rejects or never answers as unknown, with no unhandled rejection', async () => {
    const h = await start({
      knownTimeoutMs: 20,
      known: (name) => {
        if (name === 'throws') throw new Error('boom');
        if (name === 'rejects') return Promise.reject(new Error('server gone'));
        if (name === 'hangs') return new Promise<boolean>(() => {});
        return true;
      },
    });
    await h.send([datagram({ circuit: 'throws' }), datagram({ circuit: 'rejects' }), datagram({ circuit: 'hangs' })]);
    await vi.waitFor(() => expect(h.intake.counts().dropped).toEqual({ unknown_circuit: 3 }));
    expect(h.accepted).toEqual([]);
  });

  it('bounds the lines waiting on a question, and counts a refused hand-over as queue_full', async () => {
    const h = await start({ known: () => new Promise<boolean>(() => {}) });
    await h.send(Array.from({ length: MAX_WAITING_LINES + 10 }, () => datagram({})));
    expect(h.intake.counts().dropped).toEqual({ queue_full: 10 });

    const full = await start({ sink: { accept: () => false } });
    await full.send([datagram({}), datagram({ status: '502, 200', time: '0.001, 0.002' })]);
    expect(full.intake.counts()).toMatchObject({ outcomes: 0, dropped: { queue_full: 2 } });
  });

  it('asks at most MAX_QUESTIONS questions at once under a flood of distinct names', async () => {
    const asked: string[] = [];
    const h = await start({
      known: (name) => {
        asked.push(name);
        return new Promise<boolean>(() => {});
      },
    });
    await h.send(Array.from({ length: 200 }, (_, i) => datagram({ circuit: `ghost-${i}` })));
    expect(asked).toHaveLength(MAX_QUESTIONS);
    expect(h.intake.counts().dropped).toEqual({ queue_full: 200 - MAX_QUESTIONS });
  });

  it('keeps at most MAX_KNOWN_NAMES answers, the oldest forgotten first', () => {
    const asked: string[] = [];
    const known = new KnownCircuits(
      (name) => {
        asked.push(name);
        return false;
      },
      () => NOW,
    );
    for (let i = 0; i < MAX_KNOWN_NAMES + 50; i++) void known.answer(`ghost-${i}`, NOW);
    expect(known.size).toBe(MAX_KNOWN_NAMES);
    void known.answer(`ghost-${MAX_KNOWN_NAMES + 49}`, NOW); // kept: not asked again
    void known.answer('ghost-0', NOW); // forgotten: asked again
    expect(asked.slice(MAX_KNOWN_NAMES + 50)).toEqual(['ghost-0']);
  });

  it('logs at most one edge_dropped line per interval under a flood (fake clock)', async () => {
    let now = NOW;
    const h = await start({ clock: () => now });
    const flood = Array.from({ length: 100 }, (_, i) => Buffer.from(`noise ${i}`));
    for (let burst = 0; burst < 5; burst++) {
      await h.send(flood);
      now += 1_000; // 5 bursts within one 10 s interval
    }
    expect(h.log.warn).toHaveBeenCalledTimes(1);
    now = NOW + 10_000;
    await h.send(flood);
    expect(h.log.warn).toHaveBeenCalledTimes(2);
    // The second line reports what was dropped since the first, up to the drop that was due to log.
    expect(h.log.warn.mock.calls[1]![0]).toMatchObject({ event: 'edge_dropped', dropped: { not_syslog: 499 + 1 } });
    // The other 99 wait for the next line, due 10 s later.
    expect(h.drops.counts()).toEqual({ not_syslog: 600 });
    expect(h.intake.counts().dropped).toEqual({ not_syslog: 600 });
  });

  it('random datagrams never crash it, and no outcome reaches the sink with a bad name or an unknown circuit', async () => {
    const h = await start({ known: (name) => (name.startsWith('ok') ? Promise.resolve(true) : name === 'sync-ok') });
    // Mostly near the documented line (each field valid 3 times in 4), so some lines do reach the sink.
    const mostly = <T, U>(valid: fc.Arbitrary<T>, junk: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
      fc.oneof({ arbitrary: valid, weight: 3 }, { arbitrary: junk, weight: 1 });
    const attempts = fc.constantFrom<[string, string]>(
      ['200', '0.001'],
      ['502, 200', '0.001, 0.002'],
      ['502 : 429', '0.1 : 0.2'],
      ['-', '-'],
    );
    const line = fc
      .record({
        v: mostly(fc.constant(1), fc.anything()),
        circuit: mostly(
          fc.constantFrom('ok/a', 'ok-b', 'sync-ok', 'nope'),
          fc.oneof(fc.string(), fc.constantFrom('', '../ok', 'ok b', 'ok//a')),
        ),
        caller: mostly(fc.constantFrom('', 'svc/1'), fc.string()),
        attempts: mostly(attempts, fc.tuple(fc.string(), fc.string())),
        retry_after: mostly(fc.constantFrom('', '5'), fc.string()),
        msec: mostly(fc.constantFrom('1796443200.000', ''), fc.oneof(fc.string(), fc.constant('9999999999.999'))),
      })
      .map(({ attempts: [status, time], ...rest }) => ({ ...rest, status, time }));
    const header = mostly(
      fc.constantFrom('<190>Dec  5 03:10:42 circuitlog: ', '<14>1 - h app - - - '),
      fc.oneof(fc.constantFrom('<190>', ''), fc.string()),
    );
    const payload = fc.oneof(
      fc.tuple(header, line).map(([h, l]) => Buffer.from(h + JSON.stringify(l))),
      fc.tuple(header, fc.string()).map(([h, s]) => Buffer.from(h + s)),
      fc.uint8Array({ maxLength: 600 }).map((a) => Buffer.from(a)),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(payload, { minLength: 1, maxLength: 20 }), async (datagrams) => {
        await h.send(datagrams);
      }),
      { numRuns: 50 },
    );
    const counts = h.intake.counts();
    expect(counts.dropped.internal_error).toBeUndefined();
    // The property made lines that do reach the sink (some after an asynchronous `known`).
    await vi.waitFor(() => expect(h.intake.counts().outcomes).toBeGreaterThan(0));
    await vi.waitFor(() => expect(h.accepted.flat().length).toBe(h.intake.counts().outcomes));
    for (const item of h.accepted.flat()) {
      expect(circuitNameProblem(item.circuit)).toBeNull();
      expect(item.circuit.startsWith('ok') || item.circuit === 'sync-ok').toBe(true);
      if (item.caller !== undefined) expect(callerProblem(item.caller)).toBeNull();
    }
  });
});

describe('syslog intake: the socket', () => {
  it('reads host:port and [v6]:port, and refuses anything else', () => {
    expect(parseListen('127.0.0.1:8514')).toEqual({ host: '127.0.0.1', port: 8514 });
    expect(parseListen('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseListen('localhost:514')).toEqual({ host: 'localhost', port: 514 });
    for (const bad of ['127.0.0.1', ':514', '127.0.0.1:70000', '::1:514', '127.0.0.1:x']) {
      expect(() => parseListen(bad), bad).toThrow(/not host:port/);
    }
  });

  it('asks the kernel for a 4 MiB receive buffer, so a burst waits there while the agent is busy', async () => {
    const h = await start();
    // Linux keeps at most net.core.rmem_max (208 KiB unless raised) and reports twice what it keeps.
    const max = Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8'));
    expect(h.intake.receiveBufferBytes).toBe(2 * Math.min(RECEIVE_BUFFER_BYTES, max));
  });

  it('rejects when the port is taken, and frees its port on close', async () => {
    const a = await start();
    await expect(startSyslogIntake({ ...baseOptions(), listen: `127.0.0.1:${a.intake.port}` })).rejects.toThrow(
      /EADDRINUSE/,
    );
    const port = a.intake.port;
    await a.intake.close();
    const again = await startSyslogIntake({ ...baseOptions(), listen: `127.0.0.1:${port}` });
    started.push(again);
    expect(again.port).toBe(port);
  });
});

function baseOptions(): SyslogIntakeOptions {
  const drops = new DropCounter(logger(), () => NOW);
  counters.push(drops);
  return { listen: '127.0.0.1:0', maxLineBytes: 8_192, sink: { accept: () => true }, known: () => true, drops };
}
