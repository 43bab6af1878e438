/**
 * The edge agent's syslog intake (issue 32; docs/gateways.md "nginx outcomes over syslog"): a
 * UDP socket nginx's `access_log syslog:` writes to, each datagram parsed by `nginx-log.ts`
 * into outcomes for the sink. Noise is counted and dropped (`DropCounter`: one rate-limited
 * log line), never a crash, and never reaches the server under a circuit it does not know.
 */
import dgram from 'node:dgram';
import { isIP } from 'node:net';
import type { OutcomeItem } from '../client/transport.js';
import type { DropCounter, OutcomeSink } from './edge-types.js';
import { KnownCircuits } from './known-circuits.js';
import { type DropReason, type LineVerdict, nginxOutcomes, syslogMessage } from './nginx-log.js';

export interface SyslogIntakeOptions {
  /** `host:port` (`[::1]:port` for IPv6) to bind the UDP socket to; port 0: any free one. Loopback, as documented. */
  readonly listen: string;
  /** Longest datagram read; a longer one is dropped (`too_long`). */
  readonly maxLineBytes: number;
  readonly sink: OutcomeSink;
  /** Whether a circuit may take outcomes from the log (it exists on the server, or `edge.syslog.create` names it). */
  readonly known: (name: string) => boolean | Promise<boolean>;
  readonly drops: DropCounter;
  readonly clock?: () => number;
  /** How long a `known` answer is kept: a flood of one unknown name asks once per `unknownTtlMs`. */
  readonly knownTtlMs?: number;
  readonly unknownTtlMs?: number;
  /** A `known` question not answered in time counts its lines `unknown_circuit`. */
  readonly knownTimeoutMs?: number;
  /**
   * The socket's receive buffer asked of the kernel (Linux caps it at `net.core.rmem_max`):
   * datagrams nginx sends while the agent is busy wait there; past it the kernel drops them.
   */
  readonly receiveBufferBytes?: number;
}

/** What the intake has seen since it started. */
export interface SyslogCounts {
  readonly received: number;
  /** Outcomes handed to the sink. */
  readonly outcomes: number;
  /** Lines that named no circuit, or contacted no upstream (the gate refused, nginx answered itself): no outcome, not noise. */
  readonly skipped: { readonly no_circuit: number; readonly no_upstream: number };
  /** Datagrams dropped, by reason (also counted by the `DropCounter`). */
  readonly dropped: Readonly<Partial<Record<DropReason, number>>>;
}

export interface SyslogIntake {
  readonly port: number;
  /** The receive buffer the kernel gave (Linux reports twice what it keeps for data). */
  readonly receiveBufferBytes: number;
  close(): Promise<void>;
  counts(): SyslogCounts;
}

/** The receive buffer asked for by default. */
export const RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024; // 4 MiB

/** Lines waiting on a `known` answer at once (at most this many times `maxLineBytes` held); past it a line is dropped (`queue_full`). */
export const MAX_WAITING_LINES = 1_000;

/** `host:port` or `[v6]:port` as a host and a port; throws on anything else. */
export function parseListen(listen: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(listen);
  const port = m === null ? Number.NaN : Number(m[3]);
  if (m === null || port > 65_535) throw new Error(`syslog listen address ${JSON.stringify(listen)} is not host:port`);
  return { host: (m[1] ?? m[2])!, port };
}

/** Each datagram to outcomes for the sink, or counted and dropped; the counts. */
class DatagramReader {
  closed = false;
  private received = 0;
  private outcomes = 0;
  private waiting = 0;
  private readonly skipped = { no_circuit: 0, no_upstream: 0 };
  private readonly dropped: Partial<Record<DropReason, number>> = {};

  constructor(
    private readonly options: SyslogIntakeOptions,
    private readonly known: KnownCircuits,
    private readonly clock: () => number,
  ) {}

