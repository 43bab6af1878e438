import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export type NodeMode = 'ok' | 'fail' | 'hang';

/** What a fake node saw of one request. */
export interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
}

/**
 * A loopback upstream node on 127.0.0.1, port 0. `ok` answers (and echoes bodies with
 * their sha256; Set-Cookie on paths with 'cookies'), `fail` answers 500, `hang` never answers; `stop()` refuses connections.
 */
export class FakeNode {
  mode: NodeMode = 'ok';
  /** Wait this long before answering (`ok` and `fail`). */
  delayMs = 0;
  /** While set, requests wait for it before being answered. */
  gate: Promise<void> | null = null;
  /** Answer `ok` requests with this body instead of the JSON echo. */
  fixedBody: Buffer | null = null;
  /** When set, `ok` requests (their body read) get this answer instead of the echo. */
  respond:
    | ((req: http.IncomingMessage) => { status?: number; headers?: http.OutgoingHttpHeaders; body?: string })
    | null = null;
  readonly seen: Seen[] = [];
  healthChecks = 0;
  /** Requests whose connection closed before this node answered them. */
  abandoned = 0;
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(readonly id: string) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests other than health checks. */
  get hits(): number {
    return this.seen.length;
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => this.handle(req, res));
    server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.url === '/health') {
      this.healthChecks++;
      if (this.mode === 'hang') return;
      res.writeHead(this.mode === 'ok' ? 200 : 503).end();
      return;
    }
    this.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    res.on('close', () => {
      if (!res.writableEnded) this.abandoned++;
    });
    if (this.mode === 'hang') return;
    if (this.gate !== null) {
      void this.gate.then(() => this.answer(req, res));
      return;
    }
    if (this.delayMs > 0) {
      const timer = setTimeout(() => this.answer(req, res), this.delayMs);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    this.answer(req, res);
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.mode === 'fail') {
      req.resume();
      res.writeHead(500, { 'content-type': 'text/plain', 'x-from': this.id }).end(`boom from ${this.id}`);
      return;
    }
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      size += chunk.length;
      chunks.push(chunk);
    });
    req.on('end', () => {
      const custom = this.respond?.(req);
      if (custom) {
        res.writeHead(custom.status ?? 200, { 'x-from': this.id, ...custom.headers }).end(custom.body ?? '');
        return;
      }
      const body =
        size > 0
          ? Buffer.concat(chunks)
          : (this.fixedBody ?? Buffer.from(JSON.stringify({ node: this.id, method: req.method, url: req.url })));
      res.writeHead(200, {
        'content-type': size > 0 ? 'application/octet-stream' : 'application/json',
        'x-body-sha256': hash.digest('hex'),
        'x-body-bytes': String(size),
        'x-from': this.id,
        'keep-alive': 'timeout=5',
        ...(req.url?.includes('cookies') ? { 'set-cookie': ['a=1', 'b=2'] } : {}),
      });
      res.end(body);
    });
  }
}

/** Start fake nodes with the given ids. */
export async function startNodes(...ids: string[]): Promise<Record<string, FakeNode>> {
  const nodes = await Promise.all(ids.map((id) => new FakeNode(id).start()));
  return Object.fromEntries(nodes.map((n) => [n.id, n]));
}

/** The config YAML for one upstream `users` over the given nodes (dc = id before the first '-'). */
export function proxyYaml(nodes: Record<string, { readonly id: string; readonly url: string }>, extra = ''): string {
  const lines = Object.values(nodes).map((n) => `      - { id: ${n.id}, dc: ${n.id.split('-')[0]}, url: "${n.url}" }`);
  return `local_dc: dc1
upstreams:
  users:
    nodes:
${lines.join('\n')}
${extra
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => `    ${l}`)
  .join('\n')}
`;
}
