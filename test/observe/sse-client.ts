import http from 'node:http';

export interface SseEvent {
  /** The id as a number (SQLite's transition ids; NaN for a Redis cursor: see `rawId`). */
  readonly id: number;
  /** The id as sent (opaque: a Redis cursor is numbers joined by dots). */
  readonly rawId: string;
  readonly event: string;
  readonly data: any;
}

export interface SseStream {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** Comment lines received so far (heartbeats), without the leading ':'. */
  readonly comments: string[];
  /** The next event, waiting up to `timeoutMs` for it. */
  next(timeoutMs?: number): Promise<SseEvent>;
  /** Events already received and not yet taken. */
  readonly queued: SseEvent[];
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/**
 * A minimal text/event-stream reader over node:http (no EventSource in Node 20), that
 * resolves once the response head has arrived. A non-200 answer's body is in `body`.
 */
export function openStream(url: string, headers: Record<string, string> = {}): Promise<SseStream & { body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      const queued: SseEvent[] = [];
      const comments: string[] = [];
      const waiters: ((e: SseEvent) => void)[] = [];
      let buffer = '';
      let body = '';
      const ended = new Promise<void>((done) => res.once('close', () => done()));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (res.statusCode !== 200) {
          body += chunk;
          return;
        }
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.includes(':'))
              fields[line.slice(0, line.indexOf(':'))] = line.slice(line.indexOf(':') + 1).trimStart();
          }
          if (fields.event === undefined) continue;
          const event = {
            id: Number(fields.id),
            event: fields.event,
            data: JSON.parse(fields.data ?? 'null'),
          } as SseEvent;
          Object.defineProperty(event, 'rawId', { value: fields.id ?? '', enumerable: false }); // toEqual on events compares what it always did
          const waiter = waiters.shift();
          if (waiter) waiter(event);
          else queued.push(event);
        }
      });
      const stream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        comments,
        queued,
        ended,
        get body() {
          return body;
        },
        next(timeoutMs = 5_000) {
          const ready = queued.shift();
          if (ready) return Promise.resolve(ready);
          return new Promise<SseEvent>((ok, fail) => {
            const timer = setTimeout(() => fail(new Error(`no event within ${timeoutMs} ms`)), timeoutMs);
            waiters.push((e) => {
              clearTimeout(timer);
              ok(e);
            });
          });
        },
        close() {
          req.destroy();
        },
      };
      if (res.statusCode !== 200) res.once('end', () => resolve(stream));
      else resolve(stream);
    });
    req.on('error', reject);
  });
}