  counts(): SyslogCounts {
    const { received, outcomes, skipped, dropped } = this;
    return { received, outcomes, skipped: { ...skipped }, dropped: { ...dropped } };
  }

  drop(reason: DropReason, detail: string): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
    this.options.drops.drop(reason, detail);
  }

  read(msg: Buffer): void {
    this.received++;
    const verdict = this.verdictOf(msg);
    if (verdict.kind === 'drop') this.drop(verdict.reason, verdict.detail);
    else if (verdict.kind === 'none') this.skipped[verdict.reason]++;
    else this.check(verdict.circuit, verdict.items);
  }

  private verdictOf(msg: Buffer): LineVerdict {
    const { maxLineBytes } = this.options;
    if (msg.length > maxLineBytes)
      return { kind: 'drop', reason: 'too_long', detail: `${msg.length} bytes, more than ${maxLineBytes}` };
    const text = msg.toString('utf8');
    const parsed = syslogMessage(text);
    if (parsed === null) return { kind: 'drop', reason: 'not_syslog', detail: text };
    return nginxOutcomes(parsed.message, this.clock());
  }

  /** Hands the outcomes to the sink once `known` says their circuit may take them. */
  private check(circuit: string, items: readonly OutcomeItem[]): void {
    const answer = this.known.answer(circuit, this.clock(), this.waiting < MAX_WAITING_LINES);
    if (typeof answer === 'boolean') this.settle(circuit, items, answer);
    else if (answer === null) this.drop('queue_full', `${this.waiting} lines wait on circuit checks`);
    else {
      this.waiting++;
      void answer
        .then((isKnown) => {
          this.waiting--;
          this.settle(circuit, items, isKnown);
        })
        .catch((error: unknown) => this.drop('internal_error', error instanceof Error ? error.message : String(error)));
    }
  }

  private settle(circuit: string, items: readonly OutcomeItem[], isKnown: boolean): void {
    if (this.closed) return;
    if (!isKnown) this.drop('unknown_circuit', `circuit ${JSON.stringify(circuit)} is not on the server`);
    else if (this.options.sink.accept(items)) this.outcomes += items.length;
    else this.drop('queue_full', `${items.length} outcomes for ${circuit}`);
  }
}

/** Binds the UDP socket and starts reading; resolves once bound (rejects when it cannot bind). */
export async function startSyslogIntake(options: SyslogIntakeOptions): Promise<SyslogIntake> {
  const clock = options.clock ?? Date.now;
  const known = new KnownCircuits(
    options.known,
    clock,
    options.knownTtlMs,
    options.unknownTtlMs,
    options.knownTimeoutMs,
  );
  const reader = new DatagramReader(options, known, clock);
  const { host, port } = parseListen(options.listen);
  const socket = dgram.createSocket({
    type: isIP(host) === 6 ? 'udp6' : 'udp4',
    recvBufferSize: options.receiveBufferBytes ?? RECEIVE_BUFFER_BYTES,
  });
  socket.on('message', (msg) => {
    try {
      reader.read(msg);
    } catch (error) {
      // A bug, not noise: counted and logged (rate-limited) instead of taking the agent down.
      reader.drop('internal_error', error instanceof Error ? error.message : String(error));
    }
  });
  await new Promise<void>((resolve, reject) => {
    const fail = (error: Error) => {
      socket.close();
      reject(error);
    };
    socket.once('error', fail);
    socket.bind(port, host, () => {
      socket.off('error', fail);
      resolve();
    });
  });
  // Once bound, a socket error is counted and logged (rate-limited), never thrown.
  socket.on('error', (error) => reader.drop('internal_error', `syslog socket: ${error.message}`));
  return {
    port: socket.address().port,
    receiveBufferBytes: socket.getRecvBufferSize(),
    counts: () => reader.counts(),
    close: () =>
      new Promise<void>((resolve) => {
        if (reader.closed) return resolve();
        reader.closed = true;
        socket.close(() => resolve());
      }),
  };
}
