import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { refusedPort } from '../refused-port.js';

/**
 * How a fault node misbehaves once it has read a request head:
 * - `refuse`: nothing listens on its port (ECONNREFUSED);
 * - `reset`: status line, headers and part of a Content-Length body, then a TCP RST;
 * - `hang`: accepts and never answers;
 * - `slow`: a whole body, one byte every `byteEveryMs`;
 * - `stall`: part of a body, then silence longer than any test timeout;
 * - `huge-headers`: a 100 KiB header block, over undici's 16 KiB limit;
 * - `garbage`: `HELLO` instead of a status line;
 * - `storm`: always `503`;
 * - `continue`: an unsolicited `100 Continue` and a `103 Early Hints`, split over packets, then a small 200;
 * - `no-content`: `204` with `Content-Length: 0`; `not-modified`: `304` with `Content-Length: 300`;
 * - `ok`: a small 200.
 */
export type FaultKind =
  | 'refuse'
  | 'reset'
  | 'hang'
  | 'slow'
  | 'stall'
  | 'huge-headers'
  | 'garbage'
  | 'storm'
  | 'continue'
  | 'no-content'
  | 'not-modified'
  | 'ok';

export interface FaultOptions {
  /** Body length for `slow`, `stall` and `reset` (announced in Content-Length). */
  readonly bodyBytes?: number;
  /** Gap between bytes for `slow`. */
  readonly byteEveryMs?: number;
}

const HUGE_HEADER_BYTES = 100 * 1024; // 100 KiB, over undici's (and Node's) 16 KiB default
const RESET_AFTER_MS = 30; // let the proxy forward the head before the RST arrives
const INTERIM_GAP_MS = 15; // separate TCP packets for the pieces of a `continue` answer

function head(status: string, length: number, extra = ''): string {
  return `HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${length}\r\n${extra}\r\n`;
}

/**
 * A loopback upstream node on 127.0.0.1, port 0, speaking raw TCP so it can break HTTP in
 * ways `http.createServer` never would. Every socket and timer it made ends in `stop()`.
 */
export class FaultNode {
  /** Request heads read (every request, health checks included). */
  hits = 0;
  port = 0;
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly id: string,
    readonly kind: FaultKind,
    readonly options: FaultOptions = {},
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Connections still open from the proxy. */
  get openSockets(): number {
    return this.sockets.size;
  }

  get bodyBytes(): number {
    return this.options.bodyBytes ?? 20;
  }

  async start(): Promise<this> {
    if (this.kind === 'refuse') {
      this.port = await refusedPort();
      return this;
    }
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    const server = this.server;
    this.server = null;
    if (server === null) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.on('error', () => {}); // the proxy cuts sockets on purpose (timeouts, header overflow)
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      // The proxy sends bodiless GETs here, so a request is a head ending in a blank line.
      pending += chunk.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end !== -1; end = pending.indexOf('\r\n\r\n')) {
        pending = pending.slice(end + 4);
        this.hits++;
        this.answer(socket);
      }
    });
  }

  private answer(socket: net.Socket): void {
    const n = this.bodyBytes;
    switch (this.kind) {
      case 'refuse':
      case 'hang':
        return;
      case 'ok':
        socket.write(head('200 OK', 2) + 'ok');
        return;
      case 'storm':
        socket.write(head('503 Service Unavailable', 5) + 'storm');
        return;
      case 'continue':
        // Split inside the status line and between interim answers: the proxy must reassemble them.
        socket.write('HTTP/1.1 100 Cont');
        this.later(INTERIM_GAP_MS, () =>
          socket.write('inue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a.css>\r\n\r\n'),
        );
        this.later(2 * INTERIM_GAP_MS, () => socket.write(head('200 OK', 2) + 'ok'));
        return;
      case 'no-content':
        socket.write('HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nx-from: fault\r\n\r\n');
        return;
      case 'not-modified':
        socket.write('HTTP/1.1 304 Not Modified\r\ncontent-length: 300\r\netag: "v1"\r\n\r\n');
        return;
      case 'garbage':
        socket.end('HELLO\r\n\r\n');
        return;
      case 'huge-headers':
        socket.write(head('200 OK', 2, `x-huge: ${'a'.repeat(HUGE_HEADER_BYTES)}\r\n`) + 'ok');
        return;
      case 'reset':
        socket.write(head('200 OK', n) + 'x'.repeat(Math.floor(n / 4)));
        this.later(RESET_AFTER_MS, () => socket.resetAndDestroy());
        return;
      case 'stall':
        socket.write(head('200 OK', n) + 'x'.repeat(Math.floor(n / 4))); // and nothing more
        return;
      case 'slow': {
        socket.write(head('200 OK', n));
        const every = this.options.byteEveryMs ?? 20;
        const send = (i: number) => {
          if (i >= n || socket.destroyed) return;
          socket.write(String.fromCharCode(97 + (i % 26)));
          this.later(every, () => send(i + 1));
        };
        this.later(every, () => send(0));
        return;
      }
    }
  }
}

/** The body a `slow` node of `bytes` sends: a, b, c, ... */
export function slowBody(bytes: number): string {
  let out = '';
  for (let i = 0; i < bytes; i++) out += String.fromCharCode(97 + (i % 26));
  return out;
}
